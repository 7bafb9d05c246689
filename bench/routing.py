"""Routing measured against unrouted search on the three shared sets (claude-docs, openshift-4.15,
examples): the shipped policy's paired difference with its bootstrap interval. (The alternatives
measured and not shipped, and their figures, are in RESULTS.md with the commit that had their code.)

    python bench/routing.py          # ~3 min once the sets are indexed
"""

from __future__ import annotations

import numpy as np
from harness import ROOT, SHARED, eval_db, table, write_section

from bot.app import FieldGuide
from bot.evaluation.retrieval import load_questions, paired_difference, score_question
from bot.settings import Settings
from index.embedders import make_embedder

SETS = ("claude-docs", "openshift-4.15", "examples")
# ../shared beside the repo, or two levels up from a worktree in wt/
SETS_DIR = next((p for p in (SHARED, ROOT.parents[1] / "shared" / "eval") if p.exists()), SHARED)


def open_set(name: str, embedder):
    """(engine, questions): the set's index as `fieldguide eval` keeps it (harness.eval_db)."""
    folder = ROOT / "examples" if name == "examples" else SETS_DIR / name
    db = eval_db(name, embedder)
    engine = FieldGuide(Settings(db=db), embedder=embedder).engine
    return engine, load_questions(folder / "questions.jsonl")


def metric_of(questions) -> str:
    return "mrr@10" if any(q.gold for q in questions) else "intent_hit@1"


def mean_of(rows: list[dict], metric: str) -> str:
    return f"{np.mean([r[metric] for r in rows if r[metric] is not None]):.3f}"


def main() -> None:
    embedder = make_embedder()
    rows: list[list] = []
    for name in SETS:
        engine, questions = open_set(name, embedder)
        loaded = engine.loaded()
        metric = metric_of(questions)
        hybrid, routed = [], []
        for q in questions:
            vec = embedder.embed_query(q.question)
            hybrid.append(score_question(loaded.searcher.search(q.question, vec, k=10), q))
            routed.append(score_question(loaded.router.route(q.question, vec, 10).hits, q))
        p = paired_difference(routed, hybrid, "routed", "hybrid")
        rows.append(
            [
                name,
                len(questions),
                metric,
                mean_of(hybrid, metric),
                mean_of(routed, metric),
                f"{p['difference']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]",
                f"{p['better']} / {p['worse']}",
            ]
        )
    body = "\n\n".join(
        [
            "`python bench/routing.py`. Offline (local int8 model, offline router). The metric is "
            "MRR@10 where the set has gold sections, intent hit@1 where it names only the book; "
            "the interval is a seeded percentile bootstrap over questions (2,000 resamples), as "
            "`fieldguide eval` prints it.",
            "### Shipped policy: routed against unrouted hybrid",
            table(
                [
                    "set",
                    "questions",
                    "metric",
                    "hybrid",
                    "routed",
                    "routed − hybrid [95% interval]",
                    "better / worse",
                ],
                rows,
            ),
        ]
    )
    print(body)
    write_section("routing", body)


if __name__ == "__main__":
    main()
