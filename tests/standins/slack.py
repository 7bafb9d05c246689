"""Slack's Web API as the real slack_sdk client meets it (`SlackMock`: the methods the bot uses,
checked and failing as Slack does), and requests signed as Slack signs them (`signed_request`).

Streams are checked as the Web API checks them (docs.slack.dev, chat.startStream /
appendStream / stopStream and their error lists): the chunk types Slack knows (markdown_text,
task_update, plan_update, blocks) with their fields, a markdown text of at most 12,000
characters, a task's details and output of at most 256, a plan's title of at most 256, sources
that are URL source elements; anything else is `invalid_chunks`. A streamed message's blocks
(one task card per task, and the blocks of blocks chunks) are at most 50, as a message's are
(`msg_blocks_too_many`); the stop's own blocks count apart, 50 more."""

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


MARKDOWN_TEXT_LIMIT = 12_000  # a markdown_text chunk's (or argument's) characters
TASK_TEXT_LIMIT = 256  # a task_update's details and output, a plan_update's title
MESSAGE_BLOCKS = 50
TASK_STATUSES = ("pending", "in_progress", "complete", "error")
CHUNK_FIELDS = {
    "markdown_text": {"type", "text"},
    "task_update": {"type", "id", "title", "status", "details", "output", "sources"},
    "plan_update": {"type", "title"},
    "blocks": {"type", "blocks"},
}


def _source_ok(source) -> bool:
    """A URL source element: {"type": "url", "url": an http(s) address, "text": its label}."""
    return (
        isinstance(source, dict)
        and set(source) == {"type", "url", "text"}
        and source["type"] == "url"
        and isinstance(source["url"], str)
        and source["url"].startswith(("https://", "http://"))
        and isinstance(source["text"], str)
        and bool(source["text"].strip())
    )


def _chunk_ok(chunk) -> bool:
    """One streaming chunk of a kind Slack knows, with its fields within their limits."""
    if not isinstance(chunk, dict) or chunk.get("type") not in CHUNK_FIELDS:
        return False
    kind = chunk["type"]
    if set(chunk) - CHUNK_FIELDS[kind]:
        return False

    def text(key: str, limit: int, required: bool = True) -> bool:
        value = chunk.get(key)
        if value is None:
            return not required
        return isinstance(value, str) and bool(value) and len(value) <= limit

    if kind == "markdown_text":
        return text("text", MARKDOWN_TEXT_LIMIT)
    if kind == "plan_update":
        return text("title", TASK_TEXT_LIMIT)
    if kind == "blocks":
        blocks = chunk.get("blocks")
        return isinstance(blocks, list) and 0 < len(blocks) <= MESSAGE_BLOCKS
    sources = chunk.get("sources")
    return (
        isinstance(chunk.get("id"), str)
        and bool(chunk["id"])
        and isinstance(chunk.get("title"), str)
        and bool(chunk["title"].strip())
        and chunk.get("status") in TASK_STATUSES
        and text("details", TASK_TEXT_LIMIT, required=False)
        and text("output", TASK_TEXT_LIMIT, required=False)
        and (sources is None or (isinstance(sources, list) and all(map(_source_ok, sources))))
    )


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
        # ts -> {"channel", "thread_ts", "text", "state", "blocks", "tasks" (id -> the task as
        # it stands), "chunks" (every chunk, in order)}
        self.streams: dict[str, dict] = {}
        self.faults: dict[str, list] = {}
        self.socket_url = ""  # set by a SocketModeServer: apps.connections.open returns it
        self.respond_posts: dict[str, int] = {}
        self.refuse_blocks = ""  # an error for every message with blocks (e.g. invalid_blocks)
        self.channels: dict[str, str] = {}  # id -> name, listed by conversations.list
        self.home_views: dict[str, dict] = {}  # user -> the Home tab views.publish set
        self.history: dict[str, list[dict]] = {}  # channel -> earlier messages (history)

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
        method("conversations.history", self._history)
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
        for name in ("assistant.threads.setStatus", "assistant.threads.setTitle"):
            method(
                name,
                lambda f: (
                    {}
                    if f.get("channel_id") and f.get("thread_ts")
                    else slack_error("invalid_arguments")
                ),
            )
        # an agent's suggested prompts are the Messages tab's (no thread) or a thread's
        method(
            "assistant.threads.setSuggestedPrompts",
            lambda f: (
                {} if f.get("channel_id") and f.get("prompts") else slack_error("invalid_arguments")
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
            stream = self.streams.get(f.get("ts", ""))
            if stream is not None and stream["state"] == "streaming":
                return slack_error("cant_update_message")
            if stream is not None:  # a stopped stream is a message: its new content replaces all
                stream.update(text=f.get("text"), blocks=_blocks(f.get("blocks")), tasks={})
            elif f.get("ts") not in self.messages:
                return slack_error("message_not_found")
            else:
                self.messages[f["ts"]].update(text=f.get("text"), blocks=_blocks(f.get("blocks")))
        return {"ts": f["ts"], "channel": f["channel"]}

    def _delete(self, f: dict):
        with self.lock:
            ts = f.get("ts", "")
            if self.messages.pop(ts, None) is None and self.streams.pop(ts, None) is None:
                return slack_error("message_not_found")
        return {"ts": f["ts"], "channel": f["channel"]}

    def _ephemeral(self, f: dict):
        if not f.get("user"):
            return slack_error("user_not_in_channel")
        if error := self._message_error(f):
            return slack_error(error)
        return {"message_ts": self._new_ts()}

    @staticmethod
    def _chunks(f: dict) -> tuple[list[dict] | None, str | None]:
        """The call's chunks, its markdown_text argument first (as a chunk of its own), or the
        error Slack answers them with."""
        chunks = f.get("chunks") or []
        if isinstance(chunks, str):
            try:
                chunks = json.loads(chunks)
            except ValueError:
                return None, "invalid_chunks"
        if not isinstance(chunks, list) or not all(map(_chunk_ok, chunks)):
            return None, "invalid_chunks"
        text = f.get("markdown_text")
        if text is not None:
            if not isinstance(text, str) or len(text) > MARKDOWN_TEXT_LIMIT:
                return None, "invalid_chunks"
            chunks = [{"type": "markdown_text", "text": text}, *chunks] if text else chunks
        return chunks, None

    @staticmethod
    def _add(stream: dict, chunks: list[dict]) -> str | None:
        """`chunks` added to `stream` (its text, its tasks as they stand, every chunk in order);
        the error when the message would hold more blocks than Slack allows."""
        tasks = dict(stream["tasks"])
        blocks = stream["chunk_blocks"]
        for c in chunks:
            if c["type"] == "task_update":
                tasks[c["id"]] = c
            elif c["type"] == "blocks":
                blocks += len(c["blocks"])
        if len(tasks) + blocks > MESSAGE_BLOCKS:
            return "msg_blocks_too_many"
        stream["tasks"], stream["chunk_blocks"] = tasks, blocks
        stream["chunks"] += chunks
        stream["text"] += "".join(c["text"] for c in chunks if c["type"] == "markdown_text")
        return None

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
        if f.get("task_display_mode") not in (None, "timeline", "plan"):
            return slack_error("invalid_arguments")
        chunks, error = self._chunks(f)
        if error:
            return slack_error(error)
        stream = {
            "channel": f["channel"],
            "thread_ts": f["thread_ts"],
            "text": "",
            "state": "streaming",
            "blocks": [],
            "tasks": {},
            "chunk_blocks": 0,
            "chunks": [],
            "recipient_user_id": f.get("recipient_user_id"),
        }
        if error := self._add(stream, chunks or []):
            return slack_error(error)
        ts = self._new_ts()
        with self.lock:
            self.streams[ts] = stream
        return {"ts": ts, "channel": f["channel"]}

    def _stream(self, f: dict):
        stream = self.streams.get(f.get("ts", ""))
        if stream is None or stream["channel"] != f.get("channel"):
            return None, slack_error("message_not_found")
        if stream["state"] != "streaming":
            return None, slack_error("message_not_in_streaming_state")
        return stream, None

    def _append_stream(self, f: dict):
        chunks, error = self._chunks(f)
        if error:
            return slack_error(error)
        if not chunks:
            return slack_error("no_text")
        with self.lock:
            stream, error = self._stream(f)
            if error:
                return error
            if error := self._add(stream, chunks or []):
                return slack_error(error)
        return {"ts": f["ts"], "channel": f["channel"]}

    def _stop_stream(self, f: dict):
        blocks = _blocks(f.get("blocks"))
        if blocks and self.refuse_blocks:
            return slack_error(self.refuse_blocks)
        if len(blocks) > MESSAGE_BLOCKS:
            return slack_error("msg_blocks_too_many")
        if error := _block_error(blocks):
            return slack_error(error)
        chunks, error = self._chunks(f)
        if error:
            return slack_error(error)
        with self.lock:
            stream, error = self._stream(f)
            if error:
                return error
            if error := self._add(stream, chunks or []):
                return slack_error(error)
            stream["state"], stream["blocks"] = "stopped", blocks
        return {"ts": f["ts"], "channel": f["channel"]}

    def _history(self, f: dict):
        """A conversation's top-level messages, newest first (`limit` of them)."""
        channel = f.get("channel")
        if not channel:
            return slack_error("channel_not_found")
        with self.lock:
            found: list[dict] = [
                {"ts": ts, "text": m.get("text"), "user": BOT, "bot_id": "BBOT"}
                for ts, m in self.messages.items()
                if m["channel"] == channel and not m.get("thread_ts")
            ]
        found += self.history.get(channel, [])
        found.sort(key=lambda m: str(m["ts"]), reverse=True)
        return {"messages": found[: int(f.get("limit") or 100)], "has_more": False}

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
