import json

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from index.chunker import chunk_doc
from index.loader import DocError, list_markdown, parse_doc
from index.search import BM25, Hit, Searcher, minmax, one_per_section, rrf, tokenize
from router.classify import Classification, OfflineClassifier
from router.policy import Router
from tests.conftest import EXAMPLES, SHARED_EVAL


def corpus_of(root):
    texts = []
    for path in list_markdown(root):
        try:
            doc = parse_doc(path.relative_to(root).as_posix(), path.read_bytes())
        except DocError:
            continue
        texts += [c.search_text for c in chunk_doc(doc)]
    return texts


@pytest.mark.parametrize(
    "root, questions",
    [
        (
            EXAMPLES,
            [
                "How do I verify a webhook signature?",
                "rate limit rate limit 429",
                "refund policy",
                "zzz unknown",
            ],
        ),
        (SHARED_EVAL / "claude-docs" / "docs", None),
    ],
)
def test_bm25_matches_rank_bm25(root, questions):
    if not root.is_dir():
        pytest.skip(f"{root} not present")
    corpus = [tokenize(t) for t in corpus_of(root)]
    if questions is None:
        lines = (SHARED_EVAL / "claude-docs" / "questions.jsonl").read_text().splitlines()
        questions = [json.loads(line)["question"] for line in lines]
    ours, ref = BM25(corpus), BM25Okapi(corpus)
    for q in questions:
        tokens = tokenize(q)
        assert np.max(np.abs(ours.scores(tokens) - ref.get_scores(tokens))) <= 1e-9


def test_bm25_edge_cases():
    corpus = [["alpha", "beta"], ["alpha"], ["gamma", "gamma", "alpha"], []]
    ref, ours = BM25Okapi(corpus), BM25(corpus)
    for q in (["alpha"], ["gamma", "gamma"], ["beta", "missing"], []):
        assert np.allclose(ours.scores(q), ref.get_scores(q), atol=0, rtol=0)


def test_tokenize_folds_plurals_and_drops_stopwords():
    assert tokenize("How do I rotate the API keys?") == ["rotate", "api", "key"]
    assert tokenize("policies status class") == ["policy", "status", "class"]


def test_minmax_and_rrf_edges():
    assert minmax(np.array([])).size == 0
    assert minmax(np.array([3.0, 3.0, 3.0])).tolist() == [0, 0, 0]  # all equal: no signal
    assert minmax(np.array([5.0])).tolist() == [0]
    assert minmax(np.array([1.0, 3.0, 2.0])).tolist() == [0, 1, 0.5]
    fused = rrf(np.array([3.0, 2.0, 1.0]), np.array([1.0, 2.0, 3.0]))
    assert fused[0] == fused[2] and fused[1] == pytest.approx(2 / 62)


def record(i, intent, doc=None, path=None, text=""):
    return {
        "id": f"c{i}",
        "doc": doc or f"d{i}.md",
        "heading_path": path or [f"S{i}"],
        "text": text,
        "search_text": text,
        "start": 0,
        "end": len(text),
        "title": "T",
        "intent": intent,
        "url": None,
    }


def small_searcher():
    texts = [
        ("auth", "rotate api key secret"),
        ("auth", "login with sso"),
        ("billing", "invoice refund plan"),
        ("billing", "plan price upgrade"),
        ("api", "pagination cursor limit"),
    ]
    recs = [record(i, intent, text=t) for i, (intent, t) in enumerate(texts)]
    vecs = np.eye(5, 8, dtype=np.float32)
    return Searcher(recs, vecs), vecs


def test_search_in_bucket_empty_bucket_and_one_chunk_bucket():
    s, vecs = small_searcher()
    hits = s.search("refund plan", vecs[2], intents=["billing"])
    assert [h.chunk["id"] for h in hits] == ["c2", "c3"]
    assert s.search("refund", vecs[2], intents=["nope"]) == []
    one = s.search("pagination", vecs[4], intents=["api"])
    assert len(one) == 1 and one[0].chunk["id"] == "c4"
    # no vector: BM25 alone
    assert [h.chunk["id"] for h in s.search("pagination", None)][:1] == ["c4"]


def test_all_equal_scores_keep_a_deterministic_order():
    recs = [record(i, "x", text="same words") for i in range(4)]
    s = Searcher(recs, np.ones((4, 3), dtype=np.float32) / np.sqrt(3))
    assert [h.row for h in s.search("same", np.ones(3, dtype=np.float32) / np.sqrt(3))] == [
        0,
        1,
        2,
        3,
    ]


def test_pieces_of_one_section_go_after_distinct_sections():
    recs = [
        record(0, "x", "a.md", ["A"], "alpha"),
        record(1, "x", "a.md", ["A"], "beta"),
        record(2, "x", "b.md", ["B"], "gamma"),
    ]
    s = Searcher(recs, None)
    hits = [Hit(i, 0, 0, 1 - i / 10, "x", int(s.sections[i]), s.fetch) for i in range(3)]
    assert [h.row for h in one_per_section(hits)] == [0, 2, 1]
    assert [h.chunk["doc"] for h in hits] == ["a.md", "a.md", "b.md"]


class FixedClassifier:
    def __init__(self, ranked):
        self.ranked = ranked

    def classify(self, question, vec, hits=None):
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


def test_bm25_round_trips_through_its_arrays():
    corpus = [tokenize(t) for t in corpus_of(EXAMPLES)]
    built = BM25(corpus)
    loaded = BM25.from_arrays(built.arrays())
    assert loaded.vocab.words() == sorted({t for d in corpus for t in d})
    for q in (["webhook", "signature"], ["tw", "1429"], ["nothing"], []):
        assert np.array_equal(built.scores(q), loaded.scores(q))
        assert built.coverage(q, ["webhook"]) == loaded.coverage(q, ["webhook"])
