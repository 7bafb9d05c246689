"""Fine-tune the reader on the labelled questions of the eval sets, leaving one corpus out.

Never imported at run time (needs torch). Starts from a self-supervised checkpoint
(router/reader/train.py) and trains on query groups built from the eval sets' cached searches
(.fieldguide/reader-eval/<set>.json, written by router.reader.evaluate), mixed 1:1 with the
self-supervised groups (replay, so the reader keeps what it learned from the docs):

- an answerable question: its best-ranked gold section among the top 20 against the top-ranked
  non-gold sections (3); skipped when no gold section is in the top 20;
- an off-topic question: a no-answer group of its top 4 sections;
- sections shown and questions cut exactly as evaluate.py gives them to the reader.

The left-out corpus L is never read for training, nor for choosing the step count: a second
corpus H (a real-question set, --holdout) is also left out of training, and the reader is scored
on H (and, for the record only, on L) every --eval-every steps; the step count is chosen on H.

    python -m router.reader.finetune --leave-out fastapi --holdout traefik \\
        --init /tmp/rt2/out/ckpt.pt --docs /work/tmp/reader-docs --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

import numpy as np

from router.reader import evaluate as ev
from router.reader import train as tr

OPENSHIFT_CAP = 100  # answerable questions of openshift-4.15 at most, so it does not dominate
NULL_SHARE = 0.25  # off-topic groups among the labelled ones


def cut_question(qtok, question: str) -> str:
    """The question as evaluate.Reader cuts it (by character offset, case kept)."""
    e = qtok.encode(question, add_special_tokens=False)
    if len(e.ids) <= ev.MAX_QUESTION_TOKENS:
        return question
    return question[: e.offsets[ev.MAX_QUESTION_TOKENS - 1][1]]


def shown(hit: dict) -> str:
    """A section as evaluate.Reader sees it (cut before tokenising)."""
    return hit["text"][: ev.MAX_TOKENS * 8]


def labelled_groups(sets: list[str], qtok, negatives: int = 3) -> tuple[list[dict], list[dict]]:
    """(answerable groups, off-topic groups) from the cached searches of these sets."""
    ans: list[dict] = []
    off: list[dict] = []
    for name in sets:
        data = json.loads((ev.CACHE / f"{name}.json").read_text())
        n_ans = 0
        for q in data["questions"]:
            hits = q["hits"][: ev.TOP_SEARCH]
            query = cut_question(qtok, q["question"])
            if q["kind"] == "answerable":
                gold = [h for h in hits if h["gold"]]
                if not gold or (name == "openshift-4.15" and n_ans >= OPENSHIFT_CAP):
                    continue
                negs = [h for h in hits if not h["gold"]][:negatives]
                if len(negs) < negatives:
                    continue
                n_ans += 1
                texts = [shown(gold[0])] + [shown(h) for h in negs]
                ans.append(
                    {
                        "corpus": name,
                        "kind": "labelled",
                        "query": query,
                        "texts": texts,
                        "target": 0,
                    }
                )
            else:
                texts = [shown(h) for h in hits[: negatives + 1]]
                off.append(
                    {
                        "corpus": name,
                        "kind": "offtopic",
                        "query": query,
                        "texts": texts,
                        "target": -1,
                    }
                )
    return ans, off


def labelled_stream(ans: list[dict], off: list[dict], rng: random.Random):
    """Endless epochs: every answerable group once, off-topic groups drawn (cycling through a
    shuffled pool, repeated when too few) to a quarter of the epoch."""
    n_off = round(len(ans) * NULL_SHARE / (1 - NULL_SHARE))
    pool: list[dict] = []
    while True:
        picked: list[dict] = []
        while len(picked) < n_off:
            if not pool:
                pool = off[:]
                rng.shuffle(pool)
            picked.append(pool.pop())
        epoch = ans + picked
        rng.shuffle(epoch)
        yield from epoch


def score_set(model, tok, qtok, name: str) -> dict:
    """Per question: best logit over the top 5 (as evaluate.py), best cosine, reranked hit."""
    import torch

    data = json.loads((ev.CACHE / f"{name}.json").read_text())
    rows = []
    model.eval()
    with torch.no_grad():
        for q in data["questions"]:
            hits = q["hits"][: ev.TOP_READ]
            query = cut_question(qtok, q["question"])
            enc = tok(
                [query] * len(hits),
                [shown(h) for h in hits],
                truncation="only_second",
                max_length=ev.MAX_TOKENS,
                padding=True,
                return_tensors="pt",
            )
            logits = model(**enc).view(-1).numpy()
            rows.append(
                {
                    "kind": q["kind"],
                    "logit": float(logits.max()),
                    "cosine": max(h["vector"] for h in hits),
                    "gold": [h["gold"] for h in hits],
                    "top": int(np.argmax(logits)),
                }
            )
    model.train()
    pos = [r["logit"] for r in rows if r["kind"] == "answerable"]
    neg = [r["logit"] for r in rows if r["kind"] != "answerable"]
    ans = [r for r in rows if r["kind"] == "answerable"]
    return {
        "set": name,
        "auc_reader": ev.auc(pos, neg),
        "auc_cosine": ev.auc(
            [r["cosine"] for r in ans], [r["cosine"] for r in rows if r["kind"] != "answerable"]
        ),
        "hit1_search": sum(r["gold"][0] for r in ans) / max(len(ans), 1),
        "hit1_reader": sum(r["gold"][r["top"]] for r in ans) / max(len(ans), 1),
    }


def run(args) -> None:
    import torch
    from tokenizers import Tokenizer

    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def say(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        with open(out / "finetune.log", "a") as log:
            log.write(line + "\n")

    tok, model = tr.load_model()
    model.load_state_dict(torch.load(args.init, map_location="cpu"))
    qtok = Tokenizer.from_file(str(tr._source_dir() / tr.TOKENIZER_FILE))
    qtok.no_truncation()
    qtok.no_padding()
    left = {args.leave_out, *([args.holdout] if args.holdout else [])}
    train_sets = [s for s in ev.SETS if s not in left]
    ans, off = labelled_groups(train_sets, qtok)
    sections, _ = tr.load_sections(Path(args.docs))
    replay = tr.build_groups(sections, args.seed)
    rng = random.Random(args.seed)
    rng.shuffle(replay)
    stats = {
        "leave_out": args.leave_out,
        "holdout": args.holdout,
        "train_sets": train_sets,
        "answerable": {s: sum(g["corpus"] == s for g in ans) for s in train_sets},
        "offtopic": {s: sum(g["corpus"] == s for g in off) for s in train_sets},
        "replay_groups": len(replay),
        "seed": args.seed,
        "init": args.init,
    }
    (out / "data.json").write_text(json.dumps(stats, indent=1) + "\n")
    say(f"data: {json.dumps(stats)}")
    stream = labelled_stream(ans, off, rng)

    model.train()
    for module in [model.bert.embeddings, *model.bert.encoder.layer[: args.freeze_layers]]:
        for p in module.parameters():
            p.requires_grad = False
    params = [p for p in model.parameters() if p.requires_grad]
    head = {id(model.scale), id(model.shift)}
    opt = torch.optim.AdamW(
        [
            {"params": [p for p in params if id(p) not in head], "lr": args.lr},
            {"params": [p for p in params if id(p) in head], "lr": args.head_lr},
        ],
        weight_decay=0.01,
    )
    warm = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.05, (args.steps - s) / (args.steps - warm)))
    )
    curve: list[dict] = []

    def checkpoint(step: int) -> None:
        row: dict = {"step": step}
        for name in [args.holdout, args.leave_out if args.score_leave_out else ""]:
            if name:
                row[name] = score_set(model, tok, qtok, name)
        curve.append(row)
        (out / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
        torch.save(model.state_dict(), out / f"ckpt-{step}.pt")
        say(
            "eval step {}: {}".format(
                step,
                "; ".join(
                    f"{n} AUC {r['auc_reader']:.3f} (cos {r['auc_cosine']:.3f})"
                    f" hit1 {r['hit1_reader']:.2f} (search {r['hit1_search']:.2f})"
                    for n, r in row.items()
                    if n != "step"
                ),
            )
        )

    if args.eval_every and args.eval_start:
        checkpoint(0)
    half = args.batch // 2
    window: list[float] = []
    lab_loss: list[float] = []
    t0 = time.time()
    replay_at = args.replay_offset
    for step in range(1, args.steps + 1):
        batch = [next(stream) for _ in range(half)]
        batch += [replay[(replay_at + k) % len(replay)] for k in range(args.batch - half)]
        replay_at += args.batch - half
        pairs = [(g["query"], t) for g in batch for t in g["texts"]]
        enc = tr.encode(tok, pairs, args.max_len)
        logits = model(**enc).view(len(batch), -1)
        full = torch.cat([torch.zeros(len(batch), 1), logits], dim=1)
        target = torch.tensor([g["target"] + 1 for g in batch])
        losses = torch.nn.functional.cross_entropy(full, target, reduction="none")
        loss = losses.mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        window.append(loss.item())
        lab_loss.append(losses[:half].mean().item())
        if step % args.log_every == 0:
            say(
                f"step {step} loss {np.mean(window):.4f} labelled {np.mean(lab_loss):.4f}"
                f" lr {sched.get_last_lr()[0]:.2e} {time.time() - t0:.0f}s"
            )
            window, lab_loss = [], []
        if args.eval_every and step % args.eval_every == 0:
            checkpoint(step)
    if not args.eval_every or args.steps % args.eval_every:
        torch.save(model.state_dict(), out / f"ckpt-{args.steps}.pt")
    say("done")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--leave-out", required=True, help="the eval set never trained on")
    ap.add_argument("--holdout", default="", help="a second set left out, to choose the steps on")
    ap.add_argument("--init", required=True, help="the self-supervised checkpoint to start from")
    ap.add_argument("--docs", required=True, help="the self-supervised docs (replay)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument(
        "--batch", type=int, default=8, help="groups a step: half labelled, half replay"
    )
    ap.add_argument("--max-len", type=int, default=192)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--freeze-layers", type=int, default=3)
    ap.add_argument("--replay-offset", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--eval-start", action="store_true", help="score the start checkpoint too")
    ap.add_argument(
        "--score-leave-out",
        action="store_true",
        help="score the left-out set at each checkpoint too (for the record only)",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    run(args)


if __name__ == "__main__":
    main()
