import json

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from index.chunker import chunk_doc
from index.loader import DocError, list_markdown, parse_doc
from index.search import BM25, Hit, Searcher, minmax, one_per_section, rrf, tokenize
from tests.conftest import EXAMPLES, SHARED_EVAL, record, small_searcher


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
        pytest.skip(f"the shared eval set's {root.parent.name}/docs is not beside this checkout")
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


def test_bm25_round_trips_through_its_arrays():
    corpus = [tokenize(t) for t in corpus_of(EXAMPLES)]
    built = BM25(corpus)
    loaded = BM25.from_arrays(built.arrays())
    assert loaded.vocab.words() == sorted({t for d in corpus for t in d})
    for q in (["webhook", "signature"], ["tw", "1429"], ["nothing"], []):
        assert np.array_equal(built.scores(q), loaded.scores(q))
        assert built.coverage(q, ["webhook"]) == loaded.coverage(q, ["webhook"])


def test_a_question_of_everyday_words_leans_on_meaning():
    """The question "What models are available?": the words match a section with both in its
    heading ("List available models"), the meaning the page about models; a question whose every
    word English uses everywhere is searched mostly by its meaning, one with a specific term as
    before."""
    recs = [
        record(0, "api", text="List available models\n\nlist available models through the cloud"),
        record(1, "about", text="Models overview\n\nthe family compared by speed and price"),
        record(2, "api", text="Errors\n\nerror codes"),
    ]
    vecs = np.array([[0.6, 0.8, 0], [0.9, 0.436, 0], [0, 0, 1]], dtype=np.float32)
    searcher = Searcher(recs, vecs)
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)  # closest to the overview
    assert searcher.search("What models are available?", query, k=2)[0].chunk["id"] == "c1"
    # a term rarer than everyday English ("cloud") keeps the words' full share
    assert searcher.search("models available cloud", query, k=2)[0].chunk["id"] == "c0"
