"""Probe: does the question's own embedding (its style: a how-to vs a feature request) separate
answerable from close off-topic, leave one corpus out?"""
import pickle, numpy as np, sys
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
SETS = ["claude-docs","openshift-4.15","examples","fastapi","traefik","duckdb","chezmoi"]
F = ("sim","gap","rare","unseen","missing","phrase","agree")
data = {}
for s in SETS:
    d = pickle.load(open(f"/tmp/x45/{s}.pkl","rb"))
    rows = []
    for e, x in zip(d["examples"], d["extra"]):
        if e.kind not in ("question","offtopic") or x is None: continue
        f = np.array([float(getattr(e.signals,n) or 0) for n in F])
        rows.append((e.label, x["vec"], f, e.signals.message))
    data[s] = rows
    print(s, len(rows), sum(r[0] for r in rows))
def stack(ss):
    y = np.array([r[0] for s in ss for r in data[s]]); V = np.array([r[1] for s in ss for r in data[s]])
    X = np.array([r[2] for s in ss for r in data[s]])
    w = np.concatenate([np.where(np.array([r[0] for r in data[s]])==1, 0.5/max(1,sum(r[0] for r in data[s])), 0.5/max(1,sum(1-r[0] for r in data[s]))) for s in ss])
    return y, V, X, w*len(y)
for C in [float(a) for a in sys.argv[1:]] or [0.1, 1.0]:
    print("C", C)
    for out in SETS:
        tr = [s for s in SETS if s != out]
        y, V, X, w = stack(tr)
        m = LogisticRegression(C=C, max_iter=2000).fit(V, y, sample_weight=w)
        yt, Vt, Xt, _ = stack([out])
        st = m.decision_function(Vt)
        # stacked: features + style logit (style logit in training from inner LOCO to be honest)
        inner = np.zeros(len(y)); off = 0; idx = {}
        for s in tr:
            n = len(data[s]); idx[s] = slice(off, off+n); off += n
        for s in tr:
            tr2 = [t for t in tr if t != s]
            y2, V2, _, w2 = stack(tr2)
            inner[idx[s]] = LogisticRegression(C=C, max_iter=2000).fit(V2, y2, sample_weight=w2).decision_function(V[idx[s]])
        mu, sd = X.mean(0), X.std(0)+1e-9
        base = LogisticRegression(max_iter=2000).fit((X-mu)/sd, y, sample_weight=w)
        both = LogisticRegression(max_iter=2000).fit(np.c_[(X-mu)/sd, inner], y, sample_weight=w)
        pb = base.decision_function((Xt-mu)/sd); pboth = both.decision_function(np.c_[(Xt-mu)/sd, st])
        print(f"  {out:15s} sim {roc_auc_score(yt, Xt[:,0]):.3f} base {roc_auc_score(yt,pb):.3f} style {roc_auc_score(yt, st):.3f} base+style {roc_auc_score(yt,pboth):.3f}  w_style {both.coef_[0][-1]:.2f}")
