# ruff: noqa
# mypy: ignore-errors
"""LOCO: the style split by context words (words outside the asking sentences) > N, vs sentences > 1."""

import pickle, sys, json, copy

sys.path.insert(0, "/work/main")
import numpy as np
from router import reading, condense, decide
from bot.evaluation import calibrate as C

NAMES = ["claude-docs", "openshift-4.15", "examples", "fastapi", "traefik", "duckdb", "chezmoi"]
data = {}
for n in NAMES:
    try:
        data[n] = pickle.load(open(f"/tmp/x45/{n}.pkl", "rb"))["examples"]
    except FileNotFoundError:
        pass


def ctxw(q):
    r = reading.read(condense.plain(q))
    return len(r.sentences), len(q.split()) - len(r.asking.split()) if len(r.sentences) > 1 else 0


info = {id(e): ctxw(e.question) for ex in data.values() for e in ex}


def restyle(rule):
    out = {}
    for n, ex in data.items():
        new = []
        for e in ex:
            e2 = copy.copy(e)
            e2.signals = copy.copy(e.signals)
            sents, cw = info[id(e)]
            setattr(e2.signals, "message", rule(sents, cw))
            new.append(e2)
        out[n] = new
    return out


def cost(r):
    q, o = r["question"], r["offtopic"]
    return q["ABSTAIN"] * 0.5 + q["PARTIAL"] * 0.2 + o["ANSWER"] * 1 + o["PARTIAL"] * 0.1


rules = {"sentences>1": lambda s, c: s > 1}
for N in (0, 2, 4, 8, 16, 32):
    rules[f"context>{N}"] = (lambda N: lambda s, c: c > N)(N)
res = {}
for label, rule in rules.items():
    d = restyle(rule)
    loco = C.leave_one_out(d, decide.FEATURES)
    res[label] = {n: loco[n]["rates"] for n in d}
    row = []
    for n in d:
        r = loco[n]["rates"]
        q, o = r["question"], r["offtopic"]
        row.append(f"{n}: {q['ABSTAIN']:.2f}/{q['PARTIAL']:.2f} {o['ANSWER']:.2f} c={cost(r):.3f}")
    print(
        f"{label:12s} sum={sum(cost(loco[n]['rates']) for n in d):.3f} | " + " | ".join(row),
        flush=True,
    )
json.dump(res, open("/tmp/x45/stylex.json", "w"))
