"""Slack's Web API as the real slack_sdk client meets it (`SlackMock`: the methods the bot uses,
checked and failing as Slack does), and requests signed as Slack signs them (`signed_request`)."""

from __future__ import annotations

import itertools
import json
import time
from urllib.error import HTTPError
from urllib.request import Request as HttpRequest
from urllib.request import urlopen

from .server import Request, StubServer

BOT = "UBOT"
TEAM = "T1"


def slack_error(error: str) -> tuple:
    """What the Web API answers a call it refuses: HTTP 200 with ok:false."""
    return 200, {"ok": False, "error": error}


# Slack's 429: Retry-After in whole seconds (0 here, so tests don't wait; Slack says 1 or more)
RATELIMITED = (429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "0"})
SERVER_ERROR = (500, b"<html>Internal Server Error</html>")
RESPONSE_URL_POSTS = 5  # per response_url, in 30 minutes


def permalink(channel: str, ts: str) -> str:
    """A message's link as Slack's chat.getPermalink gives it."""
    return f"https://tidewater.slack.com/archives/{channel}/p{ts.replace('.', '')}"


def _blocks(value) -> list:
    if not value:
        return []
    return json.loads(value) if isinstance(value, str) else list(value)


def _block_error(blocks: list) -> str | None:
    """Block Kit's limits as the Web API enforces them (invalid_blocks)."""
    if len(blocks) > 50:
        return "invalid_blocks"
    markdown = sum(len(b.get("text", "")) for b in blocks if b.get("type") == "markdown")
    if markdown > 12_000:
        return "invalid_blocks"
    for b in blocks:
        if b.get("type") == "section" and len(b.get("text", {}).get("text", "")) > 3000:
            return "invalid_blocks"
        if b.get("type") == "header" and len(b.get("text", {}).get("text", "")) > 150:
            return "invalid_blocks"
        if b.get("type") == "markdown" and len(b.get("text", "")) > 12_000:
            return "invalid_blocks"
        if b.get("type") == "context" and (
            len(b.get("elements", [])) > 10
            or any(len(e.get("text", "")) > 3000 for e in b.get("elements", []))
        ):
            return "invalid_blocks"
    return None


class SlackMock(StubServer):
    """The Web API methods the bot uses, checked and failing as Slack does, recording every call.

    `fail(method, *results)` makes the next calls of a method answer with those results (e.g.
    `slack_error("msg_too_long")`, RATELIMITED, SERVER_ERROR) before it answers normally again."""

    def __init__(self):
        super().__init__()
        self.ts = itertools.count(1)
        self.thread_messages: list[dict] = []
        self.replies_page = 1000  # most messages conversations.replies returns per page
        self.messages: dict[str, dict] = {}  # ts -> {"channel", "text", "blocks"} as they stand
        self.streams: dict[str, dict] = {}  # ts -> {"channel", "text", "state", "blocks"}
        self.faults: dict[str, list] = {}
        self.socket_url = ""  # set by a SocketModeServer: apps.connections.open returns it
        self.respond_posts: dict[str, int] = {}
        self.refuse_blocks = ""  # an error for every message with blocks (e.g. invalid_blocks)
        self.channels: dict[str, str] = {}  # id -> name, listed by conversations.list
        self.home_views: dict[str, dict] = {}  # user -> the Home tab views.publish set

        def method(name, handler):
            def serve(req: Request):
                with self.lock:
                    queued = self.faults.get(name)
                    fault = queued.pop(0) if queued else None
                if fault is not None:
                    return fault
                result = handler(req.form or {})
                return result if isinstance(result, tuple) else (200, {"ok": True, **result})

            self.route(f"/api/{name}", serve)

        method("auth.test", lambda f: {"user_id": BOT, "bot_id": "BBOT", "team_id": TEAM})
        method("chat.postMessage", self._post)
        method("chat.update", self._update)
        method("chat.delete", self._delete)
        method("chat.postEphemeral", self._ephemeral)
        method("chat.startStream", self._start_stream)
        method("chat.appendStream", self._append_stream)
        method("chat.stopStream", self._stop_stream)
        method("conversations.replies", self._replies)
        method("apps.connections.open", self._connections_open)
        method("conversations.list", self._list_channels)
        method("views.publish", self._publish_view)
        method(
            "chat.getPermalink",
            lambda f: (
                {"channel": f["channel"], "permalink": permalink(f["channel"], f["message_ts"])}
                if f.get("channel") and f.get("message_ts")
                else slack_error("invalid_arguments")
            ),
        )
        for name in (
            "assistant.threads.setStatus",
            "assistant.threads.setSuggestedPrompts",
            "assistant.threads.setTitle",
        ):
            method(
                name,
                lambda f: (
                    {}
                    if f.get("channel_id") and f.get("thread_ts")
                    else slack_error("invalid_arguments")
                ),
            )
        self.route("/respond", self._respond)

    def fail(self, method: str, *results) -> None:
        with self.lock:
            self.faults.setdefault(method, []).extend(results)

    def _new_ts(self) -> str:
        return f"1800000000.{next(self.ts):06d}"

    def _message_error(self, f: dict) -> str | None:
        if not f.get("channel"):
            return "channel_not_found"
        blocks = _blocks(f.get("blocks"))
        if not f.get("text") and not blocks:
            return "no_text"
        if len(f.get("text") or "") > 40_000:
            return "msg_too_long"
        if blocks and self.refuse_blocks:
            return self.refuse_blocks
        return _block_error(blocks)

    def _post(self, f: dict):
        if error := self._message_error(f):
            return slack_error(error)
        ts = self._new_ts()
        with self.lock:
            self.messages[ts] = {
                "channel": f["channel"],
                "text": f.get("text"),
                "blocks": _blocks(f.get("blocks")),
                "thread_ts": f.get("thread_ts"),
            }
        return {"ts": ts, "channel": f["channel"]}

    def _update(self, f: dict):
        if error := self._message_error(f):
            return slack_error(error)
        with self.lock:
            if f.get("ts") not in self.messages:
                return slack_error("message_not_found")
            self.messages[f["ts"]].update(text=f.get("text"), blocks=_blocks(f.get("blocks")))
        return {"ts": f["ts"], "channel": f["channel"]}

    def _delete(self, f: dict):
        with self.lock:
            if self.messages.pop(f.get("ts", ""), None) is None:
                return slack_error("message_not_found")
        return {"ts": f["ts"], "channel": f["channel"]}

    def _ephemeral(self, f: dict):
        if not f.get("user"):
            return slack_error("user_not_in_channel")
        if error := self._message_error(f):
            return slack_error(error)
        return {"message_ts": self._new_ts()}

    @staticmethod
    def _chunk_text(f: dict) -> str:
        text = f.get("markdown_text") or ""
        for c in f.get("chunks") or []:
            if c.get("type") == "markdown_text":
                text += c.get("text", "")
        return text

    def _start_stream(self, f: dict):
        if not f.get("channel"):
            return slack_error("channel_not_found")
        if not f.get("thread_ts"):
            return slack_error("invalid_arguments")
        # outside a DM, Slack must be told whom the stream is for
        if not f["channel"].startswith("D"):
            if not f.get("recipient_team_id"):
                return slack_error("missing_recipient_team_id")
            if not f.get("recipient_user_id"):
                return slack_error("missing_recipient_user_id")
        ts = self._new_ts()
        with self.lock:
            self.streams[ts] = {
                "channel": f["channel"],
                "thread_ts": f["thread_ts"],
                "text": self._chunk_text(f),
                "state": "streaming",
                "blocks": [],
                "recipient_user_id": f.get("recipient_user_id"),
            }
        return {"ts": ts, "channel": f["channel"]}

    def _stream(self, f: dict):
        stream = self.streams.get(f.get("ts", ""))
        if stream is None or stream["channel"] != f.get("channel"):
            return None, slack_error("message_not_found")
        if stream["state"] != "streaming":
            return None, slack_error("message_not_in_streaming_state")
        return stream, None

    def _append_stream(self, f: dict):
        with self.lock:
            stream, error = self._stream(f)
            if error:
                return error
            text = self._chunk_text(f)
            if not text:
                return slack_error("no_text")
            stream["text"] += text
        return {"ts": f["ts"], "channel": f["channel"]}

    def _stop_stream(self, f: dict):
        blocks = _blocks(f.get("blocks"))
        if error := _block_error(blocks):
            return slack_error(error)
        with self.lock:
            stream, error = self._stream(f)
            if error:
                return error
            stream["text"] += self._chunk_text(f)
            stream["state"], stream["blocks"] = "stopped", blocks
        return {"ts": f["ts"], "channel": f["channel"]}

    def _replies(self, f: dict):
        """Oldest first, paged by cursor (an offset here), as Slack does."""
        limit = min(int(f.get("limit") or 1000), self.replies_page)
        start = int(f.get("cursor") or 0)
        page = self.thread_messages[start : start + limit]
        more = start + limit < len(self.thread_messages)
        meta = {"next_cursor": str(start + limit) if more else ""}
        return {"messages": page, "has_more": more, "response_metadata": meta}

    def _publish_view(self, f: dict):
        """views.publish as Slack checks it: a user and a view of type home with at most 100
        blocks, each with a type (invalid_arguments otherwise)."""
        try:
            view = json.loads(f["view"]) if isinstance(f.get("view"), str) else f.get("view")
        except ValueError:
            return slack_error("invalid_arguments")
        blocks = (view or {}).get("blocks")
        if (
            not f.get("user_id")
            or not isinstance(view, dict)
            or view.get("type") != "home"
            or not isinstance(blocks, list)
            or len(blocks) > 100
            or not all(isinstance(b, dict) and b.get("type") for b in blocks)
        ):
            return slack_error("invalid_arguments")
        if _block_error(blocks):
            return slack_error("invalid_blocks")
        with self.lock:
            self.home_views[f["user_id"]] = view
        return {"view": {"id": f"V{len(self.home_views)}", "type": "home", **view}}

    def _list_channels(self, f: dict):
        """Pages of `limit` channels (at most 1,000, as Slack caps it) with a next_cursor."""
        limit = min(int(f.get("limit") or 100), 1000)
        start = int(f.get("cursor") or 0)
        ids = sorted(self.channels)
        page = [{"id": i, "name": self.channels[i], "is_channel": True} for i in ids][
            start : start + limit
        ]
        more = start + limit < len(ids)
        return {
            "channels": page,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _connections_open(self, f: dict):
        if not self.socket_url:
            return slack_error("not_allowed_token_type")
        return {"url": self.socket_url}

    def _respond(self, req: Request):
        """A response_url: 5 posts, then Slack answers 404 used_url."""
        with self.lock:
            n = self.respond_posts[req.path] = self.respond_posts.get(req.path, 0) + 1
        if n > RESPONSE_URL_POSTS:
            return 404, b"used_url"
        return 200, b"ok"

    def posts(self):
        return [r.form for r in self.calls("/api/chat.postMessage")]

    def updates(self):
        return [r.form for r in self.calls("/api/chat.update")]

    def responses(self):
        return [r.json for r in self.calls("/respond")]

    def answers(self) -> list[dict]:
        """The messages and finished streams as they stand, oldest first, without the bot's
        placeholders and notes: what a user reading the channel sees."""
        with self.lock:
            found = [{"ts": ts, **m} for ts, m in self.messages.items()]
            found += [{"ts": ts, **s} for ts, s in self.streams.items() if s["state"] == "stopped"]
        return sorted(
            (m for m in found if m.get("blocks") or m.get("state")), key=lambda m: m["ts"]
        )


def signed_request(
    url: str, body: bytes, content_type: str, secret: str, headers: dict | None = None
):
    """POST `body` signed as Slack signs its requests; returns (status, body text)."""
    from slack_sdk.signature import SignatureVerifier

    ts = str(int(time.time()))
    sig = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body.decode())
    assert sig is not None  # None only without a timestamp
    req = HttpRequest(
        url,
        data=body,
        method="POST",
        headers={
            "content-type": content_type,
            "x-slack-request-timestamp": ts,
            "x-slack-signature": sig,
            **(headers or {}),
        },
    )
    try:
        with urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except HTTPError as e:
        return e.code, e.read().decode()
