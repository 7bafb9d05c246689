import json
from sklearn.metrics import roc_auc_score
for s in ["traefik", "fastapi"]:
    key = json.load(open(f"/root/.x46k/{s}.key.json"))
    g = {json.loads(l)["oid"]: json.loads(l) for l in open(f"/tmp/x46/oracle/{s}.grades.jsonl")}
    ys, gs, rq, reach = [], [], [], []
    for oid, k in key.items():
        ys.append(1 if k["kind"] == "answerable" else 0); gs.append(g[oid]["grade"]); rq.append(g[oid]["request"]); reach.append(k["gold_in_top5"])
    auc = roc_auc_score(ys, gs)
    auc_rq = roc_auc_score(ys, [-int(r) for r in rq])
    auc_both = roc_auc_score(ys, [x - 0.5 * r for x, r in zip(gs, rq)])
    # answerable with gold in top 5 only
    sub = [(y, x) for y, x, r in zip(ys, gs, reach) if y == 0 or r]
    auc_reach = roc_auc_score([a for a, _ in sub], [b for _, b in sub])
    import collections
    dist = {lab: collections.Counter(x for y, x in zip(ys, gs) if y == lab) for lab in (1, 0)}
    print(f"{s}: oracle grade AUC {auc:.3f}; 'request' flag AUC {auc_rq:.3f}; grade-0.5*request {auc_both:.3f}; answerable with gold in top5 vs offtopic {auc_reach:.3f}")
    print("   answerable grades", sorted(dist[1].items()), " offtopic grades", sorted(dist[0].items()))
    # operating points: answer if grade>=t
    for t in (4, 3, 2):
        tpr = sum(1 for y, x in zip(ys, gs) if y == 1 and x >= t) / sum(ys)
        fpr = sum(1 for y, x in zip(ys, gs) if y == 0 and x >= t) / (len(ys) - sum(ys))
        print(f"   grade>={t}: answerable answered {tpr:.2f}, off-topic answered {fpr:.2f}")
