"""The real Bolt App behind the real HTTP endpoint (waitress), its WebClient pointed at a local mock
of Slack's Web API; every request is signed as Slack signs it."""

import json
import shutil
import threading
import time
from urllib.parse import urlencode

import pytest
import waitress
from slack_sdk import WebClient

from bot.settings import Settings
from bot.slack_app import WORKING, build_app, make_wsgi
from bot.slack_format import BLOCKS_PER_MESSAGE, SECTION_LIMIT, answer_blocks
from index.store import open_db
from router.engine import Engine
from router.pipeline import Answer, Pipeline, Source
from router.state import SqliteState
from tests.conftest import EXAMPLES
from tests.stubs import BOT, SlackMock, signed_request

SECRET = "test-signing-secret"


@pytest.fixture
def slack(examples_db, local_embedder, tmp_path):
    mock = SlackMock()
    docs = shutil.copytree(EXAMPLES, tmp_path / "docs")
    settings = Settings(
        db=examples_db, docs=str(docs), slack_signing_secret=SECRET, admins="UADMIN"
    )
    pipeline = Pipeline(
        Engine(examples_db, local_embedder), None, {}, state=SqliteState(open_db(examples_db))
    )
    app = build_app(settings, pipeline, WebClient(token="xoxb-test", base_url=mock.url + "/api/"))
    server = waitress.create_server(make_wsgi(app), host="127.0.0.1", port=0, threads=4)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    port = server.effective_port
    yield Client(f"http://127.0.0.1:{port}", mock, pipeline)
    server.close()
    mock.close()


class Client:
    """Sends what Slack would send to the bot's endpoint."""

    def __init__(self, url, mock, pipeline):
        self.url, self.mock, self.pipeline = url, mock, pipeline

    def send(self, body: bytes, content_type: str, headers=None, secret=SECRET):
        return signed_request(self.url + "/slack/events", body, content_type, secret, headers)

    def event(self, event: dict, event_id: str, headers=None, secret=SECRET):
        body = {
            "token": "t",
            "team_id": "T1",
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": event,
        }
        return self.send(json.dumps(body).encode(), "application/json", headers, secret)

    def command(self, user: str, text: str = ""):
        form = {
            "token": "t",
            "team_id": "T1",
            "channel_id": "C1",
            "user_id": user,
            "command": "/docs-reindex",
            "text": text,
            "response_url": self.mock.url + "/respond",
            "trigger_id": "tr",
        }
        return self.send(urlencode(form).encode(), "application/x-www-form-urlencoded")

    def click(self, user: str, action_id: str, value: str):
        payload = {
            "type": "block_actions",
            "user": {"id": user},
            "team": {"id": "T1"},
            "api_app_id": "A1",
            "channel": {"id": "C1"},
            "container": {"type": "message"},
            "trigger_id": "tr",
            "actions": [
                {"type": "button", "action_id": action_id, "block_id": "feedback", "value": value}
            ],
        }
        return self.send(
            urlencode({"payload": json.dumps(payload)}).encode(),
            "application/x-www-form-urlencoded",
        )


def wait(condition, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for the bot")


def mention(text, ts="1700000000.000100", **extra):
    return {
        "type": "app_mention",
        "user": "U1",
        "text": f"<@{BOT}> {text}",
        "ts": ts,
        "channel": "C1",
        "event_ts": ts,
        **extra,
    }


def blocks_of(form):
    b = form.get("blocks", [])
    return json.loads(b) if isinstance(b, str) else b


def all_text(form):
    return json.dumps(form.get("blocks", "")) + form.get("text", "")


def test_mention_is_answered_in_its_thread_with_sources(slack):
    status, _ = slack.event(mention("How many times is a failed webhook retried?"), "Ev1")
    assert status == 200
    wait(lambda: slack.mock.updates())
    [placeholder] = slack.mock.posts()
    assert placeholder["text"] == WORKING and placeholder["thread_ts"] == "1700000000.000100"
    [update] = slack.mock.updates()
    blocks = blocks_of(update)
    text = json.dumps(blocks)
    assert (
        "*Sources*" in text
        and "docs.tidewater.example" in text
        and "answered without Claude" in text
    )
    assert blocks[-1]["elements"][0]["action_id"] == "feedback_helpful"


def test_dm_is_answered(slack):
    dm = {
        "type": "message",
        "channel_type": "im",
        "user": "U1",
        "text": "What does error TW-1429 mean?",
        "ts": "1700000001.000100",
        "channel": "D1",
    }
    slack.event(dm, "Ev2")
    wait(lambda: slack.mock.updates())
    assert slack.mock.posts()[0]["channel"] == "D1" and "thread_ts" not in slack.mock.posts()[0]
    assert "TW-1429" in all_text(slack.mock.updates()[0])


def test_assistant_panel_suggests_questions_and_shows_status(slack):
    started = {
        "type": "assistant_thread_started",
        "event_ts": "1700000009.000001",
        "assistant_thread": {
            "user_id": "U1",
            "channel_id": "D9",
            "thread_ts": "1700000009.000100",
            "context": {"channel_id": "C1", "team_id": "T1"},
        },
    }
    slack.event(started, "EvA1")
    wait(lambda: slack.mock.calls("/api/assistant.threads.setSuggestedPrompts"))
    prompts = slack.mock.calls("/api/assistant.threads.setSuggestedPrompts")[0].form
    assert prompts["channel_id"] == "D9" and "rotate" in json.dumps(prompts).lower()
    assert "Ask me about the docs" in slack.mock.posts()[0]["text"]
    question = {
        "type": "message",
        "channel_type": "im",
        "user": "U1",
        "text": "How do I rotate an API key?",
        "ts": "1700000009.000200",
        "thread_ts": "1700000009.000100",
        "channel": "D9",
    }
    slack.event(question, "EvA2")
    wait(lambda: slack.mock.updates())
    assert (
        slack.mock.calls("/api/assistant.threads.setStatus")[0].form["status"]
        == "is looking through the docs…"
    )
    assert slack.mock.posts()[1]["thread_ts"] == "1700000009.000100"
    time.sleep(0.5)
    assert len(slack.mock.updates()) == 1  # answered once, not also by the plain DM listener


def test_follow_up_in_the_thread_uses_its_history(slack):
    slack.event(mention("How many times is a failed webhook retried?"), "Ev3")
    wait(lambda: slack.mock.updates())
    slack.mock.thread_messages = [
        {
            "user": "U1",
            "text": f"<@{BOT}> How many times is a failed webhook retried?",
            "ts": "1700000000.000100",
        },
        {
            "bot_id": "BBOT",
            "user": BOT,
            "text": "8 attempts over about 24 hours",
            "ts": "1800000000.000001",
        },
        {"user": "U1", "text": "and how long is the wait between them?", "ts": "1700000000.000300"},
    ]
    follow = {
        "type": "message",
        "channel_type": "channel",
        "user": "U1",
        "text": "and how long is the wait between them?",
        "ts": "1700000000.000300",
        "thread_ts": "1700000000.000100",
        "channel": "C1",
    }
    slack.event(follow, "Ev4")
    wait(lambda: len(slack.mock.updates()) == 2)
    assert slack.mock.calls("/api/conversations.replies")[0].form["ts"] == "1700000000.000100"
    assert slack.mock.posts()[1]["thread_ts"] == "1700000000.000100"
    [row] = [
        r
        for r in slack.pipeline.state.db.query(
            "SELECT condensed, thread_ts FROM answers ORDER BY id DESC LIMIT 1"
        )
    ]
    assert "retried" in row["condensed"] and row["thread_ts"] == "1700000000.000100"


def test_the_same_event_twice_and_retries_get_one_answer(slack):
    event = mention("How do I rotate an API key?", ts="1700000002.000100")
    slack.event(event, "Ev5")
    slack.event(
        event, "Ev5", headers={"x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout"}
    )
    # the same mention also arrives as a message event
    slack.event({**event, "type": "message", "channel_type": "channel"}, "Ev6")
    wait(lambda: slack.mock.updates())
    time.sleep(0.5)
    assert len(slack.mock.posts()) == 1 and len(slack.mock.updates()) == 1


def test_bot_messages_edits_and_plain_channel_messages_are_ignored(slack):
    slack.event(
        {
            "type": "message",
            "subtype": "bot_message",
            "bot_id": "B2",
            "text": "hi",
            "ts": "1.1",
            "channel": "C1",
        },
        "Ev7",
    )
    slack.event(
        {
            "type": "message",
            "user": BOT,
            "text": "my own",
            "ts": "1.2",
            "channel": "C1",
            "channel_type": "channel",
        },
        "Ev8",
    )
    slack.event(
        {
            "type": "message",
            "subtype": "message_changed",
            "channel": "C1",
            "ts": "1.3",
            "message": {},
        },
        "Ev9",
    )
    slack.event(
        {
            "type": "message",
            "user": "U1",
            "text": "lunch?",
            "ts": "1.4",
            "channel": "C1",
            "channel_type": "channel",
        },
        "Ev10",
    )
    time.sleep(0.8)
    assert slack.mock.posts() == []


def test_bad_signature_is_rejected(slack):
    status, _ = slack.event(mention("anything"), "Ev11", secret="wrong-secret")
    assert status == 401
    time.sleep(0.3)
    assert slack.mock.posts() == []


def test_empty_mention_gets_a_clear_message(slack):
    slack.event(mention(""), "Ev12")
    wait(lambda: slack.mock.updates())
    assert "question is empty" in slack.mock.updates()[0]["text"]


def test_admin_reindex_posts_progress_and_summary(slack):
    status, body = slack.command("UADMIN")
    assert status == 200 and "Reindexing" in body
    wait(lambda: any("Reindexed in" in r["text"] for r in slack.mock.responses()))
    summary = [r["text"] for r in slack.mock.responses() if "Reindexed in" in r["text"]][0]
    assert "unchanged 24" in summary and "skipped 0" in summary
    status, body = slack.command("UADMIN", "status")
    assert "Last run" in body


def test_non_admin_reindex_is_refused(slack):
    status, body = slack.command("U1")
    assert status == 200 and "only fieldguide admins" in body
    time.sleep(0.5)
    assert slack.mock.responses() == []


def test_feedback_buttons_are_stored_last_choice_wins(slack):
    slack.event(mention("How do I rotate an API key?", ts="1700000003.000100"), "Ev13")
    wait(lambda: slack.mock.updates())
    answer_id = blocks_of(slack.mock.updates()[0])[-1]["elements"][0]["value"]
    assert slack.click("U2", "feedback_helpful", answer_id)[0] == 200
    assert slack.click("U2", "feedback_not_helpful", answer_id)[0] == 200
    wait(
        lambda: (
            slack.pipeline.state.db.execute(
                "SELECT value FROM feedback WHERE answer_id = ?", [int(answer_id)]
            ).fetchone()
            == ("not_helpful",)
        )
    )


def test_long_answer_is_split_within_block_kit_limits():
    long_text = "\n\n".join(
        f"Paragraph {i}: " + "word " * 300 + "\n```bash\n" + "echo line\n" * 40 + "```"
        for i in range(80)
    )
    ans = Answer(
        "q",
        "q",
        "ANSWER",
        long_text,
        sources=[
            Source(i, f"c{i}", "d.md", "Doc", ["Doc", f"S{i}"], "https://x.example/d")
            for i in range(1, 30)
        ],
    )
    messages = answer_blocks(ans, 7)
    assert len(messages) > 1
    for blocks in messages:
        assert len(blocks) <= BLOCKS_PER_MESSAGE
        for b in blocks:
            if b["type"] == "section":
                assert len(b["text"]["text"]) <= SECTION_LIMIT
                assert b["text"]["text"].count("```") % 2 == 0  # code fences closed in every block
    flat = "".join(b["text"]["text"] for m in messages for b in m if b["type"] == "section")
    assert flat.count("echo line") == 80 * 40
