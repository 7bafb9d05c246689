"""What one process holds for itself: Slack event de-duplication, rate limits, the reindex lock
and the channels users are looking at. The embedded default's (SqliteState), and a fleet
replica's while PostgreSQL is away."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from .loop import Loop, tables


class InProcess:
    """De-duplication, rate limits and the reindex lock held by this process: the embedded default,
    and a fleet replica's fallback while PostgreSQL is away. One process shares nothing: its
    claims are as durable as they need be, and no other replica leaves events to take over."""

    fleet = False

    def close(self) -> None:
        """Nothing to close: what this process holds goes with it."""

    @property
    def loop(self) -> Loop:
        """The owners' loop (bot/state/loop.py): in this process's memory here."""
        return self._loop

    def __init__(self, seen_size: int = 5000):
        self._loop = memory_loop()
        self._seen: dict[str, None] = {}
        self._viewing: dict[tuple[str, str], str] = {}  # (user, DM) -> channel, newest last
        self._seen_size = seen_size
        self._times: dict[str, deque] = {}
        self._lock = threading.Lock()
        self._reindex = threading.Lock()

    def claim_event(self, *keys: str, event: dict | None = None) -> bool:
        with self._lock:
            if any(k in self._seen for k in keys if k):
                return False
            for k in keys:
                if k:
                    self._seen[k] = None
            while len(self._seen) > self._seen_size:
                del self._seen[next(iter(self._seen))]
            return True

    def done_event(self, *keys: str) -> None:
        """Nothing to do: one process, nobody else would answer it."""

    def durable(self) -> bool:
        return True

    def note_placeholder(self, keys: tuple[str, ...], ts: str) -> None:
        """Nothing to keep: no other replica takes this process's events over."""

    def take_orphans(self, limit: int) -> list[dict]:
        return []

    def allow_question(self, user: str, per_minute: int) -> bool:
        now = time.monotonic()
        with self._lock:
            q = self._times.setdefault(user, deque())
            while q and now - q[0] > 60:
                q.popleft()
            if len(q) >= per_minute:
                return False
            q.append(now)
            return True

    def note_viewing(self, user: str, channel: str, viewing: str) -> None:
        with self._lock:
            self._viewing.pop((user, channel), None)
            self._viewing[(user, channel)] = viewing
            while len(self._viewing) > self._seen_size:
                del self._viewing[next(iter(self._viewing))]

    def viewing(self, user: str, channel: str) -> str:
        with self._lock:
            return self._viewing.get((user, channel), "")

    @contextmanager
    def reindex_lock(self) -> Iterator[bool]:
        got = self._reindex.acquire(blocking=False)
        try:
            yield got
        finally:
            if got:
                self._reindex.release()

    def reindex_running(self) -> bool:
        return self._reindex.locked()


def memory_loop() -> Loop:
    """The owners' loop's tables in an in-memory SQLite database of this process."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.execute(
        'CREATE TABLE answers (id INTEGER PRIMARY KEY, channel TEXT, thread_ts TEXT, "user" TEXT)'
    )
    conn.execute("CREATE TABLE handoffs (answer_id INTEGER PRIMARY KEY, owner TEXT, target TEXT)")
    for sql in tables("INTEGER PRIMARY KEY AUTOINCREMENT"):
        conn.execute(sql)
    lock = threading.Lock()

    def run(sql: str, params: list) -> list[tuple]:
        with lock, conn:
            return conn.execute(sql, params).fetchall()

    return Loop(run, "?")
