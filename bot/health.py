"""`/healthz` for an orchestrator's probes: is Slack connected, is the index loaded and readable,
and (in a fleet) is PostgreSQL reachable. JSON, 200 when every check is ok, else 503.

Served at /healthz on `serve --http`'s port, and on its own small port (FIELDGUIDE_HEALTH_PORT,
bound to FIELDGUIDE_HEALTH_HOST: 127.0.0.1 unless told) in either mode: Socket Mode has no HTTP
port of its own for a probe to reach."""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from index.store import generation_on_disk
from router.engine import Engine

log = logging.getLogger(__name__)

# how long a Slack auth.test result stands before a probe asks Slack again (HTTP mode)
AUTH_TEST_EVERY = 60.0
# how long one health report answers every probe (a probe every few seconds still sees it fresh)
REPORT_SECONDS = 1.0


class Health:
    """`slack` answers (ok, detail): set by `serve` once it knows its transport."""

    def __init__(self, engine: Engine, database_url: str = ""):
        self.engine = engine
        self.database_url = database_url
        self.slack: Callable[[], tuple[bool, str]] = lambda: (False, "not connected yet")
        self._lock = threading.Lock()
        self._last: tuple[float, tuple[int, dict]] | None = None

    def index(self) -> tuple[bool, str]:
        """The index file read afresh (the bot's own connection would not notice it gone or
        damaged), then the index as questions see it (reloaded after a reindex)."""
        path = Path(self.engine.db_path)
        try:
            if not path.is_file():
                raise FileNotFoundError("no such file")
            generation_on_disk(path)
            loaded = self.engine.loaded()
        except (sqlite3.Error, OSError, ValueError) as e:
            return False, f"cannot read {path}: {e}"
        if not loaded.searcher.size:
            return False, f"{self.engine.db_path} is empty: run fieldguide index DOCS_DIR"
        return True, f"generation {loaded.generation}, {loaded.searcher.size} chunks"

    def postgres(self) -> tuple[bool, str]:
        from index.pg import FleetError, ping

        try:
            ping(self.database_url)
        except FleetError as e:
            return False, str(e)
        except OSError as e:  # psycopg's errors are caught by connect(); a dropped link here
            return False, f"PostgreSQL: {e}"
        return True, "reachable"

    def report(self) -> tuple[int, dict]:
        """(status, body), computed at most once per REPORT_SECONDS: a burst of probes (or many
        at once) shares one report instead of each reading the index and asking Slack."""
        with self._lock:
            now = time.monotonic()
            if self._last is None or now - self._last[0] >= REPORT_SECONDS:
                self._last = (now, self._report())
            return self._last[1]

    def _report(self) -> tuple[int, dict]:
        checks = {"slack": self.slack(), "index": self.index()}
        if self.database_url:
            checks["postgres"] = self.postgres()
        body: dict = {name: {"ok": ok, "detail": detail} for name, (ok, detail) in checks.items()}
        ok = all(ok for ok, _ in checks.values())
        return (200 if ok else 503), {"ok": ok, **body}


def socket_mode_slack(client) -> Callable[[], tuple[bool, str]]:
    """Slack's health in Socket Mode: is the WebSocket (slack_sdk's SocketModeClient) open."""

    def check() -> tuple[bool, str]:
        if client.is_connected():
            return True, "Socket Mode connection open"
        return False, "Socket Mode connection closed (reconnecting)"

    return check


def auth_test_slack(client) -> Callable[[], tuple[bool, str]]:
    """Slack's health in HTTP mode (Slack calls us, there is no connection to look at): the last
    auth.test, repeated at most every AUTH_TEST_EVERY seconds; start-up's passed."""
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError, SlackClientError

    # its own client: a probe must not wait through the bot's retries and 30 s timeout
    quick = WebClient(token=client.token, base_url=client.base_url, timeout=5)
    checked, result = time.monotonic(), (True, "auth.test ok at start-up")
    lock = threading.Lock()

    def check() -> tuple[bool, str]:
        nonlocal checked, result
        with lock:
            if time.monotonic() - checked >= AUTH_TEST_EVERY:
                try:
                    data = quick.auth_test().data
                    user = data.get("user", "?") if isinstance(data, dict) else "?"
                    result = (True, f"auth.test ok as {user}")
                except SlackApiError as e:
                    result = (False, f"auth.test: {e.response.get('error', 'failed')}")
                except (SlackClientError, OSError) as e:
                    result = (False, f"Slack unreachable: {type(e).__name__}: {e}")
                checked = time.monotonic()
            return result

    return check


def respond(health: Health) -> tuple[str, bytes]:
    """(HTTP status line, JSON body) of one probe."""
    code, body = health.report()
    status = "200 OK" if code == 200 else "503 Service Unavailable"
    return status, json.dumps(body).encode() + b"\n"


# The health port's limits. A probe sends its whole request at once and reads a few hundred
# bytes back: no connection needs more than HEALTH_REQUEST_SECONDS from its accept to a whole
# request, however it trickles in (a deadline, not an idle time: 40 sockets sending a header
# byte a second held waitress's 20 connections); at most HEALTH_CONNECTIONS are open, the
# oldest closed for a new one (300 idle sockets filled waitress's 20 for 30 s). One thread
# reads every connection without blocking (selectors), so none waits on another.
HEALTH_CONNECTIONS = 256  # open at once; a new one closes the oldest (open files are the cost)
HEALTH_REQUEST_SECONDS = 2.0  # from accept to the end of the request's headers
HEALTH_HEADER_BYTES = 8 * 1024
# kept for the names the earlier limits had
HEALTH_IDLE_SECONDS = HEALTH_REQUEST_SECONDS


class HealthServer:
    """GET /healthz (bot/health.py's report) on one socket, every connection read by one thread
    through a selector, each closed at its deadline or once answered."""

    def __init__(self, health: Health, host: str, port: int):
        import selectors
        import socket

        self.health = health
        self.sock = socket.create_server((host, port), backlog=128)
        self.sock.setblocking(False)
        self.effective_port = self.sock.getsockname()[1]
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.sock, selectors.EVENT_READ, None)
        self.open: dict = {}  # socket -> (deadline, bytes read): in accept order
        self.closed = threading.Event()

    def run(self) -> None:
        try:
            while not self.closed.is_set():
                for key, _ in self.selector.select(timeout=0.2):
                    if key.data is None:
                        self._accept()
                    else:
                        self._read(key.fileobj)
                self._expire(time.monotonic())
        finally:
            for conn in list(self.open):
                self._drop(conn)
            self.selector.close()
            self.sock.close()

    def close(self) -> None:
        self.closed.set()

    def _accept(self) -> None:
        import selectors

        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of file descriptors: the oldest make room
                log.warning("health port: cannot accept (%s)", e)
                if self.open:
                    self._drop(next(iter(self.open)))
                return
            if len(self.open) >= HEALTH_CONNECTIONS:
                self._drop(next(iter(self.open)))
            conn.setblocking(False)
            self.open[conn] = (time.monotonic() + HEALTH_REQUEST_SECONDS, b"")
            self.selector.register(conn, selectors.EVENT_READ, True)

    def _read(self, conn) -> None:
        try:
            data = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        deadline, got = self.open[conn]
        got += data
        if b"\r\n\r\n" in got or b"\n\n" in got:
            self._answer(conn, got)
        elif len(got) > HEALTH_HEADER_BYTES:
            self._send(conn, "431 Request Header Fields Too Large", b'{"error": "headers"}\n')
        else:
            self.open[conn] = (deadline, got)

    def _answer(self, conn, request: bytes) -> None:
        method, _, rest = request.partition(b" ")
        path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD") or path != b"/healthz":
            self._send(conn, "404 Not Found", b'{"error": "not found: try /healthz"}\n')
            return
        status, body = respond(self.health)
        self._send(conn, status, b"" if method == b"HEAD" else body, len(body))

    def _send(self, conn, status: str, body: bytes, length: int | None = None) -> None:
        head = (
            f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body) if length is None else length}\r\n"
            "connection: close\r\n\r\n"
        ).encode()
        with contextlib.suppress(OSError):  # a few hundred bytes: the buffer takes them whole
            conn.send(head + body)
        self._drop(conn)

    def _expire(self, now: float) -> None:
        for conn, (deadline, _) in list(self.open.items()):
            if deadline > now:
                break  # in accept order: the rest are later
            self._drop(conn)

    def _drop(self, conn) -> None:
        self.open.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(conn)
        conn.close()


def serve_health(health: Health, port: int, host: str = "127.0.0.1") -> HealthServer:
    """GET /healthz on `host`:`port` (localhost unless told: FIELDGUIDE_HEALTH_HOST), served in a
    daemon thread within the limits above; the server (`effective_port`, `close()`). OSError
    when the port cannot be had."""
    server = HealthServer(health, host, port)
    threading.Thread(target=server.run, name="healthz", daemon=True).start()
    log.info("health endpoint at http://%s:%s/healthz", host, server.effective_port)
    return server
