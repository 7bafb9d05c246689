"""The answer pipeline against a local stub of the Messages API, with the real anthropic client."""

import json
import time

import anthropic
import pytest

from index.indexer import index_folder
from index.store import open_db
from router.answer import occurs_in
from router.engine import Engine
from router.pipeline import (
    ABSTAIN,
    ANSWER,
    OFFLINE_NOTE,
    PARTIAL,
    Pipeline,
    QuestionError,
    link_for,
)
from router.state import SqliteState
from tests.conftest import EXAMPLES
from tests.stubs import OVERLOADED, claude_message, text_block, tool_use

MODELS = {
    "condense": "claude-haiku-4-5",
    "extract": "claude-haiku-4-5",
    "answer": "claude-sonnet-4-6",
}
SIGNATURE_Q = "How do I verify the signature of a webhook?"


def make_pipeline(db, local_embedder, stub=None, retries=0, timeout=5.0):
    client = None
    if stub is not None:
        client = anthropic.Anthropic(
            api_key="test", base_url=stub.url, max_retries=retries, timeout=timeout
        )
    engine = Engine(db, local_embedder, client, "claude-haiku-4-5")
    return Pipeline(
        engine, client, MODELS, "https://docs.example.com", state=SqliteState(open_db(db))
    )


class FakeClaude:
    """Answers each kind of request the pipeline makes, as configured by a test."""

    def __init__(
        self,
        passages=None,
        cite=None,
        answer_text="Check the header [see docs](https://evil.example).",
    ):
        self.passages = passages  # None: quote the first sentence of chunk 1 verbatim
        self.cite = cite  # None: cite the first passage's text
        self.answer_text = answer_text
        self.seen = []

    def __call__(self, req):
        body = req.json
        self.seen.append(body)
        tools = [t["name"] for t in body.get("tools", [])]
        if "choose_intent" in tools:
            return 200, claude_message(
                tool_use(
                    "choose_intent", {"intents": [{"intent": "authentication", "confidence": 0.9}]}
                )
            )
        if "record_passages" in tools:
            content = body["messages"][0]["content"]
            chunk1 = content.split('<chunk number="1"')[1].split(">\n", 1)[1].split("\n</chunk>")[0]
            paragraphs = [p for p in chunk1.split("\n\n") if not p.startswith("#")]
            passages = (
                self.passages
                if self.passages is not None
                else [{"chunk": 1, "text": paragraphs[0]}]
            )
            return 200, claude_message(
                tool_use(
                    "record_passages", {"passages": passages, "nothing_relevant": not passages}
                )
            )
        if "rewrite a follow-up" in json.dumps(body.get("system", "")):
            return 200, claude_message(text_block("How do I rotate the webhook signing secret?"))
        results = [b for b in body["messages"][0]["content"] if b["type"] == "search_result"]
        cited = self.cite if self.cite is not None else results[0]["content"][0]["text"]
        citation = {
            "type": "search_result_location",
            "source": results[0]["source"],
            "title": results[0]["title"],
            "cited_text": cited,
            "search_result_index": 0,
            "start_block_index": 0,
            "end_block_index": 1,
        }
        return 200, claude_message(
            text_block(self.answer_text, [citation]), text_block(" That is all.")
        )


def test_answer_with_native_citations_mapped_to_chunks_and_links(examples_db, local_embedder, stub):
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == ANSWER and not ans.offline
    assert ans.text == "Check the header see docs.[1] That is all."  # the model's link is stripped
    [cit] = ans.citations
    assert cit.verified and cit.source == 1 and cit.doc == ans.sources[0].doc
    assert ans.sources[0].url.startswith("https://docs.tidewater.example/auth/verifying-signatures")
    answer_call = fake.seen[-1]
    results = [b for b in answer_call["messages"][0]["content"] if b["type"] == "search_result"]
    assert (
        results[0]["citations"] == {"enabled": True} and answer_call["model"] == "claude-sonnet-4-6"
    )
    assert {"classify", "extract", "answer"} <= set(ans.usage) and ans.usage[
        "input_tokens"
    ] == 3 * 120
    assert set(ans.timings_ms) >= {"route_retrieve", "extract", "answer", "total"}


def test_extracted_passage_not_in_the_source_is_dropped(examples_db, local_embedder, stub):
    fake = FakeClaude(passages=None)
    stub.route("/v1/messages", fake)
    p = make_pipeline(examples_db, local_embedder, stub)
    first = p.answer(SIGNATURE_Q)
    real = first.passages[0].text
    fake.passages = [
        {"chunk": 1, "text": real},
        {"chunk": 1, "text": "Signatures are optional and never checked."},
        {"chunk": 99, "text": real},
    ]
    ans = p.answer(SIGNATURE_Q)
    assert [x.text for x in ans.passages] == [real] and ans.dropped_passages == 2


def test_citation_whose_text_is_not_in_the_chunk_is_flagged(examples_db, local_embedder, stub):
    stub.route("/v1/messages", FakeClaude(cite="Tidewater never signs webhooks."))
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert [c.verified for c in ans.citations] == [False]
    assert ans.decision == PARTIAL


def test_nothing_relevant_abstains_without_calling_the_answer_model(
    examples_db, local_embedder, stub
):
    fake = FakeClaude(passages=[])
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == ABSTAIN and "couldn't find this in the docs" in ans.text
    # no answer request (the only one with search_result blocks)
    assert not any(
        b.get("messages", [{}])[0].get("content", "")
        and isinstance(b["messages"][0]["content"], list)
        for b in fake.seen
    )


def test_overloaded_then_success(examples_db, local_embedder, stub):
    fake = FakeClaude()
    first = [True]

    def flaky(req):
        if first[0]:
            first[0] = False
            return OVERLOADED
        return fake(req)

    stub.route("/v1/messages", flaky)
    ans = make_pipeline(examples_db, local_embedder, stub, retries=2).answer(SIGNATURE_Q)
    assert ans.decision == ANSWER and not ans.offline and ans.citations


def test_overloaded_every_time_falls_back_offline(examples_db, local_embedder, stub):
    stub.route("/v1/messages", OVERLOADED)
    ans = make_pipeline(examples_db, local_embedder, stub, retries=1).answer(SIGNATURE_Q)
    assert ans.offline and ans.decision in (ANSWER, PARTIAL)
    assert any(OFFLINE_NOTE in n for n in ans.notes)
    assert ans.text.startswith("From the docs:") and ans.sources
    assert len(stub.calls("/v1/messages")) == 3 * 2  # classify, extract, answer: each tried twice


def test_timeout_falls_back_offline(examples_db, local_embedder, stub):
    def slow(req):
        time.sleep(2)
        return OVERLOADED

    stub.route("/v1/messages", slow)
    t = time.perf_counter()
    ans = make_pipeline(examples_db, local_embedder, stub, retries=0, timeout=0.3).answer(
        SIGNATURE_Q
    )
    assert time.perf_counter() - t < 10
    assert ans.offline and any("APITimeoutError" in n for n in ans.notes)


def test_follow_up_is_condensed_with_the_thread(examples_db, local_embedder, stub):
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    history = [
        {"role": "user", "text": "How do webhook signatures work?"},
        {"role": "assistant", "text": "They use HMAC."},
    ]
    ans = make_pipeline(examples_db, local_embedder, stub).answer(
        "and how do I rotate it?", history
    )
    assert ans.condensed == "How do I rotate the webhook signing secret?"
    assert "HMAC" in fake.seen[0]["messages"][0]["content"]


def test_offline_end_to_end(examples_db, local_embedder):
    p = make_pipeline(examples_db, local_embedder)
    ans = p.answer("How many times is a failed webhook delivery retried?")
    assert ans.decision == ANSWER and ans.offline and OFFLINE_NOTE in ans.notes
    assert ans.text.startswith("From the docs:") and "8" in ans.text
    for passage in ans.passages:  # every quote is verbatim from its chunk (lines reflowed)
        chunk = next(h for h in ans.hits if h["id"] == passage.chunk_id)
        assert occurs_in(passage.text, chunk["text"])
    assert ans.citations and all(c.verified for c in ans.citations)
    # api (deliveries) is close
    assert all(s.url for s in ans.sources) and "webhooks" in ans.intents[:2]

    follow = p.answer(
        "and how long between them?",
        [{"role": "user", "text": "How many times is a failed webhook delivery retried?"}],
    )
    assert "retried" in follow.condensed and follow.decision != ABSTAIN


@pytest.mark.parametrize(
    "question", ["What is a good recipe for sourdough bread?", "Who won the World Cup in 1998?"]
)
def test_off_topic_question_abstains(examples_db, local_embedder, question):
    ans = make_pipeline(examples_db, local_embedder).answer(question)
    assert (
        ans.decision == ABSTAIN and not ans.sources and "couldn't find this in the docs" in ans.text
    )


def test_empty_and_huge_questions(examples_db, local_embedder):
    p = make_pipeline(examples_db, local_embedder)
    with pytest.raises(QuestionError):
        p.answer("   ")
    ans = p.answer("How do I rotate an API key? " + "padding " * 5000)
    assert len(ans.question) <= 4000 and ans.decision != ABSTAIN


def test_voyage_down_at_query_time_uses_keyword_search(tmp_path, stub):
    from index.embedders import VoyageEmbedder
    from tests.stubs import voyage_embeddings

    stub.route("/v1/embeddings", voyage_embeddings())
    voyage = VoyageEmbedder("k", base_url=stub.url + "/v1", max_retries=0)
    db = tmp_path / "v.db"
    index_folder(db, EXAMPLES, voyage)
    stub.route("/v1/embeddings", (503, {"detail": "down"}))
    ans = Pipeline(Engine(str(db), voyage), None, MODELS).answer(
        "How many times is a failed webhook delivery retried?"
    )
    assert (
        any("keyword search only" in n for n in ans.notes) and ans.hits and ans.decision != ABSTAIN
    )


def test_audit_records_every_answer_and_feedback(examples_db, local_embedder):
    p = make_pipeline(examples_db, local_embedder)
    ans = p.answer(
        "How many times is a failed webhook delivery retried?",
        context={"channel": "C1", "user": "U1"},
    )
    p.state.record_feedback(ans.audit_id, "U2", "helpful")
    p.state.record_feedback(ans.audit_id, "U2", "not_helpful")  # the last choice wins
    [row] = [r for r in p.state.list_answers() if r["id"] == ans.audit_id]
    assert (
        row["decision"] == ans.decision
        and row["channel"] == "C1"
        and row["feedback"] == {"U2": "not_helpful"}
    )
    assert (
        row["hits"][0]["id"] == ans.hits[0]["id"]
        and row["prompts"]["answer"]
        and row["timings_ms"]["total"] > 0
    )
    assert p.state.list_answers(decision="ABSTAIN") == [
        r for r in p.state.list_answers() if r["decision"] == "ABSTAIN"
    ]


def test_links_fall_back_to_base_url_and_anchor():
    chunk = {
        "doc": "billing/invoices.md",
        "heading_path": ["Invoices", "Refund policy"],
        "url": None,
    }
    assert (
        link_for(chunk, "https://docs.example.com/")
        == "https://docs.example.com/billing/invoices.md#refund-policy"
    )
    assert link_for(chunk) == "billing/invoices.md#refund-policy"
    chunk["url"] = "https://x.example/inv#old"
    assert link_for(chunk) == "https://x.example/inv#refund-policy"
