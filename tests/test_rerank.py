import json

from bot.cli import main
from index.rerank import VoyageReranker
from router.engine import Engine
from tests.standins.voyage import voyage_embeddings, voyage_rate_limited, voyage_rerank

QUESTION = "How do I rotate an API key?"


def reranker(stub, **kw) -> VoyageReranker:
    return VoyageReranker("test-key", base_url=stub.url + "/v1", **{"max_retries": 0, **kw})


def test_the_fused_top_chunks_are_reordered_by_voyage(stub, examples_db, local_embedder):
    engine = Engine(examples_db, local_embedder, reranker=reranker(stub, depth=12))
    fused = engine.loaded().router.route(
        QUESTION, local_embedder.embed_query(QUESTION), k=12, rerank=False
    )
    liked = fused.hits[7].chunk  # the stub's reranker scores this chunk's text highest
    stub.route("/v1/rerank", voyage_rerank(prefer=liked["search_text"]))
    decision = engine.route(QUESTION, k=5)
    [call] = stub.calls("/v1/rerank")
    assert call.json["model"] == "rerank-3" and call.json["query"] == QUESTION
    assert call.headers["authorization"] == "Bearer test-key"
    # the routed list at the reranker's depth, as BM25 sees each chunk (title, headings, text)
    assert call.json["documents"] == [h.chunk["search_text"] for h in fused.hits]
    assert decision.reranked and decision.to_dict()["reranked"] and not decision.note
    assert decision.hits[0].chunk["id"] == liked["id"] and decision.hits[0].score == 1.0
    assert len(decision.hits) == 5
    scores = [h.score for h in decision.hits]
    assert scores == sorted(scores, reverse=True)


def test_a_failed_rerank_keeps_the_fused_order_with_a_note(stub, examples_db, local_embedder):
    stub.route("/v1/rerank", (500, {"detail": "internal error"}))
    engine = Engine(examples_db, local_embedder, reranker=reranker(stub))
    decision = engine.route(QUESTION, k=5)
    fused = engine.loaded().router.route(
        QUESTION, local_embedder.embed_query(QUESTION), k=5, rerank=False
    )
    assert [h.row for h in decision.hits] == [h.row for h in fused.hits]
    assert not decision.reranked
    assert decision.note == "reranking unavailable (ServerError); results in fused order"
    assert len(stub.calls("/v1/rerank")) == 1


def test_a_rate_limited_rerank_is_retried_after_what_voyage_asks(stub, examples_db, local_embedder):
    answers = iter([voyage_rate_limited(1), None])
    ok = voyage_rerank()
    stub.route("/v1/rerank", lambda r: next(answers) or ok(r))
    engine = Engine(examples_db, local_embedder, reranker=reranker(stub, max_retries=1))
    decision = engine.route(QUESTION, k=5)
    assert decision.reranked and not decision.note
    first, second = stub.calls("/v1/rerank")
    assert second.at - first.at >= 0.95


def test_an_answer_out_of_shape_keeps_the_fused_order(stub, examples_db, local_embedder):
    bad = {"data": [{"index": 99, "relevance_score": 0.5}], "usage": {"total_tokens": 1}}
    stub.route("/v1/rerank", (200, bad))
    engine = Engine(examples_db, local_embedder, reranker=reranker(stub))
    decision = engine.route(QUESTION, k=5)
    assert not decision.reranked
    assert (
        decision.note
        == "reranking unavailable (unusable answer: IndexError); results in fused order"
    )


def test_offline_nothing_is_reranked(examples_db, local_embedder):
    decision = Engine(examples_db, local_embedder).route(QUESTION, k=5)
    assert not decision.reranked and decision.note == ""


def test_eval_reranked_mode(stub, tmp_path, capsys, monkeypatch):
    import shutil

    from tests.conftest import EXAMPLES

    stub.route("/v1/embeddings", voyage_embeddings())
    stub.route("/v1/rerank", voyage_rerank())
    set_dir = tmp_path / "set"
    shutil.copytree(EXAMPLES, set_dir / "docs")
    shutil.copy(EXAMPLES.parent / "questions.jsonl", set_dir / "questions.jsonl")
    args = ["eval", str(set_dir), "--db", str(tmp_path / "voyage.db")]
    assert main([*args, "--modes", "reranked"]) == 2  # no key: said, not silently skipped
    assert "the reranked mode needs VOYAGE_API_KEY" in capsys.readouterr().err
    monkeypatch.setenv("VOYAGE_API_KEY", "test-key")
    monkeypatch.setenv("VOYAGE_BASE_URL", stub.url + "/v1")
    out = tmp_path / "out.json"
    assert main([*args, "--modes", "hybrid", "routed", "reranked", "--output", str(out)]) == 0
    table = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["reranker"] == "voyage:rerank-3" and "| reranked |" in table
    assert len(stub.calls("/v1/rerank")) == result["questions"] == 35
    assert result["modes"]["reranked"]["mrr@10"] is not None
    pairs = {(p["mode"], p["baseline"]) for p in result["paired"]}
    assert pairs == {("routed", "hybrid"), ("reranked", "routed")}
    assert "reranked − routed (mrr@10, 30 questions)" in table


def test_the_answer_reads_the_reranked_order(stub, examples_db, local_embedder):
    from router.pipeline import Pipeline

    question = "How many times is a failed webhook delivery retried?"
    engine = Engine(examples_db, local_embedder, reranker=reranker(stub))
    fused = engine.loaded().router.route(
        question, local_embedder.embed_query(question), k=10, rerank=False
    )
    liked = fused.hits[4].chunk
    stub.route("/v1/rerank", voyage_rerank(prefer=liked["search_text"]))
    pipeline = Pipeline(engine, None, {}, "")
    ans = pipeline.answer(question)
    assert ans.trace.route["reranked"] and ans.trace.hits[0]["id"] == liked["id"]
    assert ans.trace.evidence and ans.sources  # the evidence and extraction steps ran on this order
    stub.route("/v1/rerank", (503, {"detail": "unavailable"}))
    ans = pipeline.answer(question)
    assert ans.trace.hits[0]["id"] == fused.hits[0].chunk["id"] and not ans.trace.route["reranked"]
    assert (
        "reranking unavailable (ServiceUnavailableError); results in fused order" in ans.trace.notes
    )
