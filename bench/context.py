"""What the answer was given on the cite path: the top CONTEXT_CHUNKS chunks, before and
after the path stopped waiting for Claude's classification (Claude now reads its candidates packed
to a token budget: bench/reads.py).

- before: routed on Claude's classification, waited for. Claude's own answers cannot be replayed
  here (no key), so the row is its best case: a classifier that names the gold intent(s) of every
  question, confidently (an oracle: what waiting could buy at most);
- after: the offline router (ties only), what the cite path retrieves with now, while Claude
  classifies beside the answer; it is the search `bench/routing.py` measures as "routed";
- unrouted hybrid, for reference.

Per set: hit@5 and recall@5 (gold sections among the five) where the set has gold sections;
intent hit@5 and the share of the five chunks in a gold intent where it names only the book; the
paired difference after − before with a bootstrap interval (as `fieldguide eval` prints it).

    python bench/context.py [SET ...]
"""

from __future__ import annotations

import numpy as np
from harness import table, write_section
from routing import open_set

from bot.evaluation.retrieval import matches, paired_difference
from index.embedders import make_embedder
from router.classify import Classification

CONTEXT_CHUNKS = 5  # the top chunks the answer read before the read by budget

SETS = ("claude-docs", "openshift-4.15", "examples")


def mean_of(scored: list[dict], key: str) -> str:
    values = [r[key] for r in scored if r[key] is not None]
    return f"{np.mean(values):.3f}" if values else "—"


def given(hits, q) -> dict:
    """The figures of the chunks the answer is given."""
    chunks = [h.chunk for h in hits[:CONTEXT_CHUNKS]]
    out: dict[str, float | bool | None] = {
        "intent_hit@5": any(c["intent"] in q.intents for c in chunks),
        "intent_share@5": float(np.mean([c["intent"] in q.intents for c in chunks]))
        if chunks
        else 0.0,
    }
    if q.gold:
        found = [any(matches(c, g) for c in chunks) for g in q.gold]
        out |= {"hit@5": any(found), "recall@5": sum(found) / len(found)}
    else:
        out |= {"hit@5": None, "recall@5": None}
    return out


def main() -> None:
    import sys

    embedder = make_embedder()
    rows, diffs = [], []
    for name in sys.argv[1:] or SETS:
        engine, questions = open_set(name, embedder)
        loaded = engine.loaded()
        router = loaded.router
        metric = "recall@5" if any(q.gold for q in questions) else "intent_share@5"
        before, after, hybrid = [], [], []
        for q in questions:
            vec = embedder.embed_query(q.question)
            oracle = Classification([(i, 1.0 / len(q.intents)) for i in q.intents], "claude")
            before.append(given(router.route(q.question, vec, 10, classified=oracle).hits, q))
            after.append(given(router.route(q.question, vec, 10, wait=False).hits, q))
            hybrid.append(given(loaded.searcher.search(q.question, vec, k=10), q))
        for label, scored in (
            ("before: routed on Claude's classification (oracle)", before),
            ("after: offline router, Claude beside", after),
            ("unrouted hybrid", hybrid),
        ):
            rows.append(
                [name, len(questions), label]
                + [
                    mean_of(scored, k)
                    for k in ("hit@5", "recall@5", "intent_hit@5", "intent_share@5")
                ]
            )
        p = paired_difference(after, before, "after", "before", metric=metric)
        diffs.append(
            [
                name,
                metric,
                f"{p['difference']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]",
                f"{p['better']} / {p['worse']}",
            ]
        )
        print(table(["set", "q", "retrieval", "hit@5", "recall@5", "ihit@5", "ishare@5"], rows))
    body = "\n\n".join(
        [
            "`python bench/context.py`. Offline (local int8 model). The chunks the cite path's "
            f"answer is given (the top {CONTEXT_CHUNKS}), before (routed on Claude's "
            "classification, which the answer waited for; here an oracle naming each question's "
            "gold intent, the best Claude could do) and after (the offline router, which only "
            "breaks ties, while Claude classifies beside the answer). recall@5: the share of a "
            "question's gold sections among the five; intent share@5: the share of the five in a "
            "gold intent (openshift-4.15 names only the book).",
            table(
                [
                    "set",
                    "questions",
                    "retrieval",
                    "hit@5",
                    "recall@5",
                    "intent hit@5",
                    "intent share@5",
                ],
                rows,
            ),
            "### After − before (paired, bootstrap 95% interval)",
            table(["set", "metric", "after − before", "better / worse"], diffs),
            "The `after` row is the search `bench/routing.py` measures as `routed` (the same "
            "call: the offline router, which breaks ties only), so its figures are today's routed "
            "figures on every set, openshift-4.15 included (routing section: intent hit@1 0.753). "
            "The `before` row is an upper bound: a classifier that always names the gold intent, "
            "confidently, so the search stays inside it. Claude's real classification is less "
            "sure (it gives each of up to three intents a confidence, and a top intent under 90% "
            "of their sum searches several buckets, close to unrouted); the oracle's gain is what "
            "the second round trip before the first word (Haiku 5.5's time to first token and "
            "its reply, ~0.8 s on the stand-in) could buy at most.",
        ]
    )
    print(body)
    write_section("context", body)


if __name__ == "__main__":
    main()
