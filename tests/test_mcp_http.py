"""`fieldguide mcp --http` on a network (bot/mcp_http.py): the Host, Origin and token checks with
what each refusal says and logs, docs/mcp.md's proxy recipes, and connections that cannot lock
clients out. One server for the module, as a deployment runs it: bound to 0.0.0.0, at a 1024
open-file limit, logging JSON."""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bot.app import FieldGuide
from bot.logs import Repeats
from bot.mcp_http import Guard, guarded_app, http_server, loop_errors, serving
from bot.mcp_server import build
from bot.settings import Settings
from tests.conftest import ROOT
from tests.test_mcp import TOKEN, audit_rows, free_port, initialize, wait_for

PUBLIC = "docs-mcp.example.com"  # the name docs/mcp.md's proxies serve
FILE_LIMIT = 1024  # systemd's default soft limit, as deploy/container-check.sh runs
IDLE_SOCKETS = 1_100


@dataclass
class Server:
    url: str
    port: int
    db: str
    log: Path

    def lines(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


def at_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


@pytest.fixture(scope="module")
def server(examples_template, tmp_path_factory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("mcp-http")
    db = str(work / "examples.db")
    shutil.copyfile(examples_template, db)
    port, log = free_port(), work / "stderr.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FIELDGUIDE_MCP_TOKEN": TOKEN,
        "FIELDGUIDE_MCP_ALLOWED_HOSTS": PUBLIC,
        "FIELDGUIDE_MCP_ALLOWED_ORIGINS": "https://claude.ai",
        "FIELDGUIDE_LOG_FORMAT": "json",
    }
    command = [sys.executable, "-m", "bot.cli", "mcp", "--http", str(port), "--host", "0.0.0.0"]
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [*command, "--db", db],
            cwd=work,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=at_file_limit,
        )
    try:
        wait_for(port, proc)
        yield Server(f"http://127.0.0.1:{port}/mcp", port, db, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def request(url: str, headers: dict[str, str], timeout: float = 30) -> tuple[int, dict, dict]:
    """An MCP initialize POSTed with `headers`: (status, the response's headers lowercased, its
    JSON body when it is JSON)."""
    sent = urllib.request.Request(
        url,
        json.dumps(initialize("probe")).encode(),
        {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        | headers,
    )
    try:
        with urllib.request.urlopen(sent, timeout=timeout) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, {}
    except urllib.error.HTTPError as e:
        body = e.read()
        headers = {k.lower(): v for k, v in e.headers.items()}
        return e.code, headers, json.loads(body) if body.startswith(b"{") else {}


BEARER = {"Authorization": f"Bearer {TOKEN}"}


def recorded(db: str) -> list[tuple]:
    """The audit trail's answers (none before the first is recorded)."""
    try:
        return audit_rows(db)
    except sqlite3.OperationalError:  # no answer recorded yet: no table
        return []


# -- what a refusal says, and what it logs --------------------------------------------------------


def test_a_wrong_token_is_told_apart_from_a_missing_one_and_logged_once(server):
    wrong = "w" * len(TOKEN)
    statuses = {
        "none": request(server.url, {}),
        "basic": request(server.url, {"Authorization": f"Basic {TOKEN}"}),
        "wrong": request(server.url, {"Authorization": f"Bearer {wrong}"}),
        "short": request(server.url, {"Authorization": "Bearer short"}),
    }
    for kind in ("none", "basic"):
        status, headers, body = statuses[kind]
        assert status == 401 and body["error_description"].startswith("a bearer token is required")
        assert headers["www-authenticate"] == 'Bearer realm="fieldguide"'
    for kind in ("wrong", "short"):
        status, headers, body = statuses[kind]
        assert (status, body["error_description"]) == (401, "invalid token")
        assert 'error="invalid_token"' in headers["www-authenticate"]
    for _ in range(5):
        assert request(server.url, {"Authorization": f"Bearer {wrong}"})[0] == 401
    refused = [
        line["message"] for line in server.lines() if "refused an MCP request" in line["message"]
    ]
    # once a minute per client and reason, whatever was sent, and never a token
    assert refused.count("refused an MCP request from 127.0.0.1: invalid token") == 1
    assert not [m for m in refused if "invalid token" in m and m.endswith("minute")]
    log = server.log.read_text()
    assert wrong not in log and TOKEN not in log and "short" not in log


def test_every_token_is_compared_whole_in_constant_time():
    """What is compared is two SHA-256 digests, equal in length whatever was sent: a token of
    another length, a prefix or one byte off are all "invalid token"."""
    guard = Guard(None, TOKEN, [], [])
    for given in (TOKEN[:-1], TOKEN + "t", TOKEN[:8], "x" * 4096, TOKEN[:-1] + "u"):
        assert guard.token_refusal(f"Bearer {given}") == (401, "invalid_token", "invalid token")
    assert guard.token_refusal(f"Bearer {TOKEN}") is None
    assert guard.token_refusal(f"bearer  {TOKEN} ") is None


# -- Host and Origin, in every bind mode ----------------------------------------------------------


def recipe(title: str) -> str:
    """The fenced block under docs/mcp.md's heading `title`."""
    text = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = text.split(f"### {title}", 1)[1]
    return section.split("```", 2)[1]


def nginx_headers(client_ip: str) -> dict[str, str]:
    """The headers docs/mcp.md's nginx recipe sends upstream, from its proxy_set_header lines."""
    block = recipe("nginx")
    values = {
        "$host": PUBLIC,
        "$proxy_add_x_forwarded_for": client_ip,
        "$remote_addr": client_ip,
        "$scheme": "https",
    }
    sent = {}
    for name, value in re.findall(r"proxy_set_header\s+(\S+)\s+(\S+);", block):
        value = values.get(value, value.strip('"'))
        if value:  # an empty value removes the header
            sent[name] = value
    return sent


def test_behind_docs_recipes_proxies_a_client_gets_its_answers(server):
    """Caddy keeps the client's Host and adds X-Forwarded-*; nginx sends what the recipe sets.
    With the proxied name in FIELDGUIDE_MCP_ALLOWED_HOSTS a real MCP client works through
    either, on a server bound to 0.0.0.0."""
    assert "reverse_proxy 127.0.0.1:8765" in recipe("Caddy") and PUBLIC in recipe("Caddy")
    assert f"FIELDGUIDE_MCP_ALLOWED_HOSTS={PUBLIC}" in (ROOT / "docs" / "mcp.md").read_text()
    caddy = {
        "Host": PUBLIC,
        "X-Forwarded-For": "203.0.113.7",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": PUBLIC,
    }
    nginx = nginx_headers("203.0.113.7")
    assert nginx["Host"] == PUBLIC

    async def session(headers: dict[str, str]):
        http = create_mcp_http_client(headers=BEARER | headers)
        async with http, Client(streamable_http_client(server.url, http_client=http)) as client:
            tools = (await client.list_tools()).tools
            talk = await client.call_tool("ask", {"question": "thanks!"})
            return tools, talk

    for proxy in (caddy, nginx):
        tools, talk = anyio.run(session, proxy)
        assert {"ask", "search", "read_section", "list_intents"} <= {t.name for t in tools}
        # small talk over HTTP as at every door: its reply, nothing recorded
        assert talk.structured_content["small_talk"] == "thanks"
        assert talk.structured_content["answer"] == "You're welcome!"
    assert recorded(server.db) == []


def test_an_unknown_host_or_origin_never_gets_a_session(server):
    ok, headers, _ = request(server.url, BEARER | {"Origin": "https://claude.ai"})
    assert ok == 200 and headers.get("mcp-session-id")
    local, _, _ = request(server.url, BEARER | {"Origin": f"http://localhost:{server.port}"})
    assert local == 200
    for bad, status in (
        ({"Origin": "https://evil.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Origin": "http://claude.ai"}, 403),
        ({"Host": "evil.example"}, 421),
        ({"Host": f"{PUBLIC}.evil.example"}, 421),
        ({"Host": f"evil.example, {PUBLIC}"}, 421),
    ):
        code, headers, body = request(server.url, BEARER | bad)
        assert code == status and "mcp-session-id" not in headers, bad
        assert body["error_description"], bad
    refused = " ".join(line["message"] for line in server.lines())
    assert "Origin 'https://evil.example'" in refused and "Host 'evil.example'" in refused


# -- connections ----------------------------------------------------------------------------------


def test_idle_sockets_past_the_file_limit_lock_no_client_out(server):
    """1,100 connections that send nothing, at a 1024 open-file limit: a new client is answered,
    and the log stays short."""
    before = server.log.stat().st_size
    idle: list[socket.socket] = []
    try:
        for _ in range(IDLE_SOCKETS):
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        started = time.monotonic()
        status, _, _ = request(server.url, BEARER, timeout=10)
        took = time.monotonic() - started
        time.sleep(2)  # a server out of descriptors logs without end meanwhile
        grown = server.log.stat().st_size - before
    finally:
        for s in idle:
            s.close()
    assert status == 200 and took < 10
    assert grown < 20_000, server.log.read_text()[-2_000:]


@pytest.fixture
def local_server(examples_db, local_embedder):
    """The HTTP app in this process at a cap of 3 connections, idle ones closed after a second."""
    settings = Settings(db=examples_db, mcp_token=TOKEN)
    app = guarded_app(build(FieldGuide(settings, embedder=local_embedder), None), settings, "")
    port = free_port()
    uv, connections = http_server(app, "127.0.0.1", port, "WARNING", idle_seconds=1)
    connections.cap = 3
    thread = threading.Thread(target=lambda: asyncio.run(serving(uv, connections)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield port
    uv.handle_exit(signal.SIGTERM, None)
    thread.join(30)


def closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        while s.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_idle_slow_and_surplus_connections_are_closed(local_server):
    port = local_server
    quiet = socket.create_connection(("127.0.0.1", port))
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and then nothing more
    assert closed_by_server(quiet, 5) and closed_by_server(slow, 5)
    # at the cap, a new connection closes the one idle longest
    first, second, third = (socket.create_connection(("127.0.0.1", port)) for _ in range(3))
    time.sleep(0.2)
    status, _, _ = request(f"http://127.0.0.1:{port}/mcp", BEARER)
    assert status == 200
    assert closed_by_server(first, 0.5)
    for s in (quiet, slow, first, second, third):
        s.close()


def test_the_event_loop_logs_one_kind_of_failure_once_a_minute(caplog):
    """Out of descriptors, asyncio's accept loop reports each failed accept: one line, then a
    count of the rest."""
    clock = [0.0]
    handle = loop_errors(Repeats(clock=lambda: clock[0]))
    loop = asyncio.new_event_loop()
    error = {"message": "socket.accept() out of system resource", "exception": OSError(24, "x")}
    try:
        with caplog.at_level("ERROR", logger="bot.mcp_http"):
            for _ in range(10_000):
                handle(loop, error)
            clock[0] = 61.0
            handle(loop, error)
    finally:
        loop.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "9,999 more like it" in lines[1]
