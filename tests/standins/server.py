"""A local HTTP server standing in for a web API: it records every request and answers from a
handler per path; a handler returns (status, body) or (status, body, headers), where body is a dict
(sent as JSON) or bytes. The service stand-ins (claude.py, voyage.py, slack.py) are built on it."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs


class Request:
    def __init__(self, method: str, path: str, headers: dict, body: bytes):
        self.method, self.path, self.headers, self.body = method, path, headers, body
        self.at = time.monotonic()  # when it arrived: a test can check how long a client waited

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
    def __init__(self, port: int = 0):
        self.requests: list[Request] = []
        self.routes: dict[str, object] = {}
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                if len(body) < length:
                    # the client went away mid-request (a process killed while it sent): the
                    # service never receives a request cut short, so neither is it recorded
                    return
                req = Request(
                    self.command,
                    self.path.split("?")[0],
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
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
                if not isinstance(body, (bytes, dict, list)):  # an iterator of byte pieces
                    self._stream(status, body, headers)
                    return
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

            def _stream(self, status, pieces, headers):
                """Server-sent events: each piece written as it is produced (HTTP/1.0, so the
                body ends when the connection closes)."""
                try:
                    self.send_response(status)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("cache-control", "no-cache")
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    for piece in pieces:
                        self.wfile.write(piece)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
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
