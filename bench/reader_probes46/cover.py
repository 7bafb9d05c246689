"""Probe: unit-level idf coverage of the asking sentences' content words (best sentence/unit of the
top 3 chunks), as a decision signal, leave one corpus out."""
import pickle, numpy as np, sys, re
sys.path.insert(0, "/work/main")
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from router import reading
from index.search import tokenize, STOPWORDS
from index.chunker import SENTENCE_END
from bot import api
from router.words import snowball
SETS = ["claude-docs","openshift-4.15","examples","fastapi","traefik","duckdb","chezmoi"]
F = ("sim","gap","rare","unseen","missing","phrase","agree")
data = {}
for s in SETS:
    d = pickle.load(open(f"/tmp/x45/{s}.pkl","rb"))
    g = api._guide(None, f"/work/main/.fieldguide/eval/{s}-local-all-MiniLM-L6-v2-int8.db")
    bm = g.engine.loaded().searcher.bm25
    rows = []
    for e, x in zip(d["examples"], d["extra"]):
        if e.kind not in ("question","offtopic") or x is None: continue
        f = [float(getattr(e.signals,n) or 0) for n in F]
        asked = reading.read(e.question).asking or e.question
        q = [t for t in tokenize(asked) if t not in STOPWORDS and len(t) > 2]
        qs = {snowball(t) for t in q}
        best = bestst = 0.0
        for h in x["hits"][:3]:
            for unit in re.split(r"\n\s*\n|(?<=[.!?])\s+", h[2]):
                toks = tokenize(unit)
                best = max(best, bm.coverage(q, toks))
                st = {snowball(t) for t in toks}
                bestst = max(bestst, bm.coverage([t for t in q if snowball(t) in st] , q) if q else 0)
        chunk = max((bm.coverage(q, tokenize(h[2])) for h in x["hits"][:3]), default=0)
        rows.append((e.label, f + [best, bestst, chunk], e.question))
    data[s] = rows
    print(s, "done", flush=True)
pickle.dump(data, open("/tmp/x46/cover.pkl", "wb"))
def stack(ss):
    y = np.array([r[0] for s in ss for r in data[s]]); X = np.array([r[1] for s in ss for r in data[s]], float)
    w = np.concatenate([np.where(np.array([r[0] for r in data[s]])==1, 0.5/max(1,sum(r[0] for r in data[s])), 0.5/max(1,sum(1-r[0] for r in data[s]))) for s in ss])
    return y, X, w*len(y)
for out in SETS:
    tr = [s for s in SETS if s != out]
    y, X, w = stack(tr); yt, Xt, _ = stack([out])
    mu, sd = X.mean(0), X.std(0)+1e-9
    res = []
    for cols in (list(range(7)), list(range(7))+[7], list(range(7))+[8], list(range(7))+[9]):
        m = LogisticRegression(max_iter=3000).fit((X[:,cols]-mu[cols])/sd[cols], y, sample_weight=w)
        res.append(roc_auc_score(yt, m.decision_function((Xt[:,cols]-mu[cols])/sd[cols])))
    print(f"{out:15s} base {res[0]:.3f} +unit {res[1]:.3f} +unitstem {res[2]:.3f} +chunk {res[3]:.3f} | alone unit {roc_auc_score(yt, Xt[:,7]):.3f} stem {roc_auc_score(yt, Xt[:,8]):.3f} chunk {roc_auc_score(yt, Xt[:,9]):.3f}")
