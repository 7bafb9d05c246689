"""Does the reader add to cosine? A logistic regression on [best reader logit, best cosine],
fitted on some sets' questions and scored (AUC, answerable against off-topic) on a left-out set.

    python -m router.reader.combine ROWS.jsonl --fit examples,claude-docs,... --test fastapi
    python -m router.reader.combine FIT_ROWS.jsonl --fit traefik --test fastapi --test-rows R.jsonl

ROWS are written by `python -m router.reader.evaluate --rows FILE`. Each set weighs the same in
the fit (its questions weighted 1/n), and the classes are balanced.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from router.reader.evaluate import auc


def _rows(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def fit_and_score(fit_rows: list[dict], test_rows: list[dict]) -> dict:
    from sklearn.linear_model import LogisticRegression

    def xy(rows):
        x = np.array([[r["logit"], r["cosine"]] for r in rows])
        y = np.array([r["kind"] == "answerable" for r in rows], dtype=int)
        return x, y

    x, y = xy(fit_rows)
    sizes: dict = {}
    for r in fit_rows:
        sizes[(r["set"], r["kind"] == "answerable")] = (
            sizes.get((r["set"], r["kind"] == "answerable"), 0) + 1
        )
    w = np.array([1.0 / sizes[(r["set"], r["kind"] == "answerable")] for r in fit_rows])
    mu, sd = x.mean(0), x.std(0) + 1e-9
    lr = LogisticRegression(C=1.0).fit((x - mu) / sd, y, sample_weight=w)
    xt, yt = xy(test_rows)
    p = lr.decision_function((xt - mu) / sd)
    return {
        "coef_logit_cosine": [round(float(c), 3) for c in lr.coef_[0]],
        "auc_combined": auc(list(p[yt == 1]), list(p[yt == 0])),
        "auc_reader": auc(list(xt[yt == 1, 0]), list(xt[yt == 0, 0])),
        "auc_cosine": auc(list(xt[yt == 1, 1]), list(xt[yt == 0, 1])),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("rows")
    ap.add_argument("--fit", required=True, help="sets to fit on")
    ap.add_argument("--test", required=True, help="the left-out set")
    ap.add_argument("--test-rows", help="the left-out set's rows, if in another file")
    args = ap.parse_args(argv)
    fit_sets = set(args.fit.split(","))
    rows = _rows(args.rows)
    test = _rows(args.test_rows) if args.test_rows else rows
    res = fit_and_score(
        [r for r in rows if r["set"] in fit_sets and r["set"] != args.test],
        [r for r in test if r["set"] == args.test],
    )
    print(json.dumps({"test": args.test, "fit": sorted(fit_sets - {args.test})} | res))


if __name__ == "__main__":
    main()
