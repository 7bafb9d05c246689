"""LOCO: the decision's 7 signals, + the reader's best logit; AUC answerable vs off-topic per left-out
corpus (question/offtopic kinds; fitted with equal corpus/label weights)."""
import pickle, json, sys, numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
SETS = ["claude-docs","openshift-4.15","examples","fastapi","traefik","duckdb","chezmoi"]
F = ("sim","gap","rare","unseen","missing","phrase","agree")
tags = sys.argv[1:]
sc = {t: json.load(open(f"/tmp/x46/scores-{t}.json")) for t in tags}
data = {}
for s in SETS:
    d = pickle.load(open(f"/tmp/x45/{s}.pkl","rb"))
    rows = []
    for e in d["examples"]:
        if e.kind not in ("question","offtopic"): continue
        extra = []
        for t in tags:
            m = {x["question"]: x["logit"] for x in sc[t].get(s, [])}
            extra.append(m.get(e.question))
        if any(v is None for v in extra): continue
        rows.append((e.label, [float(getattr(e.signals,n) or 0) for n in F] + extra))
    data[s] = rows
def stack(ss):
    y = np.array([r[0] for s in ss for r in data[s]]); X = np.array([r[1] for s in ss for r in data[s]], float)
    w = np.concatenate([np.where(np.array([r[0] for r in data[s]])==1, 0.5/max(1,sum(r[0] for r in data[s])), 0.5/max(1,sum(1-r[0] for r in data[s]))) for s in ss])
    return y, X, w*len(y)
print("left out        n     sim   base7 " + " ".join(f"{t:>8s} +{t:>8s}" for t in tags))
for out in SETS:
    tr = [s for s in SETS if s != out]
    y, X, w = stack(tr); yt, Xt, _ = stack([out])
    mu, sd = X.mean(0), X.std(0)+1e-9
    def fitauc(cols):
        m = LogisticRegression(max_iter=3000).fit((X[:,cols]-mu[cols])/sd[cols], y, sample_weight=w)
        return roc_auc_score(yt, m.decision_function((Xt[:,cols]-mu[cols])/sd[cols]))
    cells = [f"{roc_auc_score(yt, Xt[:,0]):.3f}", f"{fitauc(list(range(7))):.3f}"]
    for i, t in enumerate(tags):
        cells += [f"{roc_auc_score(yt, Xt[:,7+i]):8.3f}", f"{fitauc(list(range(7))+[7+i]):9.3f}"]
    print(f"{out:15s} {len(yt):4d}  " + "  ".join(cells))
