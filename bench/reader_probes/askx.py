# ruff: noqa
# mypy: ignore-errors
"""Gold reach in the top k: searching with the whole question (today) vs its asking sentences vs both fused."""

import sys, json

sys.path.insert(0, "/work/main")
import numpy as np
from pathlib import Path
from bot import api
from bot.evaluation import calibrate as fit
from bot.evaluation.retrieval import matches
from bot.evaluation.answers import split_offtopic
from router.engine import Engine
from router import condense, words, reading
import index.search as S

SETS = {
    "claude-docs": "/work/shared/eval/claude-docs",
    "openshift-4.15": "/work/shared/eval/openshift-4.15",
    "examples": "/work/main/examples",
    "fastapi": "/work/main/bench/sets/fastapi",
    "traefik": "/work/main/bench/sets/traefik",
    "duckdb": "/work/main/bench/sets/duckdb",
    "chezmoi": "/work/main/bench/sets/chezmoi",
}
emb = api._guide(None).embedder


def reach_of(s, recs, f, gold):
    order = np.argsort(-f)[:400]
    seen = []
    first = {}
    for r in order:
        sec = s.sections[r]
        if sec not in first:
            first[sec] = r
            seen.append(sec)
        if len(seen) >= 20:
            break
    hit = [i for i, sec in enumerate(seen) if any(matches(recs[first[sec]], g) for g in gold)]
    return hit[0] if hit else 99


for name in sys.argv[1:]:
    d = Path(SETS[name])
    db = api.eval_index(api.EVAL_WORK, d, emb)
    eng = Engine(db, emb)
    s = eng.loaded().searcher
    recs = s.fetch(list(range(s.size)))
    ans, _ = split_offtopic(fit.load_set(d))
    res = {"whole": [], "asking": [], "both": []}
    n = 0
    for q in ans:
        gold = [g for g in q["gold"] if g.get("doc")]
        if not gold:
            continue
        n += 1
        text, _ = words.correct_typos(condense.plain(q["question"]), s)
        ask = reading.read(condense.plain(q["question"])).asking or text
        fs = {}
        for lab, t in (("whole", text), ("asking", ask)):
            v = eng.embed_query(t)[0]
            b = s.bm25.scores(S.tokenize(t))
            vs = (s.vectors @ v.astype(np.float32)).astype(np.float64)
            fs[lab] = 0.4 * S.minmax(b) + 0.6 * S.minmax(vs)
        fs["both"] = 0.5 * fs["whole"] + 0.5 * fs["asking"]
        for lab, f in fs.items():
            res[lab].append(reach_of(s, recs, f, gold))
    print(
        name,
        n,
        json.dumps(
            {
                lab: {k: round(np.mean(np.array(v) < k), 3) for k in (5, 10, 20)}
                for lab, v in res.items()
            }
        ),
        flush=True,
    )
