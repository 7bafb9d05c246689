"""The routing policy: which buckets (intents) to search for a question, and when to widen.

1. The classifier ranks intents with scores in [0, 1]. Confident (the top intent alone holds COVER
   of the score, and scores at least COVER): search that intent. Unsure: search the top intents that
   together hold COVER of the score (at most three), plus the related_intents their docs declare.
2. The bucket is weak when it does not hold the best chunk of an unrouted search over everything
   (or one tying with it: the same text in another intent's doc): the router and the content
   disagree, so the search widens to everything. (Allowing the bucket's best to sit anywhere in the
   unrouted top 3 or 5 cost intent hit@1 on openshift-4.15.) Among tied chunks, the router's intent
   comes first.
3. A bucket that yields fewer than k chunks is topped up from the unrouted results, so routing only
   reorders what an unrouted search would find: it never drops it.
4. With a reranker (Voyage, when a key is set), the top `reranker.depth` of that list are reordered
   by it before the answer's extraction and abstain decision see them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby

import numpy as np

from index.rerank import VoyageReranker
from index.search import Hit, Searcher, distinct, read_together

from .classify import VOTERS, Classifier
from .claude import Claude

# The buckets are the top intents that together hold COVER of the classifier's score (at most
# MAX_BUCKETS). One intent holding it alone is a confident routing; on the eval sets a second intent
# with even 10-20% of the vote is often where half of a multi-part question's answer lives.
COVER = 0.9
MAX_BUCKETS = 3
WEAK_RANK = 1  # the bucket must hold the unrouted search's best chunk (see the module doc)
# the most hits read to find k of distinct texts when copies of one text crowd the best ones (a
# question costs at most this many records read, whatever the docs repeat)
MAX_CANDIDATES = 800


@dataclass
class RouteDecision:
    ranked: list[tuple[str, float]]  # the classifier's intents and scores, best first
    searched: list[str] | None  # the buckets searched; None = everything
    widened: bool
    reason: str
    hits: list[Hit] = field(default_factory=list)
    classifier: str = "offline"
    note: str = ""
    usage: dict = field(default_factory=dict)  # the classifier's tokens, when it was Claude
    reranked: bool = False  # the hits are in the reranker's order

    @property
    def intents(self) -> list[str]:
        return [i for i, _ in self.ranked]

    def to_dict(self) -> dict:
        return {
            "intents": [{"intent": i, "score": round(s, 3)} for i, s in self.ranked[:5]],
            "searched": self.searched,
            "widened": self.widened,
            "reason": self.reason,
            "classifier": self.classifier,
            "note": self.note,
            "reranked": self.reranked,
        }


def prefer_intents(hits: list[Hit], ranked: list[tuple[str, float]]) -> list[Hit]:
    """Among hits with equal scores (one text that several intents' docs hold verbatim), the
    router's preferred intent first; otherwise the index order would decide."""
    order = {intent: n for n, (intent, _) in enumerate(ranked)}
    return [
        h
        for _, tied in groupby(hits, key=lambda h: h.score)
        for h in sorted(tied, key=lambda h: order.get(h.intent, len(order)))
    ]


class Router:
    def __init__(
        self,
        searcher: Searcher,
        classifier: Classifier,
        related: dict[str, set[str]] | None = None,
        bm25_weight: float = 0.4,
        fusion: str = "hybrid",
        reranker: VoyageReranker | None = None,
    ):
        """`reranker`: an index.rerank.VoyageReranker, or None (offline: the fused order)."""
        self.searcher = searcher
        self.reranker = reranker
        self.classifier = classifier
        self.related = related or {}
        self.bm25_weight = bm25_weight
        self.fusion = fusion

    def choose_buckets(self, ranked: list[tuple[str, float]]) -> tuple[list[str] | None, str]:
        known = [(i, s) for i, s in ranked if i in self.searcher.intent_rows]
        total = sum(s for _, s in known)
        if not known or total <= 0:
            return None, "no known intent"
        chosen, mass = [], 0.0
        for intent, score in known[:MAX_BUCKETS]:
            chosen.append(intent)
            mass += score
            if mass >= COVER * total:
                break
        if len(chosen) == 1 and known[0][1] >= COVER:
            return chosen, "confident"
        for intent in list(chosen):
            chosen += sorted(
                r
                for r in self.related.get(intent, ())
                if r in self.searcher.intent_rows and r not in chosen
            )
        return chosen, "unsure"

    def route(
        self,
        question: str,
        query_vec: np.ndarray | None,
        k: int = 10,
        rerank: bool = True,
        claude: Claude | None = None,
        wait: bool = True,
    ) -> RouteDecision:
        """The routed top k; `rerank=False` keeps the fused order even with a reranker (eval).
        `claude`: the question's router.claude.Claude (deadline), if any. `wait=False`: Claude is
        not asked: the offline vote decides (a question's answer: Claude classifies beside it)."""
        reranker = self.reranker if rerank else None
        depth = max(k, reranker.depth) if reranker else k
        decision = self._route(question, query_vec, depth, claude, wait)
        if reranker is not None:
            decision.hits, note = reranker.rerank(question, decision.hits)
            decision.reranked = not note
            decision.note = "; ".join(n for n in (decision.note, note) if n)
        decision.hits = decision.hits[:k]
        return decision

    def _route(
        self,
        question: str,
        query_vec: np.ndarray | None,
        k: int,
        claude: Claude | None = None,
        wait: bool = True,
    ) -> RouteDecision:
        search = lambda intents, n: self.searcher.search(  # noqa: E731
            question,
            query_vec,
            intents=intents,
            k=n,
            mode=self.fusion,
            bm25_weight=self.bm25_weight,
        )
        everything = search(None, max(k, VOTERS))
        if wait:
            result = self.classifier.classify(question, query_vec, everything, claude=claude)
        else:  # the offline vote (a Claude classifier's fallback)
            offline = getattr(self.classifier, "fallback", self.classifier)
            result = offline.classify(question, query_vec, everything)
        everything = prefer_intents(everything, result.ranked)
        buckets, reason = self.choose_buckets(result.ranked)
        if result.source == "offline":
            # Offline, routing showed no gain on a corpus it was not tuned on (routed - unrouted
            # MRR@10 +0.002 claude-docs, intent hit@1 +0.008 [-0.003, +0.022] openshift-4.15, 0
            # examples; -0.009 on a TV manual): the offline router only breaks ties
            buckets, reason = None, "offline router: ties only"
        decision = RouteDecision(
            result.ranked,
            buckets,
            buckets is None and result.source != "offline",
            reason,
            classifier=result.source,
            note=result.note,
            usage=result.usage,
        )

        def distinct_top(intents: list[str] | None, hits: list[Hit]) -> list[Hit]:
            """k hits of distinct texts (`distinct`: copies of one text are one hit) from `hits`,
            a search of `intents`, searched further while copies crowd them out (at most
            MAX_CANDIDATES read)."""
            found, n = distinct(hits), len(hits)
            while len(found) < k and len(hits) == n and n < MAX_CANDIDATES:
                n = min(4 * n, MAX_CANDIDATES)
                hits = prefer_intents(search(intents, n), result.ranked)
                found = distinct(hits)
            return found[:k]

        if buckets is None:
            decision.hits = read_together(distinct_top(None, everything))
            return decision
        in_bucket = distinct_top(buckets, prefer_intents(search(buckets, k), result.ranked))
        # the unrouted top WEAK_RANK, and whatever ties with them (the same text in another
        # intent's doc)
        top_rows = {h.row for h in everything if h.score >= everything[WEAK_RANK - 1].score}
        if not in_bucket or in_bucket[0].row not in top_rows:
            decision.searched, decision.widened = None, True
            decision.reason = f"{reason}; bucket weak, widened to everything"
            decision.hits = read_together(distinct_top(None, everything))
            return decision
        seen = {h.row for h in in_bucket}
        rest = [h for h in distinct_top(None, everything) if h.row not in seen]
        decision.hits = read_together(distinct(in_bucket + rest)[:k])
        return decision
