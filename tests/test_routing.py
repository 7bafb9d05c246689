"""Routing: which intents' buckets a question searches, and the offline vote that ranks them."""

import numpy as np

from index.search import Searcher
from router.classify import Classification, OfflineClassifier
from router.policy import Router
from tests.conftest import record, small_searcher


class FixedClassifier:
    def __init__(self, ranked):
        self.ranked = ranked

    def classify(self, question, query_vec, global_hits=None, claude=None) -> Classification:
        return Classification(self.ranked, "test")


def test_routing_confident_unsure_related_and_weak():
    s, vecs = small_searcher()
    confident = Router(s, FixedClassifier([("billing", 0.95), ("auth", 0.05)])).route(
        "refund plan", vecs[2]
    )
    assert (
        confident.searched == ["billing"]
        and confident.reason == "confident"
        and not confident.widened
    )
    assert [h.chunk["intent"] for h in confident.hits[:2]] == ["billing", "billing"]
    assert len(confident.hits) == 5  # topped up from the unrouted results: nothing is lost

    unsure = Router(
        s,
        FixedClassifier([("billing", 0.5), ("auth", 0.45), ("api", 0.05)]),
        related={"billing": {"api"}},
    ).route("refund plan", vecs[2])
    assert unsure.searched == ["billing", "auth", "api"] and unsure.reason == "unsure"

    # the router is sure, but wrong: the bucket's best chunk is nowhere near the unrouted top
    recs = (
        [record(i, "auth", text="refund plan price") for i in range(6)]
        + [record(6, "billing", text="unrelated words")]
        + [record(7 + i, "misc", text=f"filler text {i}") for i in range(10)]
    )
    vecs2 = np.zeros((17, 8), dtype=np.float32)
    vecs2[:6, 0], vecs2[6, 1], vecs2[7:, 2] = 1, 1, 1
    s2 = Searcher(recs, vecs2)
    weak = Router(s2, FixedClassifier([("billing", 1.0)])).route("refund plan", vecs2[0])
    assert weak.widened and weak.searched is None and weak.hits[0].chunk["intent"] == "auth"

    unknown = Router(s, FixedClassifier([("nonexistent", 1.0)])).route("refund", vecs[2])
    assert unknown.searched is None and unknown.reason == "no known intent"


def test_a_text_held_by_two_intents_is_decided_by_the_other_chunks():
    # rows 0 and 1 hold the same text, so they tie; index order would put "updating" first
    texts = [
        ("updating", "rolling update of a node pool"),
        ("hosted", "rolling update of a node pool"),
        ("hosted", "node pool replicas"),
        ("misc", "unrelated filler words"),
        ("misc", "more filler"),
    ]
    recs = [record(i, intent, text=t) for i, (intent, t) in enumerate(texts)]
    vecs = np.zeros((5, 4), dtype=np.float32)
    vecs[0, 0] = vecs[1, 0] = 1
    vecs[2, :2] = 0.6, 0.8
    vecs[3:, 3] = 1
    s = Searcher(recs, vecs)
    query = np.array([1, 0, 0, 0], dtype=np.float32)
    assert [h.chunk["intent"] for h in s.search("rolling update node pool", query)[:2]] == [
        "updating",
        "hosted",
    ]
    ranked = OfflineClassifier(s).classify("rolling update node pool", query).ranked
    assert ranked[0][0] == "hosted"
    routed = Router(s, OfflineClassifier(s)).route("rolling update node pool", query)
    assert routed.hits[0].row == 1 and not routed.widened  # the tie goes to the router's intent


def test_the_vote_follows_the_topic_of_the_best_chunks_not_a_lone_best_match():
    # one "upgrades" chunk is the closest, just ahead of two "networking" chunks on a shared topic
    # (axis 1)
    recs = [
        record(0, "upgrades", text="alpha"),
        record(1, "networking", text="beta"),
        record(2, "networking", text="gamma"),
    ] + [record(3 + i, "misc", text="delta") for i in range(3)]
    vecs = np.zeros((6, 4), dtype=np.float32)
    vecs[0, [0, 2]] = 0.95, 0.312
    vecs[1, :2] = 0.945, 0.327
    vecs[2, :2] = 0.94, 0.341
    vecs[3:, 3] = 1
    s = Searcher(recs, vecs)
    query = np.array([1, 0, 0, 0], dtype=np.float32)
    assert s.search("how", query)[0].chunk["intent"] == "upgrades"  # retrieval itself is unchanged
    assert OfflineClassifier(s).classify("how", query).top == "networking"
