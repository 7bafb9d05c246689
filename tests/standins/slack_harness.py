"""The real Bolt app driven as Slack drives it: over signed HTTP (waitress) or over Socket Mode (a
local WebSocket server speaking Slack's protocol), its WebClient pointed at the Web API mock."""

from __future__ import annotations

import json
import threading
import time
from urllib.parse import urlencode

from waitress import wasyncore

from bot.slack.slack_app import build_bot, http_server
from tests.standins.slack import BOT, TEAM, SlackMock, signed_request
from tests.standins.socket_mode import SocketModeServer

SECRET = "test-signing-secret"


# seconds a closing harness waits for its answers still running
CLOSE_WAIT = 5.0


class Harness:
    """Sends what Slack would send; `event`, `command` and `click` return (acked, ack body)."""

    def __init__(self, transport: str, guide, mock: SlackMock):
        from slack_sdk import WebClient

        from bot.slack.slack_app import retry_handlers

        self.transport, self.mock, self.guide = transport, mock, guide
        client = WebClient(
            token="xoxb-test", base_url=mock.url + "/api/", retry_handlers=retry_handlers()
        )
        self.bot = build_bot(guide, client)
        self.app = self.bot.app
        self.server = self.socket = self.handler = None
        if transport == "http":
            self.server = http_server(self.app, SECRET, "127.0.0.1", 0, threads=4)
            threading.Thread(target=self.server.run, daemon=True).start()
            self.url = f"http://127.0.0.1:{self.server.effective_port}/slack/events"
        else:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            self.socket = SocketModeServer(mock)
            self.handler = SocketModeHandler(self.app, "xapp-test", ping_interval=30)
            self.handler.connect()
            self.socket.current()

    @property
    def state(self):
        return self.guide.state

    def close(self) -> None:
        # the answers still running finish against this test's stand-ins, not a later test's
        # closed ones (where their failures would be logged into that test)
        self.bot.answerer.close(wait=CLOSE_WAIT)
        self.bot.close()
        if self.server is not None:
            # closed on the server's own loop thread: a socket closed under that thread's select()
            # raises EBADF there
            server = self.server
            try:
                server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
            except OSError:  # the loop already ended
                server.close()
            server.task_dispatcher.shutdown()
        if self.handler is not None:
            # the client's own shutdown takes 1-3 s of polling timeouts: let it run on its own
            self.handler.client.auto_reconnect_enabled = False
            self.handler.client.default_auto_reconnect_enabled = False
            threading.Thread(target=self.handler.close, daemon=True).start()
        if self.socket is not None:
            self.socket.close()

    # -- what Slack sends ----------------------------------------------------------------------

    def send_http(self, body: bytes, content_type: str, headers=None, secret=SECRET):
        return signed_request(self.url, body, content_type, secret, headers)

    def event(self, event: dict, event_id: str, retry: int = 0) -> tuple[bool, str]:
        body = {
            "token": "t",
            "team_id": TEAM,
            "api_app_id": "A1",
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": event,
        }
        if self.socket is not None:
            envelope = self.socket.send("events_api", body, retry_attempt=retry)
            return True, json.dumps(self.socket.ack(envelope).get("payload", {}))
        headers = {"x-slack-retry-num": str(retry), "x-slack-retry-reason": "http_timeout"}
        status, text = self.send_http(
            json.dumps(body).encode(), "application/json", headers if retry else None
        )
        return status == 200, text

    def command(self, user: str, text: str = "") -> tuple[bool, str]:
        form = {
            "token": "t",
            "team_id": TEAM,
            "channel_id": "C1",
            "user_id": user,
            "command": "/docs-reindex",
            "text": text,
            "response_url": self.mock.url + "/respond",
            "trigger_id": "tr",
        }
        if self.socket is not None:
            envelope = self.socket.send("slash_commands", form, accepts_response_payload=True)
            return True, json.dumps(self.socket.ack(envelope).get("payload", {}))
        status, body = self.send_http(urlencode(form).encode(), "application/x-www-form-urlencoded")
        return status == 200, body

    def click(self, user: str, value: str, action_id: str = "answer_feedback") -> tuple[bool, str]:
        payload = {
            "type": "block_actions",
            "user": {"id": user},
            "team": {"id": TEAM},
            "api_app_id": "A1",
            "channel": {"id": "C1"},
            "container": {"type": "message", "message_ts": "1800000000.000002"},
            "trigger_id": "tr",
            "actions": [
                {
                    "type": "feedback_buttons",
                    "action_id": action_id,
                    "block_id": "fb",
                    "value": value,
                    "action_ts": "1.2",
                }
            ],
        }
        if self.socket is not None:
            envelope = self.socket.send("interactive", payload)
            return True, json.dumps(self.socket.ack(envelope).get("payload", {}))
        status, body = self.send_http(
            urlencode({"payload": json.dumps(payload)}).encode(),
            "application/x-www-form-urlencoded",
        )
        return status == 200, body


def wait(condition, timeout: float = 20.0, what: str = "the bot"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def mention(text, ts="1700000000.000100", **extra) -> dict:
    return {
        "type": "app_mention",
        "user": "U1",
        "text": f"<@{BOT}> {text}",
        "ts": ts,
        "channel": "C1",
        "event_ts": ts,
        **extra,
    }


def dm(text, ts="1700000050.000100", channel="D1", **extra) -> dict:
    return {
        "type": "message",
        "channel_type": "im",
        "user": "U1",
        "text": text,
        "ts": ts,
        "channel": channel,
        **extra,
    }


# The agent messaging experience's events, with their documented shapes (docs.slack.dev's event
# references; @slack/types' AppHomeOpenedEvent and AppContextChangedEvent)


def entities(channel: str) -> dict:
    """An event's `context` naming the channel the user is looking at ({} for none)."""
    if not channel:
        return {}
    return {"entities": [{"type": "slack#/types/channel_id", "value": channel, "team_id": TEAM}]}


def messages_tab_opened(user="U1", channel="D1", viewing: str | None = None) -> dict:
    """app_home_opened for the Messages tab (`viewing`: the context it carries, if any)."""
    event = {
        "type": "app_home_opened",
        "user": user,
        "channel": channel,
        "tab": "messages",
        "event_ts": f"{time.time():.6f}",
    }
    return event | ({"context": entities(viewing)} if viewing is not None else {})


def context_changed(viewing: str, user="U1", channel="D1") -> dict:
    """app_context_changed: `user`, beside the app's DM `channel`, now looks at `viewing`."""
    return {
        "type": "app_context_changed",
        "user": user,
        "channel": channel,
        "context": entities(viewing),
        "event_ts": f"{time.time():.6f}",
    }


def assistant_thread_started(
    channel="D9", thread_ts="1700000009.000100", viewing="C1", user="U1"
) -> dict:
    """assistant_thread_started, as apps on assistant_view get it."""
    return {
        "type": "assistant_thread_started",
        "event_ts": "1700000009.000001",
        "assistant_thread": {
            "user_id": user,
            "channel_id": channel,
            "thread_ts": thread_ts,
            "context": {"channel_id": viewing, "team_id": TEAM},
        },
    }


def shown_text(message: dict) -> str:
    """What a reader sees of an answer's text: a stream's words, a message's markdown blocks."""
    streamed = message["text"] if message.get("state") else ""
    return streamed + "".join(b["text"] for b in message["blocks"] if b["type"] == "markdown")


def blocks_of(form) -> list:
    b = form.get("blocks", [])
    return json.loads(b) if isinstance(b, str) else b


def answer_in(mock: SlackMock, channel: str, count: int = 1) -> list[dict]:
    """Wait for `count` answers (messages with blocks, finished streams) in `channel`."""
    return wait(
        lambda: (
            (found := [m for m in mock.answers() if m["channel"] == channel])
            and len(found) >= count
            and found
        ),
        what=f"{count} answer(s) in {channel}",
    )


def sentinel(h: Harness, event_id: str = "EvSentinel") -> None:
    """A later DM, answered: everything sent before it has been handled."""
    h.event(dm("What does error TW-1429 mean?", ts="1700009999.000100", channel="DSENT"), event_id)
    answer_in(h.mock, "DSENT")
