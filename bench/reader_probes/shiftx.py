# ruff: noqa
# mypy: ignore-errors
"""LOCO: each corpus's p shifted on the logit scale by where its own headings-as-questions fall
(unlabelled data any corpus has at index time), bands chosen on shifted training p."""

import pickle, sys, math

sys.path.insert(0, "/work/main")
import numpy as np
from router import decide
from router.decide import Model
from bot.evaluation import calibrate as C

NAMES = ["claude-docs", "openshift-4.15", "examples", "fastapi", "traefik", "duckdb", "chezmoi"]
data = {n: pickle.load(open(f"/tmp/x45/{n}.pkl", "rb"))["examples"] for n in NAMES}


def logit(p):
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


class Shifted(Model):
    offsets: dict = {}

    def p(self, s, near_only=False):
        base = Model.p(self, s, near_only)
        return 1 / (1 + math.exp(-(logit(base) - self.offsets.get(id(s), 0.0))))


def cost(r):
    q, o = r["question"], r["offtopic"]
    return q["ABSTAIN"] * 0.5 + q["PARTIAL"] * 0.2 + o["ANSWER"] * 1 + o["PARTIAL"] * 0.1


for ref in (None, "heading", "heading_hidden", "mid"):
    total, row = 0.0, []
    for held in NAMES:
        train = [e for n in NAMES if n != held for e in data[n]]
        base = C.fit(train, decide.FEATURES)

        def level(n):
            if ref is None:
                return 0.0
            h = np.median([logit(base.p(e.signals)) for e in data[n] if e.kind == "heading"])
            hh = np.median(
                [logit(base.p(e.signals)) for e in data[n] if e.kind == "heading_hidden"]
            )
            return {"heading": h, "heading_hidden": hh, "mid": (h + hh) / 2}[ref]

        levels = {n: level(n) for n in NAMES}
        mean_train = np.mean([levels[n] for n in NAMES if n != held])
        m = Shifted(base.features, base.mean, base.scale, base.weights, base.bias, {})
        m.offsets = {id(e.signals): levels[n] - mean_train for n in NAMES for e in data[n]}
        setattr(m, "bands", C.style_bands(m, train))
        r = C.rates(m, data[held])
        total += cost(r)
        q, o = r["question"], r["offtopic"]
        row.append(
            f"{held}: {q['ABSTAIN']:.2f}/{q['PARTIAL']:.2f} {o['ANSWER']:.2f} off{levels[held] - mean_train:+.2f}"
        )
    print(f"{str(ref):15s} sum={total:.3f} | " + " | ".join(row), flush=True)
