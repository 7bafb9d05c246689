"""Which process holds a claim on one machine, and whether it still runs: the SQLite state's owner
of a claimed Slack event (a fleet's is its PostgreSQL session, bot/state/postgres/claims.py).

A process is named by the machine's boot, its pid and its start time (Linux's /proc), so a pid
used again after a restart (a container's pid 1) is not taken for the process that died. Where
/proc is not there, the pid and this process's start on the clock name it, and a pid that runs is
taken to be alive (a claim then waits for its lease).
"""

from __future__ import annotations

import contextlib
import os
import time
from functools import cache
from pathlib import Path


def _boot() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return ""


def _started(pid: int) -> str:
    """The process's start (clock ticks after boot, /proc/PID/stat field 22); "" unknown."""
    with contextlib.suppress(OSError, IndexError):
        # the command name (field 2) may hold spaces and parentheses: fields follow its last ")"
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return ""


@cache
def me() -> str:
    """This process's name: "boot:pid:start"."""
    pid = os.getpid()
    return f"{_boot()}:{pid}:{_started(pid) or f't{time.time():.0f}'}"


def alive(owner: str | None) -> bool:
    """Does the process named `owner` (as `me` names one) still run on this machine?"""
    if not owner:
        return False
    if owner == me():
        return True
    try:
        boot, pid_text, start = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if boot != _boot():  # named before this machine last booted
        return False
    if not start.startswith("t"):
        return _started(pid) == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it runs
        return True
    return True
