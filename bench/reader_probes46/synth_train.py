"""Fine-tune the reader (880-step checkpoint) on questions written in users' voice against sections
of five other projects' docs: answerable ones (their section is the positive) and close unanswerable
ones (their own section among the negatives of a no-answer group); replayed 1:1 with the
self-supervised groups. Evaluated on the eval sets (none of whose docs or questions it saw)."""
import sys, json, random, time, argparse
from pathlib import Path
import numpy as np
sys.path.insert(0, "/work/wt/synth46")
from router.reader import train as T

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=300)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--lr", type=float, default=2e-5)
ap.add_argument("--init", default="/tmp/rt2/out/ckpt.pt")
ap.add_argument("--out", default="/tmp/x46/synth/run")
ap.add_argument("--replay", type=float, default=0.5)
ap.add_argument("--seed", type=int, default=46)
ap.add_argument("--minutes", type=float, default=40)
ap.add_argument("--parts", default="1,2")
ap.add_argument("--freeze", type=int, default=2)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--balance", action="store_true")
args = ap.parse_args()
import torch
torch.set_num_threads(args.threads); random.seed(args.seed); np.random.seed(args.seed); torch.manual_seed(args.seed)
out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
log = open(out / "train.log", "a")
def say(m):
    line = f"{time.strftime('%H:%M:%S')} {m}"; print(line, flush=True); log.write(line + "\n"); log.flush()
sections, files = T.load_sections(Path("/work/tmp/reader-docs"))
written = [json.loads(l) | {"part": k} for k in args.parts.split(",") for l in open(f"/tmp/x46/synth/part{k}.out.jsonl") if l.strip()]
rng = random.Random(args.seed)
by_corpus = {}
for i, s in enumerate(sections):
    by_corpus.setdefault(s.corpus, []).append(i)
bm = {c: T.BM25([sections[i].shown() for i in idx]) for c, idx in by_corpus.items()}
groups = []
for w in written:
    sid = w["sid"]; s = sections[sid]; idx = by_corpus[s.corpus]
    for kind in ("answerable", "unanswerable"):
        q = w.get(kind)
        if not q: continue
        hits = T.BM25.top(bm[s.corpus], [q], 20)[0]
        negs = [idx[h] for h in hits if not (sections[idx[h]].doc == s.doc and sections[idx[h]].path == s.path)][:T.NEGATIVES]
        if len(negs) < T.NEGATIVES: continue
        texts = [s.shown()] + [sections[j].shown() for j in negs]
        groups.append({"query": q, "texts": texts, "target": 0 if kind == "answerable" else -1, "kind": kind, "part": w["part"]})
if args.balance:
    # per part and per style (an issue: title and body; a chat line), as many answerable groups as
    # unanswerable: the writers' style must not tell the label
    kept = []
    for part in sorted({g["part"] for g in groups}):
        for issue in (True, False):
            a = [g for g in groups if g["part"] == part and ("\n" in g["query"]) == issue and g["target"] == 0]
            u = [g for g in groups if g["part"] == part and ("\n" in g["query"]) == issue and g["target"] < 0]
            n = min(len(a), len(u))
            kept += rng.sample(a, n) + rng.sample(u, n)
    groups = kept
rng.shuffle(groups)
replay = T.build_groups(sections, args.seed)
say(f"written {len(written)} -> groups {len(groups)} (no-answer {sum(g['target']<0 for g in groups)}), replay pool {len(replay)}")
tok, model = T.load_model()
model.load_state_dict(torch.load(args.init, map_location="cpu"))
model.train()
for m in [model.bert.embeddings, *model.bert.encoder.layer[:args.freeze]]:
    for p in m.parameters(): p.requires_grad = False
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
n_syn = max(1, round(args.batch * (1 - args.replay)))
start = time.time(); win = []; acc = []
for step in range(1, args.steps + 1):
    batch = [groups[((step - 1) * n_syn + k) % len(groups)] for k in range(n_syn)]
    batch += [replay[((step - 1) * (args.batch - n_syn) + k) % len(replay)] for k in range(args.batch - n_syn)]
    pairs = [(g["query"], t) for g in batch for t in g["texts"]]
    enc = T.encode(tok, pairs, T.MAX_TOKENS)
    logits = model(**enc).view(len(batch), -1)
    full = torch.cat([torch.zeros(len(batch), 1), logits], dim=1)
    target = torch.tensor([g["target"] + 1 for g in batch])
    loss = torch.nn.functional.cross_entropy(full, target)
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(params, 1.0); opt.step()
    win.append(loss.item()); acc.append(float((full[:n_syn].argmax(1) == target[:n_syn]).float().mean()))
    if step % 25 == 0:
        say(f"step {step} loss {np.mean(win):.4f} synth-acc {np.mean(acc):.3f} {time.time()-start:.0f}s"); win, acc = [], []
    if time.time() - start > args.minutes * 60:
        say(f"time cap at step {step}"); break
torch.save(model.state_dict(), out / "ckpt.pt")
say("exporting")
T.export(out / "ckpt.pt", out / "model")
say("done")
