"""The Messages API stand-in in record and replay mode (tests/standins/keyed.py): requests
recorded under a stable name, responses served as the API would, rounds that go on where the
last one stopped."""

import json

import anthropic

from router.answer import ANSWER, PARTIAL
from router.context import Budget
from router.engine import Engine
from router.pipeline import Pipeline
from tests.standins.keyed import Keyed, described, pending, problems, request_hash

MODELS = {
    "condense": "claude-haiku-5-5",
    "answer": "claude-sonnet-5-5",
    "check": "claude-haiku-5-5",
}
QUESTION = "How do I rotate an API key?"


def ask(db, embedder, stub, folder, kinds=None):
    keyed = Keyed(folder, kinds=kinds)
    stub.route("/v1/messages", keyed)
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
    engine = Engine(db, embedder, client, "claude-haiku-5-5")
    pipeline = Pipeline(
        engine, client, MODELS, "https://docs.example.com", deadline=120, budget=Budget(600)
    )
    return pipeline.answer(QUESTION), keyed


def respond(folder, kind, response):
    [req] = [p for p in pending(folder) if described(p)["kind"] == kind]
    body = json.loads(req.read_text())
    assert problems(response, body) == []
    (folder / "responses" / req.name).write_text(json.dumps(response))
    return body


def test_a_request_is_named_by_what_it_asks():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    assert request_hash(body) == request_hash(dict(reversed(body.items())) | {"stream": True})
    assert request_hash(body) != request_hash(body | {"max_tokens": 6})


def test_rounds_record_then_replay_answers_checks_and_second_looks(
    examples_db, local_embedder, stub, tmp_path
):
    folder = tmp_path / "keyed"
    # round 1: nothing answered: the answer is the docs' own quotes, its request recorded
    ans, keyed = ask(examples_db, local_embedder, stub, folder)
    assert ans.trace.offline and keyed.recorded and not keyed.replayed
    kinds = sorted(described(p)["kind"] for p in pending(folder))
    assert kinds == ["answer", "classify"]
    first = respond(
        folder,
        "answer",
        {
            "content": [
                {"type": "tool_use", "name": "search_docs", "input": {"query": "tide keys roll"}}
            ],
            "by": "test",
        },
    )
    assert [t["name"] for t in first["tools"]] == ["search_docs"]
    # round 2: the tool call replayed, the look searched, the next round recorded
    ans, keyed = ask(examples_db, local_embedder, stub, folder)
    [after] = [described(p) for p in pending(folder) if described(p)["kind"] == "answer"]
    assert after["after_tool"] and after["search_results"] > len(
        [b for b in first["messages"][0]["content"] if b["type"] == "search_result"]
    )
    body = json.loads((folder / "requests" / f"{after['hash']}.json").read_text())
    last = len([b for b in body["messages"][0]["content"] if b["type"] == "search_result"])
    cite = {"search_result_index": last, "start_block_index": 0, "end_block_index": 1}
    answer = {"content": [{"type": "text", "text": "Roll the key.", "citations": [cite]}]}
    assert problems(answer, body) == ['no "by": name the model that wrote it']
    bad = {
        "content": [{"type": "text", "text": "x", "citations": [cite | {"end_block_index": 99}]}]
    }
    assert any("names no blocks" in p for p in problems(bad | {"by": "t"}, body))
    respond(folder, "answer", answer | {"by": "test"})
    # round 3: the answer replayed with its citation completed; the claim check recorded
    ans, keyed = ask(examples_db, local_embedder, stub, folder)
    assert not ans.trace.offline and ans.citations[0].verified
    assert ans.decision == PARTIAL and "not checked" in ans.caveat
    assert ans.trace.route["looks"][0]["query"] == "tide keys roll"
    check = respond(
        folder,
        "check",
        {"json": {"sentences": [{"sentence": 1, "verdict": "supported"}]}, "by": "test"},
    )
    assert "<sentence" in check["messages"][0]["content"]
    # round 4: everything answered, nothing new recorded
    ans, keyed = ask(examples_db, local_embedder, stub, folder)
    assert (
        ans.decision == ANSWER
        and [p for p in pending(folder) if described(p)["kind"] != "classify"] == []
    )
    assert keyed.refused == []


def test_only_the_kinds_asked_for_are_recorded_the_others_are_overloaded(
    examples_db, local_embedder, stub, tmp_path
):
    folder = tmp_path / "keyed"
    ans, keyed = ask(examples_db, local_embedder, stub, folder, kinds=("answer", "check"))
    assert ans.trace.offline and [described(p)["kind"] for p in pending(folder)] == ["answer"]
    assert "classify" in {keyed.kind(b) for b in keyed.seen}
