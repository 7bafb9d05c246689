"""`fieldguide index`, `ask` and `mcp` write nothing outside the project's own files: run as a user
runs them (the installed command, its own process), with the home folder, the XDG folders and the
temp folder each an empty folder of the test's, they leave those empty; and where strace is
installed, every file the three processes create, write, rename or remove is the index's, the
project's or the Python environment's (bytecode caches), or a device (/dev/null, a semaphore)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, write_docs
from tests.test_mcp import initialize

FIELDGUIDE = str(Path(sys.executable).with_name("fieldguide"))
OUTSIDE = {
    "HOME": "home",
    "XDG_CACHE_HOME": "cache",
    "XDG_CONFIG_HOME": "config",
    "XDG_DATA_HOME": "data",
    "XDG_STATE_HOME": "state",
    "TMPDIR": "tmp",
}
WRITES = (
    "creat,mkdir,mkdirat,rename,renameat,renameat2,link,linkat,symlink,symlinkat,unlink,"
    "unlinkat,rmdir,truncate,open,openat"
)
WRITE_FLAGS = re.compile(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC")
CALL = re.compile(r"^\d+\s+(\w+)\((.*)\)\s+=\s+(-?\d+)")
# a path argument, with the folder an *at call's descriptor names before it (strace -y)
PATH_ARG = re.compile(r'(?:(?:AT_FDCWD|\d+)<([^>]*)>,\s*)?"([^"]*)"')


def clean_env(outside: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FIELDGUIDE_", "SLACK_", "ANTHROPIC_", "VOYAGE_", "ORT_", "XDG_"))
    }
    for name, folder in OUTSIDE.items():
        (outside / folder).mkdir(parents=True)
        env[name] = str(outside / folder)
    return env


def written(trace: Path, cwd: Path) -> set[str]:
    """Every path a traced process created, wrote, renamed or removed (successfully)."""
    paths = set()
    for line in trace.read_text(errors="replace").splitlines():
        call = CALL.match(line)
        if not call or int(call.group(3)) < 0:
            continue
        name, args = call.group(1), call.group(2)
        if name in ("open", "openat") and not WRITE_FLAGS.search(args):
            continue
        for folder, path in PATH_ARG.findall(args):
            paths.add(os.path.normpath(os.path.join(folder or str(cwd), path)))
    return paths


def ours(path: str, roots: list[str]) -> bool:
    return path.startswith("/dev/") or any(
        path == r or path.startswith(r.rstrip("/") + "/") for r in roots
    )


def mcp_ask(cmd: list[str], env: dict, cwd: Path, question: str) -> dict:
    """`fieldguide mcp` over stdio as a host drives it: initialize, then one `ask`."""
    messages = [
        initialize("test"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "ask", "arguments": {"question": question}},
        },
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(messages[0]) + "\n")
        proc.stdin.flush()
        json.loads(proc.stdout.readline())  # initialized
        for m in messages[1:]:
            proc.stdin.write(json.dumps(m) + "\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            assert line, "the MCP server ended without answering"
            reply = json.loads(line)
            if reply.get("id") == 2:
                break
        proc.stdin.close()
        assert proc.wait(60) == 0
        return reply
    finally:
        if proc.poll() is None:
            proc.kill()


def test_index_ask_and_mcp_write_nothing_outside_the_project(tmp_path):
    outside, work = tmp_path / "outside", tmp_path / "work"
    env = clean_env(outside)
    docs = write_docs(
        work / "docs",
        {
            "auth/keys.md": "---\nintent: auth\n---\n# API keys\n\nRotate API keys every 90 days"
            " from the console.\n",
            "billing/refunds.md": "---\nintent: billing\n---\n# Refunds\n\nRefunds are issued"
            " within 5 business days.\n",
        },
    )
    db = str(work / "index.db")
    strace = shutil.which("strace")
    traces: list[Path] = []

    def command(*args: str) -> list[str]:
        cmd = [FIELDGUIDE, *args, "--db", db]
        if strace is None:
            return cmd
        traces.append(tmp_path / f"trace-{len(traces)}")
        return [strace, "-f", "-qq", "-y", "-e", f"trace={WRITES}", "-o", str(traces[-1]), *cmd]

    for args in (["index", str(docs)], ["ask", "How often should API keys be rotated?"]):
        run = subprocess.run(
            command(*args), cwd=work, env=env, capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr
    reply = mcp_ask(command("mcp"), env, work, "How often should API keys be rotated?")
    assert "90 days" in json.dumps(reply)

    # the home, XDG and temp folders hold nothing (onnxruntime's usage record went to the first)
    assert [p for p in outside.rglob("*") if not p.is_dir()] == []
    if strace is None:
        return  # without strace, only those folders are checked
    roots = [str(work.resolve()), str(ROOT.resolve()), os.path.realpath(sys.prefix)]
    stray = sorted(p for t in traces for p in written(t, work) if not ours(p, roots))
    assert stray == []
