# ruff: noqa
# mypy: ignore-errors
"""Gold-section reach in the top k: BM25 tokens stemmed by the S-stemmer (today) vs Snowball."""

import sys, json

sys.path.insert(0, "/work/main")
import numpy as np
from bot import api
from bot.evaluation import calibrate as fit
from bot.evaluation.retrieval import matches
from bot.evaluation.answers import split_offtopic
from router.engine import Engine
from router import condense, words
import index.search as S
import Stemmer

sb = Stemmer.Stemmer("english")
SETS = {
    "claude-docs": "/work/shared/eval/claude-docs",
    "openshift-4.15": "/work/shared/eval/openshift-4.15",
    "examples": "/work/main/examples",
    "fastapi": "/work/main/bench/sets/fastapi",
    "traefik": "/work/main/bench/sets/traefik",
    "duckdb": "/work/main/bench/sets/duckdb",
    "chezmoi": "/work/main/bench/sets/chezmoi",
}
orig = S.stem


def snow(w):
    return sb.stemWord(w) if w.isalpha() else orig(w)


from pathlib import Path

emb = api._guide(None).embedder
for name in sys.argv[1:]:
    d = Path(SETS[name])
    db = api.eval_index(api.EVAL_WORK, d, emb)
    eng = Engine(db, emb)
    s = eng.loaded().searcher
    recs = s.fetch(list(range(s.size)))
    items = fit.load_set(d)
    ans, _ = split_offtopic(items)
    qs = []
    for q in ans:
        gold = [g for g in q["gold"] if g.get("doc")]
        if not gold:
            continue
        text, _ = words.correct_typos(condense.plain(q["question"]), s)
        vec, _ = eng.embed_query(text)
        qs.append((text, vec, gold))
    vecs = s.vectors
    out = {}
    for label, st in (("S", orig), ("snowball", snow)):
        S.stem = st
        bm = S.BM25(S.bm25_tokens(r["search_text"]) for r in recs)
        for w in (0.4,):
            reach = {5: 0, 10: 0, 20: 0}
            for text, vec, gold in qs:
                b = bm.scores(S.tokenize(text))
                v = (vecs @ vec.astype(np.float32)).astype(np.float64)
                f = w * S.minmax(b) + (1 - w) * S.minmax(v)
                order = np.argsort(-f)
                seen = []  # distinct sections in rank order
                for r in order[:200]:
                    sec = s.sections[r]
                    if sec not in seen:
                        seen.append(sec)
                    if len(seen) >= 20:
                        break
                firsts = {}
                for r in order[:400]:
                    firsts.setdefault(s.sections[r], r)
                hitsec = [
                    i
                    for i, sec in enumerate(seen)
                    if any(matches(recs[firsts[sec]], g) for g in gold)
                ]
                for k in reach:
                    reach[k] += bool(hitsec) and hitsec[0] < k
            out[f"{label} w{w}"] = {k: round(v / len(qs), 3) for k, v in reach.items()}
    S.stem = orig
    print(name, len(qs), json.dumps(out), flush=True)
