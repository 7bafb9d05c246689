"""`/healthz` for an orchestrator's probes: is Slack connected, is the index loaded and readable,
and (in a fleet) is PostgreSQL reachable. JSON, 200 when every check is ok, else 503.

Served at /healthz on `serve --http`'s port, and on its own small port (FIELDGUIDE_HEALTH_PORT)
in either mode: Socket Mode has no HTTP port of its own for a probe to reach."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from index.store import generation_on_disk
from router.engine import Engine

log = logging.getLogger(__name__)

# how long a Slack auth.test result stands before a probe asks Slack again (HTTP mode)
AUTH_TEST_EVERY = 60.0


class Health:
    """`slack` answers (ok, detail): set by `serve` once it knows its transport."""

    def __init__(self, engine: Engine, database_url: str = ""):
        self.engine = engine
        self.database_url = database_url
        self.slack: Callable[[], tuple[bool, str]] = lambda: (False, "not connected yet")

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


def serve_health(health: Health, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:
    """GET /healthz on `port`, in a daemon thread; anything else is 404."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/healthz":
                status, body = "404 Not Found", b'{"error": "not found: try /healthz"}\n'
            else:
                status, body = respond(health)
            self.send_response(int(status.split()[0]))
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):  # probes every few seconds: not worth a log line
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="healthz", daemon=True).start()
    log.info("health endpoint at http://%s:%d/healthz", host, port)
    return server
