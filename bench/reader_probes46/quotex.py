"""Token recall per set for quote variants, in one process per set (answerable questions only)."""
import sys, json, statistics
sys.path.insert(0, "/work/main")
from pathlib import Path
from bot import api
from bot.settings import Settings
from bot.evaluation.answers import load_stopwords, token_scores, sample, split_offtopic
from bot.evaluation.retrieval import load_items
from router import offline
SETS = {"claude-docs": "/work/shared/eval/claude-docs", "openshift-4.15": "/work/shared/eval/openshift-4.15",
        "examples": "/work/main/examples", "fastapi": "/work/main/bench/sets/fastapi",
        "traefik": "/work/main/bench/sets/traefik", "duckdb": "/work/main/bench/sets/duckdb",
        "chezmoi": "/work/main/bench/sets/chezmoi"}
variants = json.loads(sys.argv[2])  # list of {name: {attr: value}}
name = sys.argv[1]
d = Path(SETS[name])
answerable, _ = split_offtopic(load_items(d / "questions.jsonl"))
qs = sample(answerable, 100 if name == "openshift-4.15" else None, 0)
sw = load_stopwords(d)
db = f"/work/main/.fieldguide/eval/{name}-local-all-MiniLM-L6-v2-int8.db"
guide = api._guide(None, db)
pipe = guide.pipeline
pipe.answer("warm up")
res = {}
for vname, attrs in variants.items():
    for k, v in attrs.items():
        setattr(offline, k, v)
    rec, lens, texts = [], [], []
    for q in qs:
        a = pipe.answer(q["question"])
        r = 0.0 if a.decision == "ABSTAIN" else token_scores(a.text, q["answer"], sw)[0]
        rec.append(r); lens.append(len(a.text)); texts.append(a.text)
    res[vname] = (round(statistics.mean(rec), 4), int(statistics.median(lens)), rec)
base = next(iter(res))
for v, (m, ml, rec) in res.items():
    diff = sum(1 for a, b in zip(rec, res[base][2]) if abs(a - b) > 1e-9)
    print(f"{name:15s} {v:12s} recall {m:.4f} median {ml} changed {diff}/{len(rec)}", flush=True)
