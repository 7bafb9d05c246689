"""The real Bolt app, over signed HTTP and over Socket Mode, against a Web API mock that fails as
Slack does. Scenarios that every transport must pass take the `slack` fixture (both transports);
HTTP-only ones (signatures, body size) take `http`."""

import json
import threading

import anthropic
import pytest

from bot.slack.slack_rules import ACK_REPLY, BUSY, GREETING, THANKS_REPLY, WORKING
from tests.standins.server import StubServer
from tests.standins.slack import BOT, RATELIMITED, SERVER_ERROR, slack_error
from tests.standins.slack_harness import (
    Harness,
    answer_in,
    assistant_thread_started,
    dm,
    mention,
    sentinel,
    shown_text,
    wait,
)


@pytest.fixture(params=["http", "socket"])
def slack(request, make_harness) -> Harness:
    return make_harness(request.param)


@pytest.fixture
def http(make_harness) -> Harness:
    return make_harness("http")


markdown_of = shown_text


def sources_of(message: dict) -> list[dict]:
    """The URL source elements a streamed answer ends with."""
    return [e for t in message.get("tasks", {}).values() for e in t.get("sources", [])]


def first_word_after_work(message: dict) -> bool:
    """Did the stream show task updates before its first words?"""
    kinds = [c["type"] for c in message["chunks"]]
    return "task_update" in kinds and kinds.index("task_update") < kinds.index("markdown_text")


# -- answering, on every transport ---------------------------------------------------------------


def test_mention_is_answered_in_its_thread_with_sources_and_feedback(slack):
    acked, _ = slack.event(mention("How many times is a failed webhook retried?"), "Ev1")
    assert acked
    [answer] = answer_in(slack.mock, "C1")
    assert answer["state"] == "stopped" and answer["thread_ts"] == "1700000000.000100"
    assert slack.mock.posts() == []  # the stream's task updates were the sign of work
    assert first_word_after_work(answer) and "8 attempts" in markdown_of(answer)
    sources = sources_of(answer)
    assert sources and all("docs.tidewater.example" in e["url"] for e in sources)
    assert [e["text"][:4] for e in sources] == [f"[{n}] " for n in range(1, len(sources) + 1)]
    context = json.dumps([b for b in answer["blocks"] if b["type"] == "context"])
    assert "answered without Claude" in context
    [feedback] = [b for b in answer["blocks"] if b["type"] == "context_actions"]
    assert feedback["elements"][0]["type"] == "feedback_buttons"
    assert feedback["elements"][0]["positive_button"]["value"].startswith("helpful:")


def test_dm_is_answered_in_its_own_thread(slack):
    slack.event(dm("What does error TW-1429 mean?"), "Ev2")
    [answer] = answer_in(slack.mock, "D1")
    assert answer["thread_ts"] == "1700000050.000100" and "TW-1429" in markdown_of(answer)


def test_a_question_is_read_as_typed_not_as_slack_escapes_it(http):
    # Slack sends a typed link as <url|label> and escapes &, < and >
    typed = "what ip addresses do webhooks come from, to allow them for hooks.acme.io/tw & staging?"
    sent = typed.replace("hooks.acme.io/tw", "<https://hooks.acme.io/tw|hooks.acme.io/tw>")
    http.event(dm(sent.replace("&", "&amp;")), "EvTyped")
    [answer] = answer_in(http.mock, "D1")
    assert "203.0.113.10" in markdown_of(answer)
    asked = [r[0] for r in http.state.db.execute("SELECT question FROM answers")]
    assert asked == [typed]


def test_small_talk_gets_a_greeting_thanks_or_a_short_reply_never_not_in_the_docs(slack):
    slack.event(dm("hi", ts="1700000051.000100", channel="DHI"), "EvHi")
    slack.event(dm("thanks!", ts="1700000052.000100", channel="DTY"), "EvTy")
    slack.event(dm("ok :thumbsup:", ts="1700000053.000100", channel="DOK"), "EvOk")
    slack.event(dm("Thank you so much", ts="1700000054.000100", channel="DTY2"), "EvTy2")
    slack.event(dm("bye", ts="1700000055.000100", channel="DBYE"), "EvBye")
    sentinel(slack)
    by_channel = {p["channel"]: p["text"] for p in slack.mock.posts()}
    assert by_channel["DHI"].startswith(GREETING)
    assert by_channel["DTY"] == THANKS_REPLY == by_channel["DTY2"]
    assert by_channel["DOK"] == ACK_REPLY == by_channel["DBYE"]  # an acknowledgement
    assert not [
        p for p in slack.mock.posts() if p["channel"] in ("DHI", "DTY") and p["text"] == WORKING
    ]
    # none of them was searched for, nor recorded as a question
    asked = [r[0] for r in slack.state.db.execute("SELECT question FROM answers")]
    assert not {"hi", "thanks!", "ok :thumbsup:", "Thank you so much", "bye"} & set(asked)


# a question in the thread assistant_thread_started() opened
IN_ASSISTANT_THREAD = dm(
    "How do I rotate an API key?",
    ts="1700000009.000200",
    channel="D9",
    thread_ts="1700000009.000100",
)


def test_an_app_on_assistant_view_still_greets_and_answers_in_the_thread(slack):
    slack.event(assistant_thread_started(), "EvA1")
    wait(lambda: slack.mock.calls("/api/assistant.threads.setSuggestedPrompts"))
    prompts = slack.mock.calls("/api/assistant.threads.setSuggestedPrompts")[0].form
    assert prompts["channel_id"] == "D9" and "rotate" in json.dumps(prompts).lower()
    assert slack.mock.posts()[0]["text"] == GREETING
    slack.mock.thread_messages = [
        {"user": BOT, "bot_id": "BBOT", "text": GREETING, "ts": "1700000009.000101"}
    ]
    slack.event(IN_ASSISTANT_THREAD, "EvA2")
    [answer] = answer_in(slack.mock, "D9")
    title = slack.mock.calls("/api/assistant.threads.setTitle")[0].form
    assert title["title"] == "How do I rotate an API key?"
    assert answer["thread_ts"] == "1700000009.000100" and first_word_after_work(answer)
    assert not [p for p in slack.mock.posts() if p["text"] == WORKING]  # the stream says it
    sentinel(slack)
    assert len([m for m in slack.mock.answers() if m["channel"] == "D9"]) == 1  # answered once
    # the greeting was not history: the question was not rewritten as a follow-up
    row = slack.state.db.execute("SELECT condensed FROM answers WHERE channel = 'D9'").fetchone()
    assert row[0] == "How do I rotate an API key?"


def test_the_assistant_status_shows_work_when_the_stream_cannot(http):
    http.mock.fail("chat.startStream", slack_error("not_allowed"))
    http.event(assistant_thread_started(), "EvA3")
    http.event(IN_ASSISTANT_THREAD, "EvA4")
    [answer] = answer_in(http.mock, "D9")
    status = http.mock.calls("/api/assistant.threads.setStatus")[0].form
    assert status["status"] == "is looking through the docs…" and status["loading_messages"]
    assert "state" not in answer and "otate" in markdown_of(answer)


def test_follow_up_uses_the_newest_history_and_skips_greetings(slack):
    slack.event(mention("How many times is a failed webhook retried?"), "Ev3")
    answer_in(slack.mock, "C1")
    old = [
        {"user": "U1", "text": f"old question {i} about billing", "ts": f"1600000000.{i:06d}"}
        for i in range(60)
    ]
    slack.mock.thread_messages = [
        *old,
        {"user": BOT, "bot_id": "BBOT", "text": GREETING, "ts": "1700000000.000050"},
        {
            "user": "U1",
            "text": f"<@{BOT}> How many times is a failed webhook retried?",
            "ts": "1700000000.000100",
        },
        {
            "user": BOT,
            "bot_id": "BBOT",
            "text": "Five times, over 24 hours.",
            "ts": "1700000000.000150",
        },
        {"user": "U1", "text": "and how long between tries?", "ts": "1700000000.000200"},
    ]
    slack.mock.replies_page = 15  # several pages, oldest first
    follow_up = {
        "type": "message",
        "channel_type": "channel",
        "user": "U1",
        "text": "and how long between tries?",
        "ts": "1700000000.000200",
        "thread_ts": "1700000000.000100",
        "channel": "C1",
    }
    slack.event(follow_up, "Ev4")
    answer_in(slack.mock, "C1", 2)
    pages = slack.mock.calls("/api/conversations.replies")
    assert len(pages) == 5 and pages[-1].form["cursor"] == "60"
    row = slack.state.db.execute(
        "SELECT condensed, thread_ts FROM answers ORDER BY id DESC LIMIT 1"
    ).fetchone()
    assert "retried" in row[0] and row[1] == "1700000000.000100"  # the newest turns were read


def test_a_short_follow_up_in_a_thread_is_answered_not_taken_for_small_talk(slack):
    slack.event(mention("How many times is a failed webhook retried?"), "Ev5")
    answer_in(slack.mock, "C1")
    slack.mock.thread_messages = [
        {
            "user": "U1",
            "text": f"<@{BOT}> How many times is a failed webhook retried?",
            "ts": "1700000000.000100",
        },
        {"user": BOT, "bot_id": "BBOT", "text": "8 attempts.", "ts": "1700000000.000150"},
        {"user": "U1", "text": "tell me more", "ts": "1700000000.000300"},
    ]
    more = {
        "type": "message",
        "channel_type": "channel",
        "user": "U1",
        "text": "tell me more",
        "ts": "1700000000.000300",
        "thread_ts": "1700000000.000100",
        "channel": "C1",
    }
    slack.event(more, "Ev6")
    answer_in(slack.mock, "C1", 2)  # read through the thread's turns, not left unanswered
    assert ACK_REPLY not in [p["text"] for p in slack.mock.posts()]


def test_the_same_event_twice_and_retries_get_one_answer(slack):
    event = mention("How do I rotate an API key?", ts="1700000002.000100")
    slack.event(event, "Ev5")
    slack.event(event, "Ev5", retry=1)
    # the same mention also arrives as a message event
    slack.event({**event, "type": "message", "channel_type": "channel"}, "Ev6")
    answer_in(slack.mock, "C1")
    sentinel(slack)
    assert len([m for m in slack.mock.answers() if m["channel"] == "C1"]) == 1


@pytest.mark.parametrize("subtype", ["file_share", "thread_broadcast"])
def test_file_share_and_broadcast_messages_are_answered(make_harness, subtype):
    h = make_harness("http")
    h.event(dm("What does error TW-1429 mean?", subtype=subtype, files=[]), "EvF")
    [answer] = answer_in(h.mock, "D1")
    assert "TW-1429" in markdown_of(answer)


def test_bot_messages_edits_and_plain_channel_messages_are_ignored(slack):
    for i, event in enumerate(
        [
            {
                "type": "message",
                "subtype": "bot_message",
                "bot_id": "B2",
                "text": "hi",
                "ts": "1.1",
                "channel": "C1",
            },
            {
                "type": "message",
                "user": BOT,
                "text": "my own",
                "ts": "1.2",
                "channel": "C1",
                "channel_type": "channel",
            },
            {
                "type": "message",
                "subtype": "message_changed",
                "channel": "C1",
                "ts": "1.3",
                "message": {},
            },
            {
                "type": "message",
                "user": "U1",
                "text": "lunch?",
                "ts": "1.4",
                "channel": "C1",
                "channel_type": "channel",
            },
        ]
    ):
        slack.event(event, f"EvIgnored{i}")
    sentinel(slack)
    assert [p for p in slack.mock.posts() if p["channel"] != "DSENT"] == []


def test_admin_reindex_posts_progress_and_summary(slack):
    acked, body = slack.command("UADMIN")
    assert acked and "Reindexing" in body
    wait(lambda: any(b"Reindexed in" in r.body for r in slack.mock.calls("/respond")))
    summary = [r.json["text"] for r in slack.mock.calls("/respond") if b"Reindexed" in r.body][0]
    assert "unchanged 24" in summary and "skipped 0" in summary
    _, body = slack.command("UADMIN", "status")
    assert "Last run" in body


@pytest.mark.parametrize("text", ["help", "everything please", "--force"])
def test_reindex_help_and_unknown_arguments_show_usage(slack, text):
    acked, body = slack.command("UADMIN", text)
    assert acked and "Usage:" in body
    _, body = slack.command("U1")
    assert "only fieldguide admins" in body
    slack.event(dm("What does error TW-1429 mean?", ts="1700009999.000100", channel="DSENT"), "E")
    answer_in(slack.mock, "DSENT")
    assert slack.mock.calls("/respond") == [] and slack.state.reindex_running() is False


def test_feedback_is_stored_last_choice_wins(slack):
    slack.event(mention("How do I rotate an API key?", ts="1700000003.000100"), "Ev13")
    [answer] = answer_in(slack.mock, "C1")
    [feedback] = [b for b in answer["blocks"] if b["type"] == "context_actions"]
    buttons = feedback["elements"][0]
    answer_id = int(buttons["positive_button"]["value"].split(":")[1])
    assert slack.click("U2", buttons["positive_button"]["value"])[0]
    assert slack.click("U2", buttons["negative_button"]["value"])[0]
    assert slack.click("U3", str(answer_id), action_id="feedback_helpful")[0]  # an older message

    def stored():
        rows = slack.state.db.execute(
            "SELECT user, value FROM feedback WHERE answer_id = ? ORDER BY user", [answer_id]
        ).fetchall()
        return rows == [("U2", "not_helpful"), ("U3", "helpful")]

    wait(stored)


def hanging_claude():
    """A Messages API that never answers until released: every answer worker stays busy."""
    release = threading.Event()
    server = StubServer()

    def hang(req):
        release.wait(20)
        return 500, {"type": "error", "error": {"type": "api_error", "message": "released"}}

    server.route("/v1/messages", hang)
    client = anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=0, timeout=30)
    return server, release, client


def test_closing_waits_for_the_answer_under_way(make_harness):
    """The answer a worker is writing when the bot closes is delivered before close returns:
    nothing of it runs on into what comes next (another test, a restarted process)."""
    server, release, client = hanging_claude()
    try:
        h = make_harness("http", client, answer_workers=1)
        h.event(mention("How do I rotate an API key?", ts="1700000300.000100"), "EvClose")
        wait(lambda: server.calls("/v1/messages"))  # the worker is inside its answer
        release.set()  # Claude fails now: the answer goes on offline
        h.bot.answerer.close(wait=10.0)
        assert h.bot.answerer.pending() == 0
        delivered = h.mock.answers()
        assert any("rotat" in json.dumps(m).lower() for m in delivered), delivered
    finally:
        release.set()
        server.close()


@pytest.mark.parametrize("transport", ["http", "socket"])
def test_acks_feedback_and_commands_do_not_wait_behind_answers(make_harness, transport):
    import time

    server, release, client = hanging_claude()
    try:
        h = make_harness(transport, client, answer_workers=1, answer_queue=1)
        # the first question takes the only worker, the second waits, the third is turned away
        h.event(mention("How do I rotate an API key?", ts="1700000100.000100"), "EvB0")
        wait(lambda: server.calls("/v1/messages"))
        for i in (1, 2):
            h.event(mention("How do I rotate an API key?", ts=f"1700000100.00010{i}"), f"EvB{i}")
        wait(lambda: len(h.mock.posts()) >= 2)  # the busy note and the full queue's
        notes = [p["text"] for p in h.mock.posts()]
        assert BUSY in notes and any("Too many questions" in n for n in notes)
        from router.answer import Answer

        earlier = h.state.record_answer(Answer("q", "q", "ANSWER", "…"), {"channel": "C1"})
        for send in (
            lambda: h.click("U2", f"helpful:{earlier}"),
            lambda: h.command("UADMIN", "status"),
            lambda: h.event(dm("anything", ts="1700000200.000100"), "EvB9"),
        ):
            t = time.monotonic()
            acked, body = send()
            assert acked and time.monotonic() - t < 3
        assert "Last run" in h.command("UADMIN", "status")[1]
        wait(lambda: h.state.db.execute("SELECT 1 FROM feedback").fetchone())
    finally:
        release.set()
        server.close()


def test_socket_mode_reconnects_on_disconnect(make_harness):
    h = make_harness("socket")
    assert h.socket is not None
    h.socket.disconnect()
    assert len(h.mock.calls("/api/apps.connections.open")) == 2
    h.event(dm("What does error TW-1429 mean?"), "EvR1")
    answer_in(h.mock, "D1")


# -- never hanging: Slack refusing or failing writes ----------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        [slack_error("msg_too_long")],
        [slack_error("ratelimited")],
        [SERVER_ERROR] * 3,  # still failing after the client's two retries
        [slack_error("channel_not_found")],
    ],
)
def test_answer_is_delivered_when_the_final_update_fails(http, fault):
    http.mock.fail("chat.startStream", slack_error("not_allowed"))  # a placeholder, then updated
    http.mock.fail("chat.update", *fault)
    http.event(mention("How do I rotate an API key?"), "EvU")
    [answer] = answer_in(http.mock, "C1")
    assert "rotate" in markdown_of(answer).lower()
    wait(lambda: http.mock.calls("/api/chat.delete"))  # the stale placeholder is removed
    assert not [m for m in http.mock.messages.values() if m["text"] == WORKING]


def test_rate_limits_and_server_errors_are_retried(http):
    http.mock.fail("chat.startStream", RATELIMITED, SERVER_ERROR)
    http.mock.fail("chat.appendStream", RATELIMITED)
    http.mock.fail("chat.stopStream", SERVER_ERROR)
    http.event(mention("How do I rotate an API key?"), "EvR")
    [answer] = answer_in(http.mock, "C1")
    assert answer["state"] == "stopped" and "otate" in markdown_of(answer)
    assert len(http.mock.calls("/api/chat.startStream")) == 3
    assert len(http.mock.calls("/api/chat.stopStream")) == 2
    http.mock.fail("chat.startStream", slack_error("not_allowed"))  # whole, as a placeholder
    http.mock.fail("chat.postMessage", RATELIMITED, SERVER_ERROR)
    http.mock.fail("chat.update", RATELIMITED)
    http.event(mention("How do I rotate an API key?", ts="1700000001.000100"), "EvR2")
    answer_in(http.mock, "C1", 2)
    assert len(http.mock.calls("/api/chat.postMessage")) == 3
    assert len(http.mock.calls("/api/chat.update")) == 2


def test_a_failed_placeholder_does_not_mean_silence(http):
    http.mock.fail("chat.startStream", slack_error("not_in_channel"))
    http.mock.fail("chat.postMessage", slack_error("not_in_channel"))
    http.event(mention("How do I rotate an API key?"), "EvP")
    [answer] = answer_in(http.mock, "C1")
    assert answer["thread_ts"] == "1700000000.000100"


def test_blocks_refused_everywhere_fall_back_to_plain_text(http):
    http.mock.refuse_blocks = "invalid_blocks"
    http.event(mention("How do I rotate an API key?"), "EvT")
    wait(lambda: [p for p in http.mock.posts() if "blocks" not in p and "otate" in p["text"]])
    [plain] = [p for p in http.mock.posts() if "blocks" not in p and "otate" in p["text"]]
    assert "[1]" in plain["text"]


def test_empty_mention_gets_a_clear_message(http):
    http.event(mention(""), "Ev12")
    [said] = answer_in(http.mock, "C1")
    assert "question is empty" in said["text"]
    assert [t["status"] for t in said["tasks"].values()] == ["error"]  # the search it began


def test_injected_doc_cannot_ping_the_channel_or_link_elsewhere(
    make_harness, local_embedder, tmp_path
):
    from index.indexer import index_folder
    from tests.conftest import write_docs

    docs = write_docs(
        tmp_path / "evil",
        {
            "keys.md": '---\ntitle: "Keys <!here> <@U0HERE>"\n'
            "---\n# Keys\n\n## Rotating keys\n\nTo rotate an API key <!channel> open "
            "<https://evil.example|the console> and press `<@U0ADMIN>` then "
            "[Rotate](https://evil.example/rotate).\n",
        },
    )
    # a front-matter url that would smuggle markup never reaches the index (the loader's schema):
    # the field is left out with a warning, the doc kept
    (docs / "evil-url.md").write_text(
        '---\nurl: "https://x> <!channel> <https://evil"\n---\n# Evil\n\nRotate keys here.\n'
    )
    db = str(tmp_path / "evil.db")
    summary = index_folder(db, docs, local_embedder)
    assert not summary.skipped and "evil-url.md" in summary.added
    assert [w["path"] for w in summary.warnings] == ["evil-url.md"]
    h = make_harness("http", db=db)
    h.event(mention("How do I rotate an API key?"), "EvX")
    [answer] = answer_in(h.mock, "C1")
    sent = json.dumps(answer) + json.dumps(h.mock.updates())
    # the title as a page shows it: `<!here>` is HTML to markdown (not shown), the rest escaped
    assert "rotate" in sent.lower() and "Reading: Keys &lt;@U0HERE&gt;" in sent
    for bad in ("<!", "<@", "<https", "](https://evil", "(https://x"):
        assert bad not in sent


# -- the HTTP endpoint ---------------------------------------------------------------------------


def test_bad_signature_and_unsigned_junk_get_401(http):
    status, _ = http.send_http(
        json.dumps(mention("x")).encode(), "application/json", secret="wrong-secret"
    )
    assert status == 401
    from urllib.error import HTTPError
    from urllib.request import Request, urlopen

    for junk in (b"\xff\xfe not json {{{", b"payload=%7Bbroken"):
        try:
            urlopen(Request(http.url, data=junk, method="POST"), timeout=5)
            raise AssertionError("accepted")
        except HTTPError as e:
            assert e.code == 401
    sentinel(http)
    assert [p for p in http.mock.posts() if p["channel"] != "DSENT"] == []


def test_bodies_over_a_megabyte_get_413(http):
    from urllib.error import URLError

    # the server (run as `serve --http` runs it) answers 413 from the headers and closes the
    # connection without reading the body: a client still sending it may see the close first
    try:
        status, _ = http.send_http(b"x" * (1024 * 1024 + 1), "application/json")
    except (URLError, ConnectionError) as e:
        assert "Broken pipe" in str(e) or "reset" in str(e).lower(), e
    else:
        assert status == 413


# -- streamed answers with Claude --------------------------------------------------------------


@pytest.fixture
def claude_stub():
    """A real anthropic client on a Messages API stub answering as FakeClaude(**kwargs)."""
    from tests.standins.claude import FakeClaude

    servers = []

    def make(**kwargs) -> anthropic.Anthropic:
        server = StubServer()
        servers.append(server)
        server.route("/v1/messages", FakeClaude(**kwargs))
        return anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=0, timeout=10)

    yield make
    for server in servers:
        server.close()


LONG_REPLY = [
    ("Check the header [see docs](https://evil.example) <!channel>.", [(0, 0, 1)]),
    " " + " ".join(f"word{i}" for i in range(60)) + ".",
]


@pytest.mark.parametrize("transport", ["http", "socket"])
def test_claude_answer_is_streamed_to_the_asker_with_feedback_at_the_stop(
    make_harness, claude_stub, transport
):
    client = claude_stub(answer=LONG_REPLY, words_per_second=400)
    h = make_harness(transport, client)
    h.event(mention("How do I verify the signature of a webhook?"), "EvS1")
    [answer] = answer_in(h.mock, "C1")
    assert answer["state"] == "stopped" and answer["thread_ts"] == "1700000000.000100"
    starts = h.mock.calls("/api/chat.startStream")
    assert len(starts) == 1 and len(h.mock.calls("/api/chat.appendStream")) >= 2
    assert starts[0].json["recipient_team_id"] == "T1"
    assert starts[0].json["recipient_user_id"] == "U1"
    assert answer["text"].startswith("Check the header see docs &lt;!channel&gt;.")
    assert "word59." in answer["text"] and "evil" not in json.dumps(answer)
    # searching, reading, the words, checking each claim, then the sources the words cite
    titles = [t["title"] for t in answer["tasks"].values()]
    assert titles[0] == "Searching the docs" and titles[1].startswith("Reading: ")
    assert titles[-2:] == ["Checking each claim", "Sources"] and first_word_after_work(answer)
    [cited] = sources_of(answer)
    assert cited["text"].startswith("[1] ") and cited["url"].startswith("https://docs.")
    types = [b["type"] for b in answer["blocks"]]
    assert types == ["context", "context_actions"]  # the sources are the task's, not listed
    # nothing was posted: the stream was the first sign of work
    assert h.mock.posts() == [] and h.mock.updates() == []


def test_an_unsupported_claim_adds_its_caveat_to_the_streamed_answer(make_harness, claude_stub):
    reply = [
        ("Compare the signature header with your HMAC.", [(0, 0, 1)]),
        (" Signatures expire after 90 days.", [(0, 0, 1)]),
    ]
    client = claude_stub(answer=reply, unsupported=("90 days",), words_per_second=400)
    h = make_harness("http", client)
    h.event(mention("How do I verify the signature of a webhook?"), "EvS9")
    [answer] = answer_in(h.mock, "C1")
    # the words were streamed as written; the stop added the caveat naming the sentence
    assert answer["state"] == "stopped" and "Signatures expire after 90 days." in answer["text"]
    caveat = answer["blocks"][0]["text"]
    assert caveat.startswith("_⚠ Partial answer:") and "Signatures expire after 90 days." in caveat
    [row] = h.state.list_answers()
    assert row["decision"] == "PARTIAL" and row["usage"]["check"]["output_tokens"] > 0


def test_a_claim_check_that_cannot_run_is_marked_on_the_streamed_answer(make_harness, claude_stub):
    """Fail closed where the asker reads it: the check down (529), the stop adds the caveat that
    the answer's claims were not checked, and the audit row is PARTIAL."""
    from tests.standins.claude import OVERLOADED

    reply = [("Compare the signature header with your HMAC.", [(0, 0, 1)])]
    client = claude_stub(answer=reply, words_per_second=400, down={"check": OVERLOADED})
    h = make_harness("http", client)
    h.event(mention("How do I verify the signature of a webhook?"), "EvS10")
    [answer] = answer_in(h.mock, "C1")
    assert answer["state"] == "stopped" and "Compare the signature header" in answer["text"]
    caveat = answer["blocks"][0]["text"]
    assert caveat.startswith("_⚠ Partial answer: its claims were not checked")
    [row] = h.state.list_answers()
    assert row["decision"] == "PARTIAL" and "check" not in row["usage"]


def test_a_refused_stream_still_delivers_the_whole_answer(make_harness, claude_stub):
    client = claude_stub(answer=LONG_REPLY)
    h = make_harness("http", client)
    h.mock.fail("chat.startStream", slack_error("not_allowed"))
    h.event(mention("How do I verify the signature of a webhook?"), "EvS2")
    [answer] = answer_in(h.mock, "C1")
    assert "state" not in answer and "Check the header see docs" in markdown_of(answer)
    assert "[1]" in markdown_of(answer)


def test_claude_answers_in_a_dm_stream_into_the_questions_thread(make_harness, claude_stub):
    client = claude_stub(answer=LONG_REPLY, words_per_second=400)
    h = make_harness("http", client)
    h.event(dm("How do I verify the signature of a webhook?"), "EvS3")
    [answer] = answer_in(h.mock, "D1")
    assert answer["state"] == "stopped" and answer["thread_ts"] == "1700000050.000100"
    assert "word59." in answer["text"] and first_word_after_work(answer)


def test_bots_and_edits_are_ignored_for_every_event_kind(http):
    # another bot mentioning this one (two bots could answer each other in a
    # loop), and edits, whatever kind of event carries them
    question = "What does error TW-1429 mean?"
    for i, event in enumerate(
        [
            mention(question, ts="1.1", bot_id="B2"),
            mention(question, ts="1.2", subtype="bot_message", bot_id="B2", user=None),
            mention(question, ts="1.3", edited={"user": "U1", "ts": "1.31"}),
            mention(question, ts="1.4", subtype="message_changed"),
            {
                "type": "message",
                "subtype": "message_changed",
                "channel": "D1",
                "channel_type": "im",
                "ts": "1.5",
                "message": dm(question, ts="1.05", edited={"user": "U1", "ts": "1.5"}),
            },
            dm(question, ts="1.6", bot_id="B2", subtype="bot_message"),
            dm(question, ts="1.7", thread_ts="1.6", bot_id="B2"),  # an assistant thread
        ]
    ):
        acked, _ = http.event(event, f"EvBot{i}")
        assert acked
    sentinel(http)
    assert [p for p in http.mock.posts() if p["channel"] != "DSENT"] == []
    assert [m for m in http.mock.answers() if m["channel"] != "DSENT"] == []


def test_a_lone_surrogate_in_a_question_is_read_not_a_failure(http):
    # JSON can carry "\ud800" (json.dumps writes it as that escape)
    http.event(dm("What does error TW-1429 mean? \ud800"), "EvSurrogate")
    [answer] = answer_in(http.mock, "D1")
    assert "TW-1429" in markdown_of(answer) and "went wrong" not in markdown_of(answer)
    asked = [r[0] for r in http.state.db.execute("SELECT question FROM answers")]
    assert asked == ["What does error TW-1429 mean? \ufffd"]


URL_REPLY = [
    ("Pay at https://evil.example/pay?x=1 now.", [(0, 0, 1)]),
    " Or www.phish.example, not `https://code.example`.",
]


@pytest.mark.parametrize("how", ["streamed", "whole"])
def test_bare_urls_from_the_model_are_text_and_answers_do_not_unfurl(
    make_harness, claude_stub, how
):
    # only the sources are links; Slack previews nothing under an answer
    h = make_harness("http", claude_stub(answer=URL_REPLY, words_per_second=400))
    if how == "streamed":
        h.event(mention("How do I verify the signature of a webhook?"), "EvU1")
        [answer] = answer_in(h.mock, "C1")
        text = answer["text"]
    else:
        h.event(dm("How do I verify the signature of a webhook?"), "EvU2")
        [answer] = answer_in(h.mock, "D1")
        text = markdown_of(answer)
    assert "`https://evil.example/pay?x=1` now" in text and "`www.phish.example`" in text
    assert "`https://code.example`" in text and "``" not in text
    assert "(https://evil" not in text and " https://evil" not in text
    for post in h.mock.posts():  # the placeholder (replaced by the answer) and the answer
        assert post["unfurl_links"] is False and post["unfurl_media"] is False


def test_a_signed_event_is_acked_in_time_while_200_idle_connections_are_open(http):
    # connections that send half a request and then nothing (slowloris, a
    # stuck proxy) must not keep Slack's events out: it wants its ack within 3 s
    import socket
    import time

    port = http.server.effective_port
    idle = []
    try:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: appl")
            idle.append(s)
        started = time.monotonic()
        acked, _ = http.event(dm("What does error TW-1429 mean?"), "EvBusyServer")
        assert acked and time.monotonic() - started < 3
        answer_in(http.mock, "D1")
    finally:
        for s in idle:
            s.close()


# -- Slack's limits, whatever the docs hold ------------------------------------------------------


def test_a_very_long_heading_gives_one_answer_within_slacks_limits(
    make_harness, tmp_path, local_embedder
):
    """A 30,000-character heading is cut with a mark when indexed; the answer is one message
    with its sources, decision and feedback, accepted by Slack as it is."""
    from index.indexer import index_folder
    from index.store import open_db
    from tests.conftest import write_docs

    heading = "Pelican gateway restarts " + "after a ferry token rotation " * 1100
    docs = write_docs(
        tmp_path / "docs",
        {
            "ops/pelican.md": "---\nintent: ops\n---\n# Pelican gateway\n\n"
            f"## {heading}\n\nTo restart the pelican gateway, run `tide gateway restart`"
            " and wait for the health check to turn green.\n"
        },
    )
    db = str(tmp_path / "index.db")
    index_folder(db, docs, local_embedder)
    paths = [json.loads(p) for (p,) in open_db(db).execute("SELECT heading_path FROM chunks")]
    assert max(len(h) for path in paths for h in path) <= 200
    assert any(h.endswith("…") for path in paths for h in path)
    h = make_harness(db=db)
    h.event(mention("How do I restart the pelican gateway?"), "EvLong1")
    [answer] = answer_in(h.mock, "C1")
    sentinel(h)
    refused = [f for f in h.mock.posts() + h.mock.updates() if h.mock._message_error(f)]
    assert not refused, "Slack refused a message"
    assert "tide gateway restart" in markdown_of(answer)
    assert any(b["type"] == "context_actions" for b in answer["blocks"])
    assert len([m for m in h.mock.posts() if m.get("channel") == "C1"]) <= 2  # placeholder too


def test_every_answer_message_is_within_slacks_limits_whatever_its_sources():
    """An index built before headings were capped: labels and text of any length still make
    messages Slack accepts, the sources in one block of the last message."""
    from bot.slack.slack_format import answer_messages
    from router.answer import Answer, Source
    from tests.standins.slack import _block_error

    label = "x" * 30_000
    sources = [
        Source(n, f"c{n}", "a.md", label, [label, label], "https://d.example/a") for n in (1, 2)
    ]
    for text in ("One sentence [1].", "word " * 20_000):
        ans = Answer("q", "q", "PARTIAL", text, sources=sources)
        messages = answer_messages(ans, 7)
        assert all(_block_error(m) is None for m in messages)
        assert len(messages) <= 2 + len(text) // 12_000  # the text, then the footer
        last = messages[-1]
        assert sum(b["type"] == "markdown" for b in last) >= 1
        assert any(b["type"] == "context_actions" for b in last)


# -- malformed signed bodies ---------------------------------------------------------------------


def click_form(**changes) -> bytes:
    from urllib.parse import urlencode

    payload = {
        "type": "block_actions",
        "user": {"id": "U1"},
        "team": {"id": "T1"},
        "channel": {"id": "C1"},
        "actions": [{"type": "button", "action_id": "answer_feedback", "value": "helpful:1"}],
    } | changes
    return urlencode({"payload": json.dumps(payload)}).encode()


MALFORMED_SIGNED = [
    click_form(actions=[{"type": "button", "action_id": 5, "value": "helpful:1"}]),
    click_form(user="U1"),
    click_form(user={"name": "no id"}),
    b"command=%2Fdocs-reindex&text=status&channel_id=C1&team_id=T1",  # no user_id
    b"command=%2Fdocs-reindex&text=&user_id=U1",  # no channel_id
]


@pytest.mark.parametrize("body", MALFORMED_SIGNED)
def test_a_malformed_signed_body_is_a_400_with_no_traceback(http, caplog, body):
    import logging

    caplog.set_level(logging.DEBUG)
    status, text = http.send_http(body, "application/x-www-form-urlencoded")
    assert status == 400 and "not a Slack payload" in text, (status, text)
    # what handles a request logs as Bolt or as fieldguide; a client call of a test before this
    # one, still finishing against its torn-down stand-in, is not this request's
    mine = [r for r in caplog.records if r.name.startswith(("slack_bolt", "bot", "router"))]
    assert not [r for r in mine if r.exc_info or r.levelno >= logging.ERROR]
    http.event(mention("How many times is a failed webhook retried?"), "EvMal1")
    answer_in(http.mock, "C1")  # and the bot still answers


def test_feedback_on_an_answer_not_on_record_is_not_stored(http):
    from router.answer import Answer

    real = http.state.record_answer(Answer("q", "q", "ANSWER", "…"), {"channel": "C1"})
    acked, _ = http.click("U1", f"helpful:{real + 1000}")
    assert acked
    [note] = wait(lambda: http.mock.calls("/api/chat.postEphemeral"), what="the note")
    assert "no record of that answer" in note.form["text"] and note.form["user"] == "U1"
    http.click("U1", f"helpful:{real}")
    wait(lambda: http.state.get_answer(real)["feedback"], what="the feedback on a real answer")
    assert http.state.get_answer(real + 1000) is None
    import sqlite3

    with sqlite3.connect(http.guide.settings.db) as conn:
        stored = conn.execute("SELECT answer_id FROM feedback").fetchall()
    assert stored == [(real,)]


# -- 12. signed but malformed bodies get 400 -------------------------------------------------------

MALFORMED = [
    (b"[1, 2, 3]", "application/json"),
    (b'{"type": "event_callback", "event": "str"}', "application/json"),
    (
        b'{"type": "event_callback", "event": {"type": "app_mention", "user": ["x"]}}',
        "application/json",
    ),
    (b"{not json", "application/json"),
    (b'"just a string"', "application/json"),
    (b"payload=%7Bbroken", "application/x-www-form-urlencoded"),
    (b"payload=%5B1%5D", "application/x-www-form-urlencoded"),
    (
        b"payload=%7B%22type%22%3A%22block_actions%22%2C%22actions%22%3A%22x%22%7D",
        "application/x-www-form-urlencoded",
    ),
]


@pytest.mark.parametrize("body, content_type", MALFORMED)
def test_a_signed_malformed_body_gets_400_not_a_traceback(make_harness, caplog, body, content_type):
    import logging

    caplog.set_level(logging.WARNING)
    h = make_harness()
    status, text = h.send_http(body, content_type)
    assert status == 400, (status, text)
    assert "Traceback" not in text
    # no error where the body is handled (the app and Bolt); a Web API call that an earlier test's
    # background thread makes to its closed stand-in logs through slack_sdk and is not this body's
    handled = [r for r in caplog.records if r.name.startswith(("bot", "slack_bolt"))]
    assert not [r for r in handled if r.levelno >= logging.ERROR], caplog.text
    # and the bot still answers
    from tests.standins.slack_harness import answer_in, mention

    h.event(mention("How many times is a failed webhook retried?"), "EvM1")
    answer_in(h.mock, "C1")
