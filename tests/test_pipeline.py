"""The answer pipeline against a local stub of the Messages API, with the real anthropic client."""

import threading
import time

import anthropic
import pytest

from index.indexer import index_folder
from router import reading
from router.answer import ABSTAIN, ANSWER, PARTIAL, label, occurs_in
from router.citations import link_for
from router.claude import OFFLINE_NOTE
from router.clock import REAL
from router.engine import Engine
from router.pipeline import UNCITED_NOTE, Pipeline
from router.question import REFUSED, UNSURE, QuestionError
from tests.conftest import EXAMPLES
from tests.standins.claude import OVERLOADED, FakeClaude, estimate_tokens, search_results

MODELS = {
    "classify": "claude-haiku-4-5",
    "condense": "claude-haiku-4-5",
    "answer": "claude-sonnet-4-6",
    "check": "claude-haiku-4-5",
}
SIGNATURE_Q = "How do I verify the signature of a webhook?"


def make_pipeline(db, local_embedder, stub=None, retries=0, timeout=5.0, models=None, clock=REAL):
    """The pipeline on the examples with the Messages API stand-in at `stub` (None: offline),
    its deadline read on `clock`."""
    client = None
    if stub is not None:
        client = anthropic.Anthropic(
            api_key="test", base_url=stub.url, max_retries=retries, timeout=timeout
        )
    models = models or MODELS
    engine = Engine(db, local_embedder, client, models.get("classify", "claude-haiku-4-5"))
    return Pipeline(engine, client, models, "https://docs.example.com", clock=clock)


def test_answer_with_native_citations_mapped_to_chunks_and_links(examples_db, local_embedder, stub):
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == ANSWER and not ans.trace.offline
    assert ans.text == "Check the header see docs.[1] That is all."  # the model's link is stripped
    [cit] = ans.citations
    assert cit.verified and cit.source == 1 and cit.doc == ans.sources[0].doc
    assert ans.sources[0].url.startswith("https://docs.tidewater.example/auth/verifying-signatures")
    answer_call = fake.calls("answer")[-1]
    results = [b for b in answer_call["messages"][0]["content"] if b["type"] == "search_result"]
    assert (
        results[0]["citations"] == {"enabled": True} and answer_call["model"] == "claude-sonnet-4-6"
    )
    steps = ("classify", "answer", "check")
    assert set(steps) <= set(ans.trace.usage)
    assert ans.trace.usage["check"]["model"] == "claude-haiku-4-5"
    assert ans.trace.usage["input_tokens"] == sum(ans.trace.usage[s]["input_tokens"] for s in steps)
    assert set(ans.trace.timings_ms) >= {"route_retrieve", "extract", "answer", "check", "total"}


FABRICATED = {
    "type": "search_result_location",
    "source": "https://docs.tidewater.example/x",
    "title": "x",
    "cited_text": "Tidewater never signs webhooks.",
    "search_result_index": 7,
    "start_block_index": 0,
    "end_block_index": 1,
}


def test_citation_spanning_several_blocks_is_verified_by_its_indices(
    examples_db, local_embedder, stub
):
    fake = FakeClaude(quote=2, answer=[("Verify the HMAC of the raw body.", [(0, 0, 2)])])
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    [cit] = ans.citations
    assert len(ans.passages) == 2 and cit.verified and ans.decision == ANSWER and not ans.caveat
    # the real API's cited_text: both blocks joined, which is no substring of any one block
    assert cit.cited_text == ans.passages[0].text + "\n\n" + ans.passages[1].text
    assert ans.text == "Verify the HMAC of the raw body.[1]"


@pytest.mark.parametrize(
    "reply",
    [
        [("Check the header.", [FABRICATED])],  # a search result that was never sent
        [("Check the header.", [dict(FABRICATED, search_result_index=0, end_block_index=9)])],
        ["Check the header."],  # no citation at all
    ],
    ids=["fabricated-result", "fabricated-blocks", "uncited"],
)
def test_an_answer_citing_nothing_is_never_shown(examples_db, local_embedder, stub, reply):
    """Claude's text with no citation that checks out is neither streamed nor returned: the
    docs' own quotes are the answer, each with its source."""
    stub.route("/v1/messages", FakeClaude(answer=reply))
    streamed: list[str] = []
    ans = make_pipeline(examples_db, local_embedder, stub).answer(
        SIGNATURE_Q, on_text=streamed.append
    )
    assert streamed == [] and "Check the header" not in ans.text
    assert ans.text.startswith("From the docs:") and UNCITED_NOTE in ans.trace.notes
    assert ans.decision == ANSWER and ans.citations and all(c.verified for c in ans.citations)
    # only the sources the quotes cite are listed
    assert {s.n for s in ans.sources} == {c.source for c in ans.citations}


def test_empty_answer_abstains(examples_db, local_embedder, stub):
    stub.route("/v1/messages", FakeClaude(answer=[]))
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == ABSTAIN and "couldn't find this in the docs" in ans.text
    assert not ans.sources and "Claude's answer was empty" in ans.trace.notes


def test_refusal_is_said_plainly(examples_db, local_embedder, stub):
    stub.route("/v1/messages", FakeClaude(answer=[], stop_reasons=["refusal"]))
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == ABSTAIN and ans.text == REFUSED and not ans.sources


def test_max_tokens_is_retried_once_with_more_room(examples_db, local_embedder, stub):
    fake = FakeClaude(stop_reasons=["max_tokens", "end_turn"])
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    first, second = fake.calls("answer")
    assert second["max_tokens"] > first["max_tokens"]
    # both replies are billed: the same text twice
    one = sum(estimate_tokens(b["text"]) for b in fake.answer_message(first)["content"])
    assert ans.decision == ANSWER and ans.trace.usage["answer"]["output_tokens"] == 2 * one


def test_cut_short_twice_is_a_marked_partial_answer(examples_db, local_embedder, stub):
    fake = FakeClaude(stop_reasons=["max_tokens"])
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert len(fake.calls("answer")) == 2
    assert ans.decision == PARTIAL and "cut short" in ans.caveat and ans.text


@pytest.mark.parametrize("content_type", ["application/json", "text/html"])
def test_a_200_that_is_not_json_falls_back_offline(examples_db, local_embedder, stub, content_type):
    stub.route(
        "/v1/messages", (200, b"<html>upstream proxy error</html>", {"content-type": content_type})
    )
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.trace.offline and ans.text.startswith("From the docs:") and ans.decision != ABSTAIN
    assert any("unusable reply" in n for n in ans.trace.notes)


def test_a_reply_missing_fields_falls_back_offline(examples_db, local_embedder, stub):
    fake = FakeClaude()

    def broken_answer(req):
        if fake.kind(req.json) == "answer":
            return 200, {"type": "message", "id": "msg_x"}  # no content, no usage
        return fake(req)

    stub.route("/v1/messages", broken_answer)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.trace.offline and ans.text.startswith("From the docs:")
    assert any(n.startswith("answer: unusable reply") for n in ans.trace.notes)


def test_structured_replies_are_closed_schemas_never_forced_tools(
    examples_db, local_embedder, stub
):
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    for kind in ("classify", "check"):
        body = fake.calls(kind)[0]
        assert "tool_choice" not in body and "tools" not in body
        schema = body["output_config"]["format"]["schema"]
        assert schema["additionalProperties"] is False
        item = next(iter(schema["properties"].values()))["items"]
        assert item["additionalProperties"] is False


def test_nothing_near_abstains_without_calling_the_answer_model(examples_db, local_embedder, stub):
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(
        "What is a good recipe for sourdough bread?"
    )
    assert ans.decision == ABSTAIN and "couldn't find this in the docs" in ans.text
    assert not fake.calls("answer") and not ans.sources


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
    assert ans.decision == ANSWER and not ans.trace.offline and ans.citations


def test_overloaded_every_time_falls_back_offline(examples_db, local_embedder, stub):
    stub.route("/v1/messages", OVERLOADED)
    ans = make_pipeline(examples_db, local_embedder, stub, retries=1).answer(SIGNATURE_Q)
    assert ans.trace.offline and ans.decision in (ANSWER, PARTIAL)
    assert any(OFFLINE_NOTE in n for n in ans.trace.notes)
    assert ans.text.startswith("From the docs:") and ans.sources
    # each call tried twice (one retry): the answer ran offline, and the classification beside
    # it was not kept
    assert len(stub.calls("/v1/messages")) == 4
    assert [n.split(":")[0] for n in ans.trace.notes if OFFLINE_NOTE in n] == ["answer"]
    assert "Claude's routing did not run (OverloadedError)" in ans.trace.notes


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
    assert ans.trace.offline and any("APITimeoutError" in n for n in ans.trace.notes)


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
    assert ans.decision != ABSTAIN and ans.trace.offline and OFFLINE_NOTE in ans.trace.notes
    assert "8" in ans.text and ans.sources
    # sure, the quotes come "From the docs:"; unsure, under "I'm not sure the docs answer this;
    # the closest sections are:"
    sure = ans.decision == ANSWER
    assert ans.text.startswith("From the docs:") == sure and (ans.caveat == UNSURE) != sure
    for passage in ans.passages:  # every quote is verbatim from its chunk (lines reflowed)
        chunk = next(h for h in ans.trace.hits if h["id"] == passage.chunk_id)
        assert occurs_in(passage.text, chunk["text"])
    assert ans.citations and all(c.verified for c in ans.citations)
    # api (deliveries) is close
    assert all(s.url for s in ans.sources) and "webhooks" in ans.intents[:2]

    follow = p.answer(
        "and how long between them?",
        [{"role": "user", "text": "How many times is a failed webhook delivery retried?"}],
    )
    assert "retried" in follow.condensed and follow.decision != ABSTAIN


def test_the_chat_around_a_question_is_not_searched(examples_db, local_embedder):
    # Slack users greet and thank: "thx" is no word of the docs, and was refused as a name
    p = make_pipeline(examples_db, local_embedder)
    plain = p.answer("How many times is a failed webhook delivery retried?")
    for chatty in (
        "hey all, how many times is a failed webhook delivery retried? thx",
        "Hi team, quick question - how many times is a failed webhook delivery retried? Thanks!",
        "@fieldguide how many times is a failed webhook delivery retried?",  # typed, not a mention
    ):
        ans = p.answer(chatty)
        assert ans.question == chatty and ans.condensed == plain.condensed
        assert (ans.decision, ans.text) == (plain.decision, plain.text)
    # a follow-up's acknowledgement goes too
    assert reading.plain("thanks, how do I replay them later?") == "How do I replay them later?"
    assert reading.plain("ok - and for the EU?") == "And for the EU?"
    for kept in ("Hello world example?", "Hi-res images?", "How do I say thanks?", "hi", "OK"):
        assert reading.plain(kept) == kept
    assert reading.plain("Thanks to retries, do I get duplicates?").startswith("Thanks to")


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
    ans = p.answer("How do I rotate an API key? " + "I need to rotate our key. " * 1000)
    assert len(ans.question) <= 4000 and ans.decision != ABSTAIN


def test_voyage_down_at_query_time_uses_keyword_search(tmp_path, stub):
    from index.embedders import VoyageEmbedder
    from tests.standins.voyage import voyage_embeddings

    stub.route("/v1/embeddings", voyage_embeddings())
    voyage = VoyageEmbedder("k", base_url=stub.url + "/v1", max_retries=0)
    db = tmp_path / "v.db"
    index_folder(db, EXAMPLES, voyage)
    stub.route("/v1/embeddings", (503, {"detail": "down"}))
    ans = Pipeline(Engine(str(db), voyage), None, MODELS).answer(
        "How many times is a failed webhook delivery retried?"
    )
    assert (
        any("keyword search only" in n for n in ans.trace.notes)
        and ans.trace.hits
        and ans.decision != ABSTAIN
    )


def test_audit_records_every_answer_and_feedback(examples_db, local_embedder):
    from bot.app import FieldGuide
    from bot.settings import Settings

    guide = FieldGuide(Settings(db=examples_db), embedder=local_embedder)
    ans = guide.ask(
        "How many times is a failed webhook delivery retried?",
        context={"channel": "C1", "user": "U1"},
    )
    state = guide.state
    assert ans.audit_id is not None
    state.record_feedback(ans.audit_id, "U2", "helpful")
    state.record_feedback(ans.audit_id, "U2", "not_helpful")  # the last choice wins
    [row] = [r for r in state.list_answers() if r["id"] == ans.audit_id]
    assert (
        row["decision"] == ans.decision
        and row["channel"] == "C1"
        and row["feedback"] == {"U2": "not_helpful"}
    )
    assert (
        row["hits"][0]["id"] == ans.trace.hits[0]["id"]
        and row["prompts"]["answer"]
        and row["timings_ms"]["total"] > 0
    )
    assert state.list_answers(decision="ABSTAIN") == [
        r for r in state.list_answers() if r["decision"] == "ABSTAIN"
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
    # a page without an H1: its first heading (an H2) is a section of its own to link to
    chunk["heading_path"] = ["Configuration Examples"]
    assert link_for(chunk) == "https://x.example/inv#configuration-examples"
    chunk["heading_path"] = []  # the page's opening, before any heading: its top
    assert link_for(chunk) == "https://x.example/inv"


def test_a_heading_s_own_id_is_its_anchor_and_never_shown():
    # VitePress, MkDocs (attr_list), kramdown and Pandoc let a heading name its anchor
    for heading, frag in [
        ("Overview of the `mise` activation methods {#overview}", "overview"),
        ("`task_config.includes` {#task_config.includes}", "task_config.includes"),
        ("Setup { #setup .tip }", "setup"),
        ("Setup {: #setup-kramdown}", "setup-kramdown"),
        ("Setup {: .tip #tip-setup}", "tip-setup"),
        ("Refund policy {.warning}", "refund-policy"),
    ]:
        path = ["A", heading]
        chunk = {"doc": "a.md", "heading_path": path, "url": "https://x.example/a"}
        assert link_for(chunk) == f"https://x.example/a#{frag}"
        assert "{" not in label("A", path)
    # braces that are the heading's own text stay in it
    path = ["A", "GET /users/{id}"]
    assert link_for({"doc": "a.md", "heading_path": path, "url": None}) == "a.md#get-usersid"
    assert label("A", path) == "A › GET /users/{id}"


def test_a_section_is_named_as_its_rendered_page_shows_it():
    """A heading's link shows its text, its inline HTML nothing (a VitePress badge, `<code>`'s
    tags), its code and emphasis as written; a first heading with the title's words is the
    title, whatever its markup."""
    for title, path, shown in [
        (
            "Tool Cache",
            ["[`mise cache clear`](/cli/cache.html)"],
            "Tool Cache › `mise cache clear`",
        ),
        (
            "Ubi",
            ['Ubi Backend <Badge type="danger" text="deprecated" />', "Usage"],
            "Ubi › Ubi Backend › Usage",
        ),
        ("Node API", ["db.close(cb) ⇒ <code>void</code>"], "Node API › db.close(cb) ⇒ void"),
        ("Backends", ["Use **github** when"], "Backends › Use **github** when"),
        (
            "mise sync python",
            ["`mise sync python`", "Flags", "`--uv`"],
            "mise sync python › Flags › `--uv`",
        ),
        (
            "Compatibility with pip",
            ["Compatibility with `pip`", "Package priority"],
            "Compatibility with pip › Package priority",
        ),
        ("Keys <!here>", ["Keys", "Rotating"], "Keys › Rotating"),
    ]:
        assert label(title, path) == shown


def test_claude_never_replying_still_answers_within_the_deadline(examples_db, stub, monkeypatch):
    from bot.app import FieldGuide
    from bot.settings import Settings

    release = threading.Event()

    def never(req):
        release.wait(20)
        return OVERLOADED

    stub.route("/v1/messages", never)
    for env, value in {
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": stub.url,
        "FIELDGUIDE_DB": examples_db,
        # everything else at its default (timeout 30 s, 2 retries); real time, as short as the
        # behaviour allows: the silent socket's read times out at the deadline (a call's timeout
        # is the time left), which no clock of ours can stand in for
        "FIELDGUIDE_DEADLINE": "1.0",
    }.items():
        monkeypatch.setenv(env, value)
    pipeline = FieldGuide(Settings.load()).pipeline
    pipeline.engine.warm()  # as `serve` starts: the deadline is for the question
    try:
        t = time.perf_counter()
        ans = pipeline.answer(SIGNATURE_Q)
        elapsed = time.perf_counter() - t
    finally:
        release.set()
    assert elapsed < 1.0 + 1.5 and ans.trace.offline and ans.text.startswith("From the docs:")
    # one attempt at the answer (no retry fits in the time left), then the docs' own quotes; the
    # classification beside it is not waited for, so whether its request has arrived yet is a race
    assert len([r for r in stub.calls("/v1/messages") if search_results(r.json)]) == 1
    assert any(n.startswith("answer: APITimeoutError") for n in ans.trace.notes)


def test_default_deadline_is_45_s_and_each_call_gets_the_time_left(examples_db, local_embedder):
    from bot.settings import Settings
    from router.claude import Claude
    from router.clock import Clock

    assert Settings.load().deadline == 45.0 == Pipeline(None).deadline  # type: ignore[arg-type]
    now = [0.0]
    client = anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9", timeout=30.0)
    claude = Claude(client, Settings.load().deadline, Clock(lambda: now[0]))
    assert claude.timeout() == 30.0
    now[0] = 40.0
    assert claude.timeout() == 5.0  # never more than the time left
    now[0] = 0.0
    claude = Claude(client.with_options(timeout=10.0), 45.0, Clock(lambda: now[0]))
    used = claude.run("x", lambda c: (c.timeout, c.max_retries), lambda: None)
    assert used == (10.0, 0)  # the SDK does not retry: Claude.call does, within the deadline
    now[0] = 44.8
    assert claude.run("x", lambda c: "called", lambda: "offline") == "offline"
    assert claude.fell_back == {"x": "out of time"}


def test_the_first_question_loads_are_timed_apart_from_condense(examples_db, local_embedder):
    """A process's first question opens the index: that is `load`, not `condense` (offline,
    condensing a question without a thread is a regular expression: it took 0.3-3.4 s when the
    loads were counted in it)."""
    pipeline = Pipeline(Engine(examples_db, local_embedder))
    first = pipeline.answer("How many times is a failed webhook retried?").trace.timings_ms
    again = pipeline.answer("How do I rotate an API key?").trace.timings_ms
    steps = ["load", "condense", "typos", "embed", "route_retrieve", "decide", "extract"]
    assert list(first)[: len(steps)] == steps and first["total"] >= sum(first[s] for s in steps)
    assert first["condense"] < 50 and again["condense"] < 50
    assert again["load"] < first["load"]  # loaded once a process


def test_progress_is_told_offline_and_with_claude_inside_the_scope(
    examples_db, local_embedder, stub
):
    """`on_progress` hears "searching", then "reading" with the sections about to be quoted
    (offline) or read by Claude, all inside the question's scope, then, with Claude, "checking"."""
    from router.engine import Scope

    scope = Scope("#hooks", folders=("webhooks/",))
    told: list = []
    quoted = make_pipeline(examples_db, local_embedder).answer(
        SIGNATURE_Q, scope=scope, on_progress=told.append
    )
    assert [p.kind for p in told] == ["searching", "reading"]
    assert {s.label for s in quoted.sources} <= set(told[1].labels)
    stub.route("/v1/messages", FakeClaude())
    told.clear()
    ans = make_pipeline(examples_db, local_embedder, stub).answer(
        SIGNATURE_Q, scope=scope, on_progress=told.append
    )
    assert [p.kind for p in told] == ["searching", "reading", "checking"]
    read = ans.trace.route["read"]
    assert told[1].labels == [r["section"] for r in read]
    assert all(h["doc"].startswith("webhooks/") for h in [*ans.trace.hits, *read])


def test_a_progress_hook_that_fails_costs_the_answer_nothing(examples_db, local_embedder):
    def broken(progress):
        raise RuntimeError("the status line is down")

    p = make_pipeline(examples_db, local_embedder)
    plain = p.answer(SIGNATURE_Q)
    told = p.answer(SIGNATURE_Q, on_progress=broken)
    assert (told.decision, told.text) == (plain.decision, plain.text)
