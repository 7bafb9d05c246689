"""Replicas as real processes: `fieldguide serve --http` (or `fieldguide serve`, Socket Mode) on
a shared PostgreSQL, and the Slack mock they answer through (tests/test_fleet.py,
bench/fleet.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import urlencode
from urllib.request import urlopen

from tests.standins.pgserver import free_port
from tests.standins.slack import BOT, SlackMock, signed_request

SECRET = "fleet-signing-secret"
FIELDGUIDE = str(Path(sys.executable).with_name("fieldguide"))


class Replica:
    """One `fieldguide serve --http` process with its own local index file; with `socket=True`,
    `fieldguide serve` in Socket Mode instead, connecting to the mock's SocketModeServer (which
    delivers its events: `event` and `command` are for HTTP mode)."""

    def __init__(
        self, name: str, url: str, mock_url: str, workdir: Path, socket: bool = False, **env: str
    ):
        self.name, self.port, self.socket = name, free_port(), socket
        self.db = str(workdir / f"{name}.db")
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("FIELDGUIDE_", "SLACK_", "ANTHROPIC_", "VOYAGE_"))
        }
        clean.update(
            FIELDGUIDE_DATABASE_URL=url,
            FIELDGUIDE_DB=self.db,
            SLACK_BOT_TOKEN="xoxb-test",
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_BASE_URL=mock_url + "/api/",
            **env,
        )
        if socket:
            clean["SLACK_APP_TOKEN"] = "xapp-test"  # the same app token on every replica
            # Socket Mode has no HTTP port of its own: its health endpoint gets self.port
            clean.setdefault("FIELDGUIDE_HEALTH_PORT", str(self.port))
        transport = [] if socket else ["--http", str(self.port), "--host", "127.0.0.1"]
        self.log = open(workdir / f"{name}.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [FIELDGUIDE, "serve", *transport],
            cwd=workdir,
            env=clean,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{Path(self.log.name).read_text()}")
            if self.socket:
                # Bolt logs it once its WebSocket is open
                if "Bolt app is running" in self.log_text():
                    return
                time.sleep(0.05)
                continue
            try:
                with urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"{self.name} did not start:\n{Path(self.log.name).read_text()}")

    def health(self) -> tuple[int, dict]:
        """GET /healthz: (status, the JSON report)."""
        try:
            with urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=10) as r:
                return r.status, json.loads(r.read())
        except HTTPError as e:
            return e.code, json.loads(e.read())

    def event(self, event: dict, event_id: str, retry: int = 0) -> int:
        body = event_payload(event, event_id)
        headers = {"x-slack-retry-num": str(retry), "x-slack-retry-reason": "http_timeout"}
        status, _ = signed_request(
            f"http://127.0.0.1:{self.port}/slack/events",
            json.dumps(body).encode(),
            "application/json",
            SECRET,
            headers if retry else None,
        )
        return status

    def command(self, user: str, text: str, response_url: str) -> tuple[int, str]:
        """The reindex slash command, as Slack posts it."""
        form = {
            "token": "t",
            "team_id": "T1",
            "channel_id": "C1",
            "user_id": user,
            "command": "/docs-reindex",
            "text": text,
            "response_url": response_url,
            "trigger_id": "tr",
        }
        return signed_request(
            f"http://127.0.0.1:{self.port}/slack/events",
            urlencode(form).encode(),
            "application/x-www-form-urlencoded",
            SECRET,
        )

    def connection(self, connections: list):
        """Which of the Socket Mode server's connections is this replica's (by its TCP port)."""
        ports = tcp_ports(self.proc.pid)
        [mine] = [ws for ws in connections if ws.remote_address[1] in ports]
        return mine

    def freeze(self, timeout: float = 10.0) -> None:
        """SIGSTOP, returning once every thread of the process has stopped: the signal takes
        effect a moment after it is sent, and a thread still running meanwhile could acknowledge
        an event the test means it never to see."""
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                try:
                    states.append(task.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0])
                except (OSError, IndexError):  # a thread that ended meanwhile
                    continue
            if states and all(state in "Tt" for state in states):
                return
            time.sleep(0.01)
        raise AssertionError(f"{self.name} did not stop")

    def log_text(self) -> str:
        return Path(self.log.name).read_text()

    def serving(self, generation: int) -> bool:
        return f"serving published index generation {generation}\n" in self.log_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def tcp_ports(pid: int) -> set[int]:
    """The local ports of a process's TCP sockets (Linux /proc)."""
    fds = Path(f"/proc/{pid}/fd")
    inodes = set()
    for fd in fds.iterdir():
        try:
            link = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class FleetSlack(SlackMock):
    """The Slack mock, also remembering which thread each first sign of work (a placeholder, a
    stream) was posted in, and when it became an answer."""

    def __init__(self):
        super().__init__()
        self.thread_of: dict[str, str] = {}  # placeholder or stream ts → thread ts
        # placeholder or stream ts → its first chat.update or its stop (monotonic)
        self.answered_at: dict[str, float] = {}

        def post(req):
            ts = f"1800000000.{next(self.ts):06d}"
            if req.form.get("text", "").startswith(":mag:"):
                with self.lock:
                    self.thread_of[ts] = req.form["thread_ts"]
            return 200, {"ok": True, "ts": ts, "channel": req.form["channel"]}

        def update(req):
            with self.lock:
                self.answered_at.setdefault(req.form["ts"], time.monotonic())
            return 200, {"ok": True, "ts": req.form["ts"], "channel": req.form["channel"]}

        def start(req):
            result = self._start_stream(req.form)
            if isinstance(result, tuple):
                return result
            with self.lock:
                self.thread_of[result["ts"]] = req.form["thread_ts"]
            return 200, {"ok": True, **result}

        def stop(req):
            result = self._stop_stream(req.form)
            if isinstance(result, tuple):
                return result
            with self.lock:
                self.answered_at.setdefault(req.form["ts"], time.monotonic())
            return 200, {"ok": True, **result}

        self.route("/api/chat.postMessage", post)
        self.route("/api/chat.update", update)
        self.route("/api/chat.startStream", start)
        self.route("/api/chat.stopStream", stop)

    def answers_in(self, thread_ts: str) -> list[dict]:
        """The answers in thread `thread_ts`: placeholders updated, streams stopped."""
        with self.lock:
            streams = [
                {"ts": ts, **s}
                for ts, s in self.streams.items()
                if s["thread_ts"] == thread_ts and s["state"] == "stopped"
            ]
        updates = [u for u in self.updates() if self.thread_of.get(u["ts"]) == thread_ts]
        return updates + streams


def event_payload(event: dict, event_id: str) -> dict:
    """The Events API body Slack posts (HTTP mode) or wraps in an envelope (Socket Mode)."""
    return {
        "token": "t",
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "event": event,
    }


def mention(text: str, ts: str) -> dict:
    """A mention by a user of its own (the fleet's rate limit is per user)."""
    return {
        "type": "app_mention",
        "user": "U" + ts.replace(".", ""),
        "text": f"<@{BOT}> {text}",
        "ts": ts,
        "channel": "C1",
        "event_ts": ts,
    }
