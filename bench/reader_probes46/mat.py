import pickle, numpy as np, sys
sys.path.insert(0, "/work/main")
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from router import reading
from index.search import tokenize
SETS = ["claude-docs","openshift-4.15","examples","fastapi","traefik","duckdb","chezmoi"]
F = ("sim","gap","rare","unseen","missing","phrase","agree")
data = {}
for s in SETS:
    d = pickle.load(open(f"/tmp/x45/{s}.pkl","rb"))
    rows = []
    for e, x in zip(d["examples"], d["extra"]):
        if e.kind not in ("question","offtopic") or x is None: continue
        f = [float(getattr(e.signals,n) or 0) for n in F]
        r = reading.read(e.question)
        mat = {t for m in r.material for t in tokenize(m) if len(t) > 2 and not t.isdigit()}
        top = {t for h in x["hits"][:3] for t in tokenize(h[2])}
        top20 = {t for h in x["hits"][:20] for t in tokenize(h[2])}
        known = len(mat & top) / len(mat) if mat else 0.5
        has = 1.0 if mat else 0.0
        bm = max(h[1] for h in x["hits"][:3]) if x["hits"] else 0
        rows.append((e.label, f + [known, has, len(mat & top), len(mat - top20) > 0]))
    data[s] = rows
def stack(ss):
    y = np.array([r[0] for s in ss for r in data[s]]); X = np.array([r[1] for s in ss for r in data[s]], float)
    w = np.concatenate([np.where(np.array([r[0] for r in data[s]])==1, 0.5/max(1,sum(r[0] for r in data[s])), 0.5/max(1,sum(1-r[0] for r in data[s]))) for s in ss])
    return y, X, w*len(y)
for out in SETS:
    tr = [s for s in SETS if s != out]
    y, X, w = stack(tr); yt, Xt, _ = stack([out])
    mu, sd = X.mean(0), X.std(0)+1e-9
    res = []
    for cols in (list(range(7)), list(range(7))+[7,8], list(range(7))+[9,10]):
        m = LogisticRegression(max_iter=3000).fit((X[:,cols]-mu[cols])/sd[cols], y, sample_weight=w)
        res.append(roc_auc_score(yt, m.decision_function((Xt[:,cols]-mu[cols])/sd[cols])))
    print(f"{out:15s} base {res[0]:.3f} +known {res[1]:.3f} +count/absent {res[2]:.3f}  known-alone {roc_auc_score(yt, Xt[:,7]):.3f}")
