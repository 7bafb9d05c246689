"""Local HTTP servers that stand in for the Messages API, Voyage and Slack's Web API.

The real SDK clients are pointed at them. A stub records every request and answers from a handler
per path; a handler returns (status, body) or (status, body, headers), where body is a dict (sent as
JSON) or bytes.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.error import HTTPError
from urllib.parse import parse_qs
from urllib.request import Request as HttpRequest
from urllib.request import urlopen


class Request:
    def __init__(self, method: str, path: str, headers: dict, body: bytes):
        self.method, self.path, self.headers, self.body = method, path, headers, body

    @property
    def json(self):
        return json.loads(self.body or b"null")

    @property
    def form(self) -> dict:
        """Slack's Web API client posts form fields or JSON; either way a flat dict."""
        if self.headers.get("content-type", "").startswith("application/json"):
            return self.json
        return {k: v[0] for k, v in parse_qs(self.body.decode()).items()}


class StubServer:
    def __init__(self):
        self.requests: list[Request] = []
        self.routes: dict[str, object] = {}
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("content-length") or 0)
                req = Request(
                    self.command,
                    self.path.split("?")[0],
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
                with stub.lock:
                    stub.requests.append(req)
                    handler = stub.routes.get(req.path)
                result: Any
                if handler is None:
                    result = (404, {"error": f"no stub for {req.path}"})
                else:
                    result = (
                        handler(req)
                        if callable(handler)
                        else handler.pop(0)
                        if isinstance(handler, list)
                        else handler
                    )
                status, body, headers = (*result, {}) if len(result) == 2 else result
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def route(self, path: str, handler) -> None:
        """handler: a callable(Request), a list of results served in turn, or one fixed result."""
        with self.lock:
            self.routes[path] = handler

    def calls(self, path: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = 10.0) -> list[Request]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = self.calls(path)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{path} called {len(self.calls(path))} times, expected {count}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def voyage_embeddings(dim: int = 8):
    """A Voyage /embeddings handler: deterministic vectors from each text's hash."""
    import hashlib

    def handler(req: Request):
        texts = req.json["input"]
        data = []
        for i, t in enumerate(texts):
            h = hashlib.sha256(t.encode()).digest()
            data.append({"embedding": [b / 255 - 0.5 for b in h[:dim]], "index": i})
        return 200, {"data": data, "usage": {"total_tokens": sum(len(t.split()) for t in texts)}}

    return handler


def voyage_rerank(prefer: str = ""):
    """A Voyage /rerank handler shaped like the real one: `data` sorted by `relevance_score` (in
    [0, 1]) best first, each with its document's `index`, cut to `top_k`; 400 on a request the API
    rejects. Relevance is the share of the query's words a document holds, and a document holding
    `prefer` scores 1 (a test's way to say which chunk the reranker likes)."""

    def handler(req: Request):
        body = req.json
        docs, query = body.get("documents"), body.get("query")
        if not isinstance(query, str) or not query or not body.get("model"):
            return 400, {"detail": "query and model are required"}
        if not isinstance(docs, list) or not docs or len(docs) > 1000:
            return 400, {"detail": "documents must be a list of 1 to 1,000 strings"}
        words = set(query.lower().split())
        scores = [
            1.0
            if prefer and prefer in d
            else round(len(words & set(d.lower().split())) / (len(words) + 1), 4)
            for d in docs
        ]
        order = sorted(range(len(docs)), key=lambda i: -scores[i])[: body.get("top_k") or None]
        data = [{"index": i, "relevance_score": scores[i]} for i in order]
        tokens = sum(len(d.split()) for d in docs) + len(docs) * len(query.split())
        return 200, {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"total_tokens": tokens},
        }

    return handler


def claude_message(
    *content: dict, stop_reason: str = "end_turn", model: str = "claude-haiku-4-5"
) -> dict:
    """A Messages API response body with the given content blocks."""
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 120,
            "output_tokens": 30,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


def tool_use(name: str, input: dict) -> dict:
    return {"type": "tool_use", "id": "toolu_stub", "name": name, "input": input}


def text_block(text: str, citations: list | None = None) -> dict:
    block: dict[str, object] = {"type": "text", "text": text}
    if citations is not None:
        block["citations"] = citations
    return block


OVERLOADED = (
    529,
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    {"retry-after-ms": "10"},
)


BOT = "UBOT"


class SlackMock(StubServer):
    """Answers the Web API methods the bot uses and records every call."""

    def __init__(self):
        super().__init__()
        self.ts = itertools.count(1)
        self.thread_messages: list[dict] = []

        def ok(extra):
            return lambda req: (200, {"ok": True, **extra(req)})

        self.route(
            "/api/auth.test", ok(lambda r: {"user_id": BOT, "bot_id": "BBOT", "team_id": "T1"})
        )
        self.route(
            "/api/chat.postMessage",
            ok(lambda r: {"ts": f"1800000000.{next(self.ts):06d}", "channel": r.form["channel"]}),
        )
        self.route(
            "/api/chat.update", ok(lambda r: {"ts": r.form["ts"], "channel": r.form["channel"]})
        )
        self.route(
            "/api/conversations.replies",
            ok(lambda r: {"messages": self.thread_messages, "has_more": False}),
        )
        self.route("/respond", (200, {"ok": True}))
        for method in ("assistant.threads.setStatus", "assistant.threads.setSuggestedPrompts"):
            self.route(f"/api/{method}", (200, {"ok": True}))

    def posts(self):
        return [r.form for r in self.calls("/api/chat.postMessage")]

    def updates(self):
        return [r.form for r in self.calls("/api/chat.update")]

    def responses(self):
        return [r.json for r in self.calls("/respond")]


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
