"""Per-question best reader logit over the top 5 (cached searches), for a model dir; AUC table and
a json of scores for combining with the decision's signals."""
import sys, json, time
sys.path.insert(0, "/work/wt/synth46")
from pathlib import Path
import numpy as np
from router.reader.evaluate import Reader, auc
model, tag = sys.argv[1], sys.argv[2]
sets = (sys.argv[3] if len(sys.argv) > 3 else "examples,claude-docs,openshift-4.15,fastapi,traefik,duckdb,chezmoi").split(",")
r = Reader(Path(model), threads=int(__import__("os").environ.get("THREADS", "2")))
out = {}
for s in sets:
    d = json.load(open(f"/work/wt/synth46/.fieldguide/reader-eval/{s}.json"))
    qs = d["questions"]
    if s == "openshift-4.15":
        import random
        ans = [q for q in qs if q["kind"] == "answerable"]; off = [q for q in qs if q["kind"] != "answerable"]
        qs = random.Random(0).sample(ans, 100) + off
    rows = []
    t = time.time()
    for q in qs:
        texts = [h["text"] for h in q["hits"][:5]]
        lg = r.scores(q["question"], texts) if texts else np.zeros(0)
        rows.append({"question": q["question"], "kind": q["kind"], "logit": float(lg.max()) if len(lg) else -99.0,
                     "logits": [round(float(x), 3) for x in lg], "cos": max((h["vector"] for h in q["hits"][:5]), default=0.0),
                     "gold": [bool(h.get("gold")) for h in q["hits"][:5]]})
    out[s] = rows
    a = [x["logit"] for x in rows if x["kind"] == "answerable"]; o = [x["logit"] for x in rows if x["kind"] != "answerable"]
    ca = [x["cos"] for x in rows if x["kind"] == "answerable"]; co = [x["cos"] for x in rows if x["kind"] != "answerable"]
    print(f"{tag} {s:15s} AUC reader {auc(a, o):.3f} cosine {auc(ca, co):.3f}  ({len(a)}/{len(o)}, {time.time()-t:.0f}s)", flush=True)
json.dump(out, open(f"/tmp/x46/scores-{tag}.json", "w"))
