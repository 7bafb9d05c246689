import pickle, numpy as np
SETS = ["claude-docs","openshift-4.15","examples","fastapi","traefik","duckdb","chezmoi"]
for s in SETS:
    d = pickle.load(open(f"/tmp/x45/{s}.pkl","rb"))
    by = {}
    for e in d["examples"]:
        by.setdefault(e.kind, []).append(e.signals.sim or 0)
    msg = [e.signals.message for e in d["examples"] if e.kind=="question"]
    print(f"{s:15s}", " ".join(f"{k}:{np.median(v):.2f}[{np.percentile(v,25):.2f}-{np.percentile(v,75):.2f}]n{len(v)}" for k,v in by.items()), f"msg {np.mean(msg):.2f}")
