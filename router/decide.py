"""Deciding from retrieval alone, before any model is asked, whether the docs can answer."""

from __future__ import annotations

import numpy as np

from index.search import BM25, Hit, tokenize

from .answer import ABSTAIN, ANSWER, PARTIAL, Answer

# Evidence thresholds, calibrated on shared/eval and examples/ (answerable questions) against
# off-topic questions (bench/offtopic.jsonl and the examples' own): see bench/RESULTS.md.
# `similarity` is the best chunk's cosine to the question (local all-MiniLM-L6-v2 scale: answerable
# questions scored >= 0.44, off-topic ones <= 0.31); `coverage` is the share of the question's idf
# weight found in the top chunks, a second opinion for questions whose words the docs never use.
ABSTAIN_SIMILARITY = 0.36
# few of its words and only a loose match: abstain too
ABSTAIN_COVERAGE, WEAK_SIMILARITY = 0.2, 0.45
PARTIAL_COVERAGE, PARTIAL_SIMILARITY = 0.3, 0.45


def evidence(
    question: str, query_vec: np.ndarray | None, hits: list[Hit], bm25: BM25, ans: Answer
) -> str:
    """ABSTAIN / PARTIAL / ANSWER from retrieval alone, before any model is asked."""
    if not hits:
        ans.evidence = {"coverage": 0.0, "similarity": 0.0}
        return ABSTAIN
    q = tokenize(question)
    cover = bm25.coverage(q, [t for h in hits[:3] for t in tokenize(h.chunk["search_text"])])
    sim = max(h.vector for h in hits[:3]) if query_vec is not None else None
    ans.evidence = {
        "coverage": round(cover, 3),
        "similarity": None if sim is None else round(sim, 3),
    }
    if sim is None:  # keyword search only: coverage decides alone
        return (
            ABSTAIN if cover < ABSTAIN_COVERAGE else PARTIAL if cover < PARTIAL_COVERAGE else ANSWER
        )
    if sim < ABSTAIN_SIMILARITY or (cover < ABSTAIN_COVERAGE and sim < WEAK_SIMILARITY):
        return ABSTAIN
    if cover < PARTIAL_COVERAGE or sim < PARTIAL_SIMILARITY:
        return PARTIAL
    return ANSWER
