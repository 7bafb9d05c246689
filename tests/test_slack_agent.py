"""Slack's agent messaging experience, driven through the stand-in over signed HTTP and Socket
Mode: the Messages tab's greeting and scoped suggestions, a DM question answered in its own
thread showing its work (task updates before the first word, the sources at the end), a follow-up
in that thread reading its history, and app_context_changed keeping DM answers inside the scope
of the channel the user is looking at. And the stream stand-in refusing what Slack refuses."""

import json

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.slack_rules import GREETING
from index.store import open_db
from tests.standins.slack import BOT, SlackMock
from tests.standins.slack_harness import (
    answer_in,
    context_changed,
    dm,
    messages_tab_opened,
    shown_text,
    wait,
)

SCOPES = """
channels:
  CBILLING: {intents: [billing]}
  default: {intents: [webhooks]}
"""
BILLING_EXAMPLE = "How much does the Team plan cost?"
WEBHOOKS_EXAMPLE = "How many times will Tidewater retry a failed webhook?"


@pytest.fixture(params=["http", "socket"])
def transport(request) -> str:
    return request.param


@pytest.fixture
def scoped(make_harness, tmp_path, transport):
    path = tmp_path / "scopes.yaml"
    path.write_text(SCOPES)
    return make_harness(transport, scopes=str(path))


def viewing_kept(h, channel: str, user: str = "U1", dm_channel: str = "D1") -> None:
    """Bolt acks an event before its listener runs, so a context change and the next question
    are two events that may run in either order: wait, as a user does, until it is kept."""
    wait(lambda: h.state.viewing(user, dm_channel) == channel, what=f"{channel!r} kept as viewed")


def tasks_of(message: dict) -> list[dict]:
    return list(message["tasks"].values())


def work_before_words(message: dict) -> bool:
    kinds = [c["type"] for c in message["chunks"]]
    return "task_update" in kinds and kinds.index("task_update") < kinds.index("markdown_text")


def audit_rows(h, channel: str) -> list[dict]:
    return sorted(
        (r for r in h.state.list_answers() if r["channel"] == channel), key=lambda r: r["id"]
    )


def doc_titles(db: str, folder: str) -> set[str]:
    index = open_db(db, create=False)
    rows = index.execute("SELECT title FROM docs WHERE path LIKE ?", [folder + "%"]).fetchall()
    return {r[0] for r in rows}


# -- the Messages tab ------------------------------------------------------------------------------


def test_a_messages_tab_open_gets_the_greeting_and_scoped_suggestions(scoped):
    h = scoped
    h.event(messages_tab_opened(viewing="CBILLING"), "EvM1")
    [prompts] = wait(lambda: h.mock.calls("/api/assistant.threads.setSuggestedPrompts"))
    asked = [p["message"] for p in prompts.json["prompts"]]
    assert prompts.json["channel_id"] == "D1" and "thread_ts" not in prompts.json
    assert BILLING_EXAMPLE in asked and WEBHOOKS_EXAMPLE not in asked  # the viewed scope's only
    [greeting] = wait(lambda: h.mock.posts())
    assert greeting["channel"] == "D1" and greeting["text"] == GREETING
    assert "thread_ts" not in greeting  # the DM's first message: questions thread under theirs
    # a later open: suggestions again, no second greeting
    h.event(messages_tab_opened(viewing=""), "EvM2")  # looking at no channel: the DM's scope
    wait(lambda: len(h.mock.calls("/api/assistant.threads.setSuggestedPrompts")) == 2)
    again = h.mock.calls("/api/assistant.threads.setSuggestedPrompts")[1].json["prompts"]
    assert [p["message"] for p in again][0] == WEBHOOKS_EXAMPLE  # default: the webhooks intent
    h.event(dm("What does error TW-1429 mean?", ts="1700000060.000100", channel="D2"), "EvM3")
    answer_in(h.mock, "D2")  # everything before it was handled
    assert len(h.mock.posts()) == 1


def test_without_suggestions_the_greeting_names_example_questions(make_harness):
    h = make_harness("http")
    h.mock.fail("assistant.threads.setSuggestedPrompts", (200, {"ok": False, "error": "x"}))
    h.event(messages_tab_opened(), "EvM4")
    [greeting] = wait(lambda: h.mock.posts())
    assert greeting["text"].startswith(GREETING) and "For example" in greeting["text"]


# -- a question, its work, its follow-up -----------------------------------------------------------


def test_a_dm_question_is_answered_in_its_thread_showing_its_work_and_followed_up(
    make_harness, transport
):
    h = make_harness(transport)
    question = dm("How many times is a failed webhook retried?", ts="1700000070.000100")
    h.event(question, "EvQ1")
    [answer] = answer_in(h.mock, "D1")
    assert answer["thread_ts"] == "1700000070.000100" and answer["state"] == "stopped"
    assert work_before_words(answer) and h.mock.posts() == []
    titles = [t["title"] for t in tasks_of(answer)]
    assert titles[0] == "Searching the docs" and titles[1].startswith("Reading: ")
    assert "Reading: Delivery and retries › Retry schedule" in titles
    assert all(t["status"] == "complete" for t in tasks_of(answer))
    # the sources end it, as URL source elements numbered as the answer cites them
    assert tasks_of(answer)[-1]["title"] == "Sources"
    cited = tasks_of(answer)[-1]["sources"]
    assert [e["text"][:4] for e in cited] == [f"[{n}] " for n in range(1, len(cited) + 1)]
    assert all(f"[{n}]" in shown_text(answer) for n in range(1, len(cited) + 1))
    # a follow-up in that thread reads it
    h.mock.thread_messages = [
        {"user": "U1", "text": question["text"], "ts": question["ts"]},
        {"user": BOT, "bot_id": "BBOT", "text": answer["text"], "ts": answer["ts"]},
        {"user": "U1", "text": "and over how long?", "ts": "1700000070.000300"},
    ]
    follow_up = dm("and over how long?", ts="1700000070.000300", thread_ts=question["ts"])
    h.event(follow_up, "EvQ2")
    second = answer_in(h.mock, "D1", 2)[1]
    assert second["thread_ts"] == question["ts"]
    [replies] = h.mock.calls("/api/conversations.replies")
    assert replies.form["ts"] == question["ts"]
    row = audit_rows(h, "D1")[1]
    assert row["question"] == "and over how long?" and "retr" in row["condensed"]


# -- what the user is looking at -------------------------------------------------------------------


def test_app_context_changed_keeps_dm_answers_inside_the_viewed_channels_scope(
    make_harness, tmp_path, transport, examples_db
):
    path = tmp_path / "scopes.yaml"
    path.write_text("channels:\n  CBILLING: {intents: [billing]}\n")  # DMs search everything
    h = make_harness(transport, scopes=str(path))
    question = "How do I check that a webhook really came from Tidewater?"
    h.event(dm(question, ts="1700000080.000100"), "EvC1")
    [everywhere] = answer_in(h.mock, "D1")
    assert audit_rows(h, "D1")[0]["decision"] != "ABSTAIN"
    h.event(context_changed("CBILLING"), "EvC2")
    viewing_kept(h, "CBILLING")
    h.event(dm(question, ts="1700000080.000200"), "EvC3")
    [_, billing] = answer_in(h.mock, "D1", 2)
    row = audit_rows(h, "D1")[1]
    assert row["routing"]["scope"] == "CBILLING (intents billing)"
    assert row["decision"] == "ABSTAIN"  # only another scope's docs answer it: refused here
    assert all(hit["doc"].startswith("billing/") for hit in row["hits"])
    # nothing of another scope in what the stream showed either
    billing_titles = doc_titles(examples_db, "billing/")
    read = [t["title"] for t in tasks_of(billing) if t["title"].startswith("Reading: ")]
    assert all(t.removeprefix("Reading: ").split(" › ")[0] in billing_titles for t in read)
    assert "webhook" not in json.dumps(tasks_of(billing)).lower()
    # looking at no channel again: the DM's own scope (everything)
    h.event(context_changed(""), "EvC4")
    viewing_kept(h, "")
    h.event(dm(question, ts="1700000080.000300"), "EvC5")
    answer_in(h.mock, "D1", 3)
    assert "scope" not in audit_rows(h, "D1")[2]["routing"]
    assert everywhere["state"] == "stopped"


# -- the app as Slack sees it ----------------------------------------------------------------------


def sample_event(name: str) -> dict:
    """A documented-shape event for each event the manifest subscribes to."""
    message = {"type": "message", "user": "U1", "text": "hello there", "ts": "1700000090.000100"}
    return {
        "app_mention": {**message, "type": "app_mention", "text": f"<@{BOT}> hi", "channel": "C1"},
        "app_home_opened": messages_tab_opened(),
        "app_context_changed": context_changed("C1"),
        "message.channels": {**message, "channel": "C1", "channel_type": "channel"},
        "message.groups": {**message, "channel": "G1", "channel_type": "group"},
        "message.im": {**message, "channel": "D1", "channel_type": "im"},
        "message.mpim": {**message, "channel": "G2", "channel_type": "mpim"},
    }[name]


def test_every_event_the_manifest_subscribes_to_has_a_listener(make_harness):
    from tests.test_slack_docs import manifest

    h = make_harness("http")
    events = manifest()["settings"]["event_subscriptions"]["bot_events"]
    for i, name in enumerate(events):
        acked, body = h.event(sample_event(name), f"EvL{i}")
        assert acked, f"{name}: {body}"  # Bolt answers 404 "unhandled request" otherwise
    assert not h.event({"type": "reaction_added", "user": "U1"}, "EvL99")[0]  # as a control
    # what they started is done before the stand-in closes: the greetings (the tab, the "hi")
    wait(lambda: {p["channel"] for p in h.mock.posts()} >= {"D1", "C1"})


# -- the stream stand-in refuses what Slack refuses ------------------------------------------------


def refused(call) -> str:
    try:
        call()
    except SlackApiError as e:
        return e.response["error"]
    return ""


def test_the_stream_stand_in_refuses_what_slack_refuses():
    mock = SlackMock()
    try:
        client = WebClient(token="xoxb-test", base_url=mock.url + "/api/")

        def start(**kwargs):
            return client.chat_startStream(channel="D1", thread_ts="1.1", **kwargs)

        task = {"type": "task_update", "id": "t", "title": "Searching", "status": "in_progress"}
        assert refused(lambda: start(chunks=[{"type": "status_update", "text": "x"}]))
        assert refused(lambda: start(chunks=[{**task, "status": "done"}])) == "invalid_chunks"
        assert refused(lambda: start(chunks=[{**task, "details": "x" * 257}])) == "invalid_chunks"
        source = {"type": "url", "url": "javascript:alert(1)", "text": "x"}
        assert refused(lambda: start(chunks=[{**task, "sources": [source]}])) == "invalid_chunks"
        text = {"type": "markdown_text", "text": "x" * 12_001}
        assert refused(lambda: start(chunks=[text])) == "invalid_chunks"
        many = [{**task, "id": f"t{i}"} for i in range(51)]
        assert refused(lambda: start(chunks=many)) == "msg_blocks_too_many"
        ts = start(chunks=[task])["ts"]
        assert refused(lambda: client.chat_appendStream(channel="D1", ts=ts)) == "no_text"
        blocks = [{"type": "divider"}] * 51
        assert refused(lambda: client.chat_stopStream(channel="D1", ts=ts, blocks=blocks))
        client.chat_stopStream(channel="D1", ts=ts, chunks=[{**task, "status": "complete"}])
        again = refused(lambda: client.chat_appendStream(channel="D1", ts=ts, chunks=[task]))
        assert again == "message_not_in_streaming_state"
    finally:
        mock.close()


def test_a_long_answer_with_many_sources_streams_within_slacks_limits(make_harness):
    """Whatever the docs and the model make of it, the stream stays within what Slack takes: a
    30,000-character answer in pieces, 60 sources, every task title cut to its limit."""
    from bot.slack.answers import Question
    from bot.slack.stream import Stream
    from router.answer import Answer, Progress, Source

    h = make_harness("http")
    q = Question(h.app.client, "D1", "1.1", "U1", "q", "1.1", None, "T1")
    stream = Stream(q, None, lambda q, ts: None)
    assert stream.start()
    stream.progress(Progress("reading", [f"Very long title {i} " * 30 for i in range(60)]))
    sources = [
        Source(i, f"c{i}", f"d{i}.md", f"Doc {i} " * 50, [], f"https://docs.example/{i}")
        for i in range(1, 61)
    ]
    text = "\n\n".join(f"Paragraph {i} " + "word " * 100 for i in range(60))
    assert stream.finish(Answer("q", "q", "ANSWER", text, sources))
    [answer] = answer_in(h.mock, "D1")
    assert len(answer["text"]) >= 30_000 and answer["state"] == "stopped"
    assert len(answer["tasks"]) <= 50
