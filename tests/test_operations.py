"""Running fieldguide as a service: the health endpoint of a real `fieldguide serve` (Socket Mode
and HTTP), its log settings, `--since`, and output piped into a reader that stops early."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.cli import main
from bot.since import parse_since
from router.engine import Engine
from tests.standins.fleet import Replica
from tests.standins.slack import SlackMock
from tests.standins.socket_mode import SocketModeServer

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-01", "2026-11-01T00:00:00+00:00"),
        ("2026-11-01T09:30", "2026-11-01T09:30:00+00:00"),
        ("2026-11-01 09:30:15+01:00", "2026-11-01T08:30:15+00:00"),
        ("2026-11-01T09:30:00Z", "2026-11-01T09:30:00+00:00"),
        ("7d", "2026-11-17T12:00:00+00:00"),
        ("24h", "2026-11-23T12:00:00+00:00"),
        ("30m", "2026-11-24T11:30:00+00:00"),
        ("2w", "2026-11-10T12:00:00+00:00"),
        (" 90S ", "2026-11-24T11:58:30+00:00"),
    ],
)
def test_since_takes_iso_and_relative_times(text, expected):
    assert parse_since(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "2020-13-45", "7x", "-7d", "", "7 days", "1e3h"])
def test_since_rejects_the_rest(text):
    with pytest.raises(ValueError, match="neither an ISO date"):
        parse_since(text, now=NOW)


def test_since_too_far_back_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="reaches back before the year 1"):
        parse_since("999999999w", now=NOW)


def test_audit_since_filters_by_time_and_refuses_what_it_cannot_read(examples_db, capsys):
    question = "How many times is a failed webhook retried, and over how long?"
    assert main(["ask", question, "--db", examples_db]) == 0
    assert main(["ask", question, "--db", examples_db]) == 0
    # the first answer was recorded three days ago
    three_days_ago = (datetime.now(UTC) - timedelta(days=3)).isoformat(timespec="seconds")
    with sqlite3.connect(examples_db) as conn:
        conn.execute("UPDATE answers SET created = ? WHERE id = 1", [three_days_ago])
    capsys.readouterr()

    def ids(*since: str) -> list[int]:
        assert main(["audit", "--db", examples_db, "--json", *since]) == 0
        return [r["id"] for r in json.loads(capsys.readouterr().out)]

    assert ids() == [2, 1]
    assert ids("--since", "1h") == [2]
    assert ids("--since", "2d") == [2]
    assert ids("--since", "4d") == [2, 1]
    assert ids("--since", (datetime.now(UTC) - timedelta(days=5)).date().isoformat()) == [2, 1]
    assert ids("--since", "2099-01-01") == []
    for bad in ("yesterday", "2020-13-45"):
        with pytest.raises(SystemExit) as exit:
            main(["audit", "--db", examples_db, "--since", bad])
        assert exit.value.code == 2
        err = capsys.readouterr().err
        assert f"Invalid value for '--since': '{bad}' is neither an ISO date" in err
        assert "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["ask", "--json", "How many times is a failed webhook retried?"],
        ["ask", "How many times is a failed webhook retried?"],
        ["search", "--json", "webhook retries"],
        ["intents"],
        ["audit", "--json"],
        ["--help"],
    ],
)
def test_output_into_a_reader_that_stops_early_ends_quietly(examples_db, args):
    """`fieldguide … | true`: the reader has exited before fieldguide writes a byte, so every write
    meets a closed pipe, as `| head -1` does once head has its line."""
    if args[0] != "--help":
        args = [args[0], "--db", examples_db, *args[1:]]
    if args[0] == "audit":  # something to list
        assert main(["ask", "--db", examples_db, "webhook retries"]) == 0
    writer = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None and writer.stderr is not None
    reader = subprocess.Popen(["true"], stdin=writer.stdout)
    writer.stdout.close()  # only `true` holds the read end now, and it exits at once
    reader.wait(10)
    err = writer.stderr.read().decode()
    # 128 + SIGPIPE, as a shell tool ends (--help too: click writes it through, buffered or not)
    assert writer.wait(60) == 141, err
    assert err == ""


@pytest.fixture
def slack():
    mock = SlackMock()
    socket = SocketModeServer(mock)
    yield mock, socket
    socket.close()
    mock.close()


def wait_for(predicate, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := predicate():
            return result
        time.sleep(0.1)
    raise AssertionError("timed out")


def replica(tmp_path: Path, db: str, mock_url: str, socket: bool, **env: str) -> Replica:
    Path(db).replace(tmp_path / "bot.db")  # the index of this one-machine bot (Replica's db)
    return Replica("bot", "", mock_url, tmp_path, socket=socket, **env)


def test_health_in_socket_mode_reports_slack_and_the_index_with_json_logs(
    slack, examples_db, tmp_path
):
    mock, socket = slack
    bot = replica(tmp_path, examples_db, mock.url, socket=True, FIELDGUIDE_LOG_FORMAT="json")
    try:
        bot.wait_ready()
        status, report = bot.health()
        assert status == 200, report
        assert report["ok"] and report["slack"]["ok"] and report["index"]["ok"]
        assert "Socket Mode connection open" in report["slack"]["detail"]
        assert "chunks" in report["index"]["detail"]
        assert "postgres" not in report  # one machine: no PostgreSQL to check

        # Slack's end goes away: the probe says so (and keeps answering) while the bot reconnects
        socket.close()
        status, report = wait_for(lambda: (s := bot.health())[0] == 503 and s)
        assert not report["ok"] and not report["slack"]["ok"] and report["index"]["ok"]
        assert "closed" in report["slack"]["detail"]
    finally:
        bot.stop()
    lines = [line for line in bot.log_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is a JSON object
    assert {"time", "level", "logger", "message"} <= set(records[0])
    messages = [r["message"] for r in records]
    assert "connected to Slack over Socket Mode" in messages
    assert any("Bolt app is running" in m for m in messages)
    # Bolt's "As you gave `client` as well, `token` will be unused" (it reads SLACK_BOT_TOKEN
    # itself): the client holds that very token, so the warning is not passed on
    assert not any("will be unused" in m for m in messages), messages


def test_health_on_the_http_port_and_the_log_level(slack, examples_db, tmp_path):
    mock, _ = slack
    bot = replica(tmp_path, examples_db, mock.url, socket=False, FIELDGUIDE_LOG_LEVEL="WARNING")
    try:
        bot.wait_ready()
        status, report = bot.health()
        assert status == 200 and report["ok"], report
        assert report["slack"]["detail"] == "auth.test ok at start-up"
    finally:
        bot.stop()
    log = bot.log_text()
    assert " INFO " not in log  # WARNING and above only
    assert "serving Slack over HTTP" in log  # start-up lines are printed, not logged


def test_health_says_when_the_index_cannot_be_read(slack, examples_db, tmp_path):
    mock, _ = slack
    bot = replica(tmp_path, examples_db, mock.url, socket=True)
    try:
        bot.wait_ready()
        assert bot.health()[0] == 200
        with open(bot.db, "r+b") as f:  # the file is damaged under the running bot
            f.write(b"not an index any more " * 200)
        # the next report (one stands for REPORT_SECONDS) says so
        status, report = wait_for(lambda: (s := bot.health())[0] == 503 and s, timeout=5)
        assert status == 503 and report["slack"]["ok"] and not report["index"]["ok"], report
        assert report["index"]["detail"].startswith(f"cannot read {bot.db}")
    finally:
        bot.stop()


def test_a_health_port_in_use_is_a_short_message(slack, examples_db, tmp_path):
    import socket

    mock, _ = slack
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        bot = replica(tmp_path, examples_db, mock.url, socket=True, FIELDGUIDE_HEALTH_PORT=port)
        assert bot.proc.wait(60) == 1
        bot.stop()
    log = bot.log_text()
    assert f"cannot serve /healthz on 127.0.0.1:{port} (FIELDGUIDE_HEALTH_PORT)" in log, log
    assert "Traceback" not in log


def test_a_refused_app_token_is_a_short_message(examples_db, tmp_path):
    mock = SlackMock()  # no Socket Mode server: apps.connections.open refuses the token
    try:
        bot = replica(tmp_path, examples_db, mock.url, socket=True)
        assert bot.proc.wait(60) == 1
        bot.stop()
    finally:
        mock.close()
    log = bot.log_text()
    assert "Slack refused SLACK_APP_TOKEN (not_allowed_token_type)" in log
    assert "Traceback" not in log


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"SLACK_BOT_TOKEN": "abc", "SLACK_APP_TOKEN": "def"},
            ["SLACK_BOT_TOKEN is not a bot token (xoxb-", "SLACK_APP_TOKEN is not an app-level"],
        ),
        (  # swapped: each is named as what it is
            {"SLACK_BOT_TOKEN": "xapp-1-A1-x", "SLACK_APP_TOKEN": "xoxb-1-x"},
            ["this one is an app-level token", "this one is a bot token"],
        ),
        ({"SLACK_BOT_TOKEN": "xoxb-1-x"}, ["SLACK_APP_TOKEN is not set"]),
    ],
)
def test_serve_checks_the_tokens_shapes_at_once(tmp_path, monkeypatch, capsys, env, said):
    mock = SlackMock()
    try:
        monkeypatch.setenv("SLACK_API_BASE_URL", f"{mock.url}/api/")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        started = time.monotonic()
        # no index either: the tokens are checked before anything is loaded or asked
        assert main(["serve", "--db", str(tmp_path / "none.db")]) == 2
        assert time.monotonic() - started < 5
        assert mock.requests == []  # Slack was not asked
    finally:
        mock.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Slack in five steps" in err
    for words in said:
        assert words in err
    for value in env.values():
        assert value not in err  # a token is never shown, only its kind


# -- 8. /healthz: localhost by default, a connection cap, idle connections closed -----------------


def reachable(host: str, port: int) -> bool:
    import socket

    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False


def test_the_health_port_binds_localhost_unless_told(slack, examples_db, tmp_path):
    import shutil

    mock, _ = slack
    spare = tmp_path / "spare.db"
    shutil.copyfile(examples_db, spare)
    bot = replica(tmp_path, examples_db, mock.url, socket=True)
    try:
        bot.wait_ready()
        assert bot.health()[0] == 200
        # 127.0.0.2 is this machine too, but not the address the port is bound to
        assert not reachable("127.0.0.2", bot.port)
    finally:
        bot.stop()
    (tmp_path / "other").mkdir()
    bot = replica(
        tmp_path / "other", str(spare), mock.url, socket=True, FIELDGUIDE_HEALTH_HOST="0.0.0.0"
    )
    try:
        bot.wait_ready()
        assert reachable("127.0.0.2", bot.port)
    finally:
        bot.stop()


def test_half_sent_probes_hold_no_threads_and_are_closed(examples_db, local_embedder):
    import socket
    import threading
    import time
    from urllib.request import urlopen

    from bot.health import HEALTH_CONNECTIONS, HEALTH_IDLE_SECONDS, Health, serve_health

    health = Health(Engine(examples_db, local_embedder))
    health.slack = lambda: (True, "test")
    server = serve_health(health, 0)
    port = server.effective_port
    threads = threading.active_count()
    half = []
    try:
        for _ in range(3 * HEALTH_CONNECTIONS):  # the attack's 800, at this cap's scale
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the rest
            half.append(s)
        time.sleep(1)
        assert threading.active_count() <= threads + 1, "a thread per connection"
        # each is closed once idle; a probe is answered once the cap has room again
        started = time.monotonic()
        with urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
            assert r.status == 200 and json.loads(r.read())["index"]["ok"]
        assert time.monotonic() - started < 4 * (HEALTH_IDLE_SECONDS + 1) + 5

        def closed(s: socket.socket) -> bool:
            s.settimeout(2 * HEALTH_IDLE_SECONDS + 2)
            try:
                return s.recv(100) == b""
            except ConnectionResetError:
                return True
            except TimeoutError:
                return False

        assert all(closed(s) for s in half)
    finally:
        for s in half:
            s.close()
        server.close()


def test_the_health_port_cannot_be_starved(examples_db, local_embedder):
    """300 idle sockets, then 40 sending their headers a byte at a time: every probe among them
    is answered at once, and the slow ones are closed at their deadline."""
    import socket
    import threading
    from urllib.request import urlopen

    from bot.health import HEALTH_REQUEST_SECONDS, Health, serve_health
    from router.engine import Engine

    health = Health(Engine(examples_db, local_embedder))
    health.slack = lambda: (True, "test")
    server = serve_health(health, 0)
    port = server.effective_port
    stop = threading.Event()
    held: list[socket.socket] = []

    def slow_headers() -> None:
        s = socket.create_connection(("127.0.0.1", port))
        held.append(s)
        for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 100:
            if stop.wait(0.5):
                return
            try:
                s.send(bytes([byte]))
            except OSError:  # closed by the server at its deadline
                return

    def probe() -> float:
        started = time.monotonic()
        with urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            assert r.status == 200 and json.loads(r.read())["index"]["ok"]
        return time.monotonic() - started

    try:
        held += [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
        slow = [threading.Thread(target=slow_headers, daemon=True) for _ in range(40)]
        for t in slow:
            t.start()
        waits = []
        for _ in range(7):
            waits.append(probe())
            time.sleep(0.5)
        assert max(waits) < HEALTH_REQUEST_SECONDS, waits
        idle = held[0]
        idle.settimeout(HEALTH_REQUEST_SECONDS + 3)
        assert idle.recv(10) == b""  # closed by the server
    finally:
        stop.set()
        for s in held:
            s.close()
        server.close()
