# ruff: noqa
# mypy: ignore-errors
import pickle, sys, re

sys.path.insert(0, "/work/main")
import numpy as np
from bot import api

emb = api._guide(None).embedder


def auc(pos, neg):
    pos, neg = np.array(pos), np.array(neg)
    return float((pos[:, None] > neg).mean() + 0.5 * (pos[:, None] == neg).mean())


SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
for name in sys.argv[1:]:
    d = pickle.load(open(f"/tmp/x45/{name}.pkl", "rb"))
    rows = []
    for e, x in zip(d["examples"], d["extra"]):
        if x is None:
            continue
        units = []
        for _, _, text, _hp, _doc in x["hits"][:3]:
            units += [u.strip() for u in SPLIT.split(text) if len(u.strip()) > 15][:40]
        if not units:
            continue
        V = np.asarray(
            emb.embed_documents(units) if hasattr(emb, "embed_documents") else emb.embed(units),
            dtype=np.float32,
        )
        q = np.asarray(x["vec"], dtype=np.float32)
        cos = V @ q
        top = np.sort(cos)[::-1]
        rows.append((e.kind, e.signals.sim, float(top[0]), float(top[:2].mean())))
    for i, lab in ((1, "sim"), (2, "unit max"), (3, "unit top2")):
        print(
            name,
            lab,
            round(
                auc(
                    [r[i] for r in rows if r[0] == "question"],
                    [r[i] for r in rows if r[0] == "offtopic"],
                ),
                3,
            ),
            flush=True,
        )
