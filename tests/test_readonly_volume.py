"""An index served from a read-only volume (a container's `:ro` mount), made for real: a tmpfs
mounted in a private mount namespace (`unshare`), the index copied in, the volume remounted
read-only. Root writes past file modes but not past a read-only mount, so this is the test that
holds for root too. A machine that cannot make a mount namespace skips it, saying why; CI
(FIELDGUIDE_REQUIRE_MOUNT=1) fails instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT

# run inside the namespace: the volume made, then every command that opens the index
INSIDE = textwrap.dedent(
    """
    import json, os, shutil, subprocess, sys
    import anyio
    from mcp import Client, StdioServerParameters

    index, volume, live, bind, stale, root = sys.argv[1:7]
    out = {}

    def sh(*argv):
        subprocess.run(argv, check=True)

    def fieldguide(*argv, db):
        run = subprocess.run(
            [sys.executable, "-m", "bot.cli", *argv, "--db", db], cwd=os.path.dirname(db),
            env={**os.environ, "PYTHONPATH": root}, capture_output=True, text=True, timeout=120,
        )
        return {"code": run.returncode, "out": run.stdout, "err": run.stderr}

    # a tmpfs holding a copy of the index, remounted read-only: a `:ro` volume
    sh("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", volume)
    for name in os.listdir(os.path.dirname(index)):
        if name.startswith(os.path.basename(index)):
            shutil.copy(os.path.join(os.path.dirname(index), name), volume)
    sh("mount", "-o", "remount,ro", volume)
    db = os.path.join(volume, os.path.basename(index))
    out["writable"] = os.access(volume, os.W_OK)
    q = "How many times is a failed webhook retried?"
    out["ask"] = fieldguide("ask", q, db=db)
    out["audit"] = fieldguide("audit", db=db)
    out["doctor"] = fieldguide("doctor", db=db)

    async def mcp():
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "bot.cli", "mcp", "--db", db],
            cwd=volume, env={"PYTHONPATH": root},
        )
        async with Client(params) as client:
            asked = await client.call_tool("ask", {"question": q})
            found = await client.call_tool("search", {"query": "retry schedule", "k": 1})
            hit = found.structured_content["hits"][0]
            read = await client.call_tool("read_section", {"section": hit["url"]})
            return asked.structured_content, read.structured_content

    out["mcp_ask"], out["mcp_read"] = anyio.run(mcp)
    out["files"] = sorted(os.listdir(volume))

    # the live index of another machine, bind-mounted read-only: read as any reader (mode=ro),
    # beside the writer that holds it open, seeing what it commits
    sh("mount", "--bind", live, bind)
    sh("mount", "-o", "remount,bind,ro", bind)
    import sqlite3
    writer = sqlite3.connect(os.path.join(live, os.path.basename(index)))
    writer.execute("UPDATE meta SET value = '41' WHERE key = 'generation'")
    writer.commit()
    from index.store import read_only_uri
    shared = os.path.join(bind, os.path.basename(index))
    out["live_uri"] = read_only_uri(shared)
    out["live_ask"] = fieldguide("ask", q, db=shared)
    out["live_doctor"] = fieldguide("doctor", db=shared)
    # a copy taken while the writer had it open: its -wal holds a change, and no -shm came along
    sh("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", stale)
    for suffix in ("", "-wal"):
        shutil.copy(os.path.join(live, os.path.basename(index) + suffix), stale)
    sh("mount", "-o", "remount,ro", stale)
    out["stale_ask"] = fieldguide("ask", q, db=os.path.join(stale, os.path.basename(index)))
    writer.close()
    print(json.dumps(out))
    """
)


def namespace() -> list[str] | None:
    """How to run a command in a private mount namespace here, or None: as root `unshare
    --mount`, else an unprivileged user namespace mapped to root (`unshare -rm`)."""
    if not shutil.which("unshare"):
        return None
    tries = [["unshare", "--mount", "--propagation", "private"]] if os.geteuid() == 0 else []
    tries.append(["unshare", "--map-root-user", "--mount", "--propagation", "private"])
    for argv in tries:
        probe = subprocess.run([*argv, "true"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return argv
    return None


@pytest.fixture
def mount_namespace() -> list[str]:
    argv = namespace()
    if argv is None:
        why = "no mount namespace can be made here (unshare missing or not permitted)"
        if os.environ.get("FIELDGUIDE_REQUIRE_MOUNT") == "1":
            pytest.fail(f"a read-only mount is required here (FIELDGUIDE_REQUIRE_MOUNT=1): {why}")
        pytest.skip(why)
    return argv


def test_an_index_on_a_read_only_volume_is_served(examples_db, tmp_path, mount_namespace):
    index = Path(examples_db)
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(index, live / index.name)
    for name in ("volume", "bind", "stale"):
        (tmp_path / name).mkdir()
    script = tmp_path / "inside.py"
    script.write_text(INSIDE)
    run = subprocess.run(
        [
            *mount_namespace,
            sys.executable,
            str(script),
            str(index),
            str(tmp_path / "volume"),
            str(live),
            str(tmp_path / "bind"),
            str(tmp_path / "stale"),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["writable"] is False  # the volume refuses writes, to root too

    ask = out["ask"]
    assert ask["code"] == 0 and "Sources:" in ask["out"], ask["err"]
    # the audit trail is off, said once
    assert ask["err"].count("the audit trail is not recorded: the index is read-only") == 1
    assert "unable to open" not in ask["err"] + out["audit"]["err"]
    assert out["audit"]["code"] == 0, out["audit"]["err"]
    doctor = out["doctor"]["out"]
    assert out["doctor"]["code"] == 0, doctor
    assert "ok    index" in doctor and "integrity ok" in doctor
    assert "warn  audit" in doctor and "read-only: the audit trail is off" in doctor
    assert out["mcp_ask"]["decision"] in ("ANSWER", "PARTIAL") and out["mcp_ask"]["citations"]
    assert "Retry schedule" in out["mcp_read"]["section"]
    assert out["files"] == sorted(p.name for p in index.parent.glob(f"{index.name}*"))

    assert out["live_uri"].endswith("?mode=ro")  # a reader beside the writer, not immutable
    assert out["live_ask"]["code"] == 0 and "Sources:" in out["live_ask"]["out"]
    assert "generation 41" in out["live_doctor"]["out"]
    stale = out["stale_ask"]
    assert stale["code"] == 2 and "Traceback" not in stale["err"]
    assert "write-ahead log (examples.db-wal) holds changes not yet in it" in stale["err"]
