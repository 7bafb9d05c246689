"""`fieldguide mcp --http` under load, offline on the example docs, the server in a process of its
own as deployed (127.0.0.1, the bearer token, the real `mcp` client over Streamable HTTP):

- idle sockets: 1,100 connections that send nothing, the server at a 1024 open-file limit
  (systemd's default; deploy/container-check.sh runs so): how a new client's request is answered
  (status, time) and how much the server logs meanwhile;
- a flood: one client sends 100 asks at once, each of 500 made-up words, while another client
  calls `list_intents` 20 times in a row and then asks an ordinary question: the other client's
  times, and what the flood got (answered, or "busy" and how fast).

With `--before REF` the same is measured on REF's code too (`git archive`, in a folder of its own),
and each figure is shown beside it.

    python bench/mcp_load.py [--before REF]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import closing
from pathlib import Path

import anyio
from harness import ROOT, WORK, ms, table, write_section
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import Implementation

from index.embedders import make_embedder
from index.indexer import index_folder

TOKEN = "b" * 48
FILE_LIMIT, IDLE_SOCKETS = 1024, 1_100
NEW_CLIENTS = 5  # requests a new client makes, one after another, while the sockets are held
WAIT_SECONDS = 15  # a request not answered in this long is "no answer"
FLOOD, FLOOD_WORDS, LISTS = 100, 500, 20
ORDINARY = "How many times is a failed webhook retried?"
FLOOD_COLUMNS = [
    "code",
    "other's list_intents p50 ms",
    "p95 ms",
    "other's ask s",
    "the flood's asks",
    "busy p95 ms",
]


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def at_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


class Server:
    """`fieldguide mcp --http` of the checkout at `root`, on a copy of the index."""

    def __init__(self, root: Path, db: Path, log: Path, file_limit: bool):
        self.port, self.log = free_port(), log
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        env = {**os.environ, "PYTHONPATH": str(root), "FIELDGUIDE_MCP_TOKEN": TOKEN}
        command = [sys.executable, "-m", "bot.cli", "mcp", "--http", str(self.port)]
        command += ["--db", str(db)]
        with log.open("w") as stderr:
            self.proc = subprocess.Popen(
                command,
                cwd=db.parent,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                preexec_fn=at_file_limit if file_limit else None,
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.2)
        raise SystemExit(f"the server did not start: {log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def initialize(url: str) -> tuple[int | str, float]:
    """A new client's first request (initialize, with the token): (status or what failed, s)."""
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "newcomer", "version": "1"},
        },
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {TOKEN}",
    }
    sent = urllib.request.Request(url, json.dumps(hello).encode(), headers)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(sent, timeout=WAIT_SECONDS) as resp:
            status: int | str = resp.status
    except urllib.error.HTTPError as e:
        status = e.code
    except OSError as e:
        status = f"no answer ({type(e).__name__})"
    return status, time.monotonic() - started


def idle_sockets(root: Path, db: Path, work: Path) -> dict:
    server = Server(root, db, work / "idle.log", file_limit=True)
    held: list[socket.socket] = []
    try:
        size = server.log.stat().st_size
        started = time.monotonic()
        refused = 0
        for _ in range(IDLE_SOCKETS):
            try:
                held.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
            except OSError:
                refused += 1
        tries = [initialize(server.url) for _ in range(NEW_CLIENTS)]
        logged = server.log.stat().st_size - size
        seconds = time.monotonic() - started
    finally:
        for s in held:
            s.close()
        server.stop()
    return {
        "statuses": [t[0] for t in tries],
        "seconds": [t[1] for t in tries],
        "refused": refused,
        "log_bytes": logged,
        "log_seconds": seconds,
    }


def made_up_words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(6, 11)))
        for _ in range(n)
    )


def flood(root: Path, db: Path, work: Path) -> dict:
    server = Server(root, db, work / "flood.log", file_limit=False)
    flooded: list[tuple[bool, float]] = []
    listed: list[float] = []
    ordinary: list[float] = []

    async def session() -> None:
        def client(name: str, http) -> Client:
            transport = streamable_http_client(server.url, http_client=http)
            return Client(transport, client_info=Implementation(name=name, version="1"))

        headers = {"Authorization": f"Bearer {TOKEN}"}
        flood_http = create_mcp_http_client(headers=headers, timeout=None)
        other_http = create_mcp_http_client(headers=headers, timeout=None)
        async with (
            flood_http,
            other_http,
            client("flood", flood_http) as flooder,
            client("other", other_http) as other,
            anyio.create_task_group() as tasks,
        ):
            await other.call_tool("list_intents", {})  # both sessions open before the flood

            async def ask(n: int) -> None:
                t = time.monotonic()
                result = await flooder.call_tool("ask", {"question": made_up_words(FLOOD_WORDS, n)})
                flooded.append((not result.is_error, time.monotonic() - t))

            for n in range(FLOOD):
                tasks.start_soon(ask, n)
            await anyio.sleep(0.5)
            for _ in range(LISTS):
                t = time.monotonic()
                await other.call_tool("list_intents", {})
                listed.append(time.monotonic() - t)
            t = time.monotonic()
            await other.call_tool("ask", {"question": ORDINARY})
            ordinary.append(time.monotonic() - t)

    try:
        anyio.run(session)
    finally:
        server.stop()
    return {
        "list_intents": listed,
        "ordinary": ordinary[0],
        "answered": [s for ok, s in flooded if ok],
        "busy": [s for ok, s in flooded if not ok],
    }


def measure(root: Path, db: Path, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    copy = work / "mcp-load.db"
    shutil.copyfile(db, copy)
    return {"idle": idle_sockets(root, copy, work), "flood": flood(root, copy, work)}


def checkout(ref: str) -> Path:
    """REF's files, from git, in a folder of their own."""
    folder = WORK / f"before-{ref.replace('/', '_')}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def rows_for(label: str, m: dict) -> tuple[list, list]:
    idle, fl = m["idle"], m["flood"]
    answered = [s for st, s in zip(idle["statuses"], idle["seconds"], strict=True) if st == 200]
    l50, l95 = ms(fl["list_intents"])
    b95 = f"{ms(fl['busy'])[1]:.0f}" if fl["busy"] else "-"
    statuses = ", ".join(sorted({str(s) for s in idle["statuses"]}))
    idle_row = [
        label,
        statuses,
        f"{len(answered)} of {len(idle['statuses'])}",
        f"{ms(answered)[1]:.0f}" if answered else "-",
        f"{idle['log_bytes'] / 1e6:.2f} MB in {idle['log_seconds']:.0f} s",
    ]
    flood_row = [
        label,
        f"{l50:.0f}",
        f"{l95:.0f}",
        f"{fl['ordinary']:.1f}",
        f"{len(fl['answered'])} answered, {len(fl['busy'])} busy",
        b95,
    ]
    return idle_row, flood_row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", help="a git ref whose code is measured too")
    args = parser.parse_args()
    template = WORK / "examples.db"
    index_folder(template, ROOT / "examples" / "docs", make_embedder())
    measured = {"this tree": measure(ROOT, template, WORK / "mcp-load")}
    if args.before:
        measured[args.before] = measure(checkout(args.before), template, WORK / "mcp-load-before")
    idle_rows, flood_rows = [], []
    for label, m in measured.items():
        idle_row, flood_row = rows_for(label, m)
        idle_rows.append(idle_row)
        flood_rows.append(flood_row)
    before = f" and, for comparison, `--before {args.before}`" if args.before else ""
    body = f"""## MCP over HTTP under load (`bench/mcp_load.py`)

`python bench/mcp_load.py{f" --before {args.before}" if args.before else ""}` — offline, the
example docs, `fieldguide mcp --http` in a process of its own on 127.0.0.1 with the bearer token,
this tree's code{before}; the clients are the `mcp` SDK's over Streamable HTTP.

{IDLE_SOCKETS:,} connections that send nothing, the server at `ulimit -n {FILE_LIMIT}`, then a new
client's initialize, {NEW_CLIENTS} times in a row ("no answer": nothing within
{WAIT_SECONDS} s); the log: what the server wrote from the first idle socket to the last try.

{table(["code", "new client's status", "answered", "p95 ms", "log written"], idle_rows)}

One client sends {FLOOD} asks at once, each of {FLOOD_WORDS} made-up words; 0.5 s later another
client calls `list_intents` {LISTS} times in a row, then asks "{ORDINARY}". Default limits
(`FIELDGUIDE_ANSWER_WORKERS=4`, `FIELDGUIDE_ANSWER_QUEUE=20`, a client's share: the workers and
half the queue, 14).

{table(FLOOD_COLUMNS, flood_rows)}

The 1-minute load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.
"""
    print(body)
    write_section("mcp-load", body)


if __name__ == "__main__":
    main()
