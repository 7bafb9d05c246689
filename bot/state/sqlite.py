"""The embedded default `State` (bot/state/__init__.py): the audit trail (every answer, with what
led to it, the feedback users gave on it and its hand-off) and claimed Slack events in the index
file; rate limits and the reindex lock in this process (memory.py)."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlite_utils

from index.store import migrate, utc_now, writing

from .loop import Loop, tables
from .memory import InProcess
from .rows import USAGE_BATCH, answer_filter, answer_row, decode_row

log = logging.getLogger(__name__)

# pruning old answers is a DELETE over an index: done at most this often per process, not per answer
PRUNE_EVERY_SECONDS = 3600

EVENT_TTL = 3600.0  # seconds a claimed Slack event stays claimed (Slack retries within minutes)

# The audit trail's tables, beside the index's in the same file (index/store.py owns those): this
# module alone reads and writes them.
AUDIT_MIGRATIONS = sqlite_utils.Migrations("fieldguide.audit")


@AUDIT_MIGRATIONS()
def m001_audit_tables(db: sqlite_utils.Database) -> None:
    """Answers, feedback, claimed Slack events and hand-offs (IF NOT EXISTS: an index made before
    migrations has them)."""
    for sql in (
        """CREATE TABLE IF NOT EXISTS answers (
            id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT, question TEXT, condensed TEXT,
            decision TEXT, intents TEXT, routing TEXT, hits TEXT, passages TEXT,
            dropped_passages INTEGER, models TEXT, prompts TEXT, answer TEXT, citations TEXT,
            evidence TEXT, offline INTEGER, notes TEXT, timings_ms TEXT, usage TEXT, channel TEXT,
            user TEXT, thread_ts TEXT, message_ts TEXT)""",
        "CREATE INDEX IF NOT EXISTS answers_created ON answers(created)",
        "CREATE INDEX IF NOT EXISTS answers_thread ON answers(channel, thread_ts)",
        """CREATE TABLE IF NOT EXISTS feedback (
            answer_id INTEGER, user TEXT, value TEXT, created TEXT,
            PRIMARY KEY (answer_id, user))""",
        "CREATE TABLE IF NOT EXISTS slack_events (key TEXT PRIMARY KEY, claimed REAL NOT NULL)",
        "CREATE INDEX IF NOT EXISTS slack_events_claimed ON slack_events(claimed)",
        """CREATE TABLE IF NOT EXISTS handoffs (
            answer_id INTEGER PRIMARY KEY, user TEXT, owner TEXT, target TEXT, created TEXT)""",
    ):
        db.execute(sql)


@AUDIT_MIGRATIONS()
def m002_owners_loop(db: sqlite_utils.Database) -> None:
    """The owners' loop (bot/state/loop.py): gap topics, drafts, replays, once-only claims, and
    where a hand-off was posted."""
    for sql in tables("INTEGER PRIMARY KEY AUTOINCREMENT"):
        if "ADD COLUMN posted" in sql and "posted" in {
            row[1] for row in db.execute("PRAGMA table_info(handoffs)")
        }:
            continue
        db.execute(sql)


def record_answer(db: sqlite_utils.Database, ans: Any, context: dict) -> int:
    with writing(db):
        pk = db.table("answers").insert(answer_row(ans, context)).last_pk
    assert pk is not None  # an AUTOINCREMENT id
    return int(pk)


def record_feedback(db: sqlite_utils.Database, answer_id: int, user: str, value: str) -> None:
    """Last choice per user and answer wins."""
    with writing(db):
        db.table("feedback").upsert(
            {"answer_id": answer_id, "user": user, "value": value, "created": utc_now()},
            pk=("answer_id", "user"),
        )


def prune_answers(db: sqlite_utils.Database, retention_days: int) -> int:
    """Delete answers (and their feedback) older than `retention_days`; how many went."""
    cutoff = (datetime.now(UTC) - timedelta(days=retention_days)).isoformat(timespec="seconds")
    with writing(db):
        for table in ("feedback", "handoffs"):
            db.execute(
                f"DELETE FROM {table} WHERE answer_id IN"
                " (SELECT id FROM answers WHERE created < ?)",
                [cutoff],
            )
        return db.execute("DELETE FROM answers WHERE created < ?", [cutoff]).rowcount


def list_answers(
    db: sqlite_utils.Database,
    since: str | None = None,
    decision: str | None = None,
    limit: int = 50,
    where: tuple[str, list] | None = None,
) -> list[dict]:
    where_sql, args = answer_filter(since, decision, "?", where)
    sql = f"""SELECT a.*, (SELECT json_group_object(f.user, f.value) FROM feedback f
                           WHERE f.answer_id = a.id) AS feedback,
                          (SELECT h.target FROM handoffs h WHERE h.answer_id = a.id) AS handoff
              FROM answers a {where_sql} ORDER BY a.id DESC LIMIT ?"""
    return [decode_row(r) for r in db.query(sql, [*args, limit])]


def usage_rows(db: sqlite_utils.Database, since: str | None = None) -> Iterator[dict]:
    where_sql, args = answer_filter(since, None, "?")
    sql = f"""SELECT a.id, a.decision, a.usage, (SELECT json_group_object(f.user, f.value)
                  FROM feedback f WHERE f.answer_id = a.id) AS feedback
              FROM answers a {where_sql} {"AND" if where_sql else "WHERE"} a.id > ?
              ORDER BY a.id LIMIT {USAGE_BATCH}"""
    last = 0
    while True:
        rows = list(db.query(sql, [*args, last]))
        for r in rows:
            yield {
                "decision": r["decision"],
                "usage": json.loads(r["usage"] or "{}"),
                "feedback": json.loads(r["feedback"] or "{}"),
            }
        if len(rows) < USAGE_BATCH:
            return
        last = rows[-1]["id"]


def claim_handoff(
    db: sqlite_utils.Database, answer_id: int, user: str, owner: str, target: str
) -> str | None:
    with writing(db):
        inserted = db.execute(
            "INSERT OR IGNORE INTO handoffs (answer_id, user, owner, target, created)"
            " VALUES (?, ?, ?, ?, ?)",
            [answer_id, user, owner, target, utc_now()],
        ).rowcount
        if inserted:
            return None
        row = db.execute("SELECT target FROM handoffs WHERE answer_id = ?", [answer_id])
        return row.fetchone()[0]


class SqliteState(InProcess):
    """The embedded default: audit tables and claimed Slack events in the index file; rate limits
    and the reindex lock held by this process.

    Answers older than `retention_days` (0 = keep forever) are pruned as answers are written, at
    most once an hour. When the index cannot be written (a read-only file or folder, a full disk)
    answers are still given: the audit write fails soft, with one warning per process, and claimed
    events are kept in this process's memory instead."""

    def __init__(
        self, db: sqlite_utils.Database, event_ttl: float = EVENT_TTL, retention_days: int = 90
    ):
        self.db = db
        self.event_ttl = event_ttl
        self.retention_days = retention_days
        self._last_prune: float | None = None
        self._warned = False
        super().__init__()  # claims live here only while the index can't be written
        # the tables once, now, so the per-answer writes below don't repeat it
        self._audit_failed(lambda: migrate(db, AUDIT_MIGRATIONS))
        self._loop = Loop(self._run, "?")  # the owners' loop in the index file

    def _run(self, sql: str, params: list) -> list[tuple]:
        with writing(self.db):
            return self.db.execute(sql, params).fetchall()

    def _audit_failed(self, write) -> bool:
        """Run an audit write; on a database error warn once and go on (True)."""
        try:
            write()
            return False
        except sqlite3.DatabaseError as e:
            if not self._warned:
                self._warned = True
                log.warning("the audit trail is not recorded: the index cannot be written (%s)", e)
            return True

    def record_answer(self, ans: Any, context: dict) -> int | None:
        now = time.monotonic()
        if self.retention_days and (
            self._last_prune is None or now - self._last_prune >= PRUNE_EVERY_SECONDS
        ):
            self._last_prune = now
            self._audit_failed(lambda: prune_answers(self.db, self.retention_days))
        ids: list[int] = []
        if self._audit_failed(lambda: ids.append(record_answer(self.db, ans, context))):
            return None
        return ids[0]

    def record_feedback(self, answer_id: int, user: str, value: str) -> None:
        self._audit_failed(lambda: record_feedback(self.db, answer_id, user, value))

    def list_answers(
        self, since: str | None = None, decision: str | None = None, limit: int = 50
    ) -> list[dict]:
        try:
            return list_answers(self.db, since, decision, limit)
        except sqlite3.OperationalError:
            return []  # a read-only index made before the audit tables existed: no answers

    def usage_rows(self, since: str | None = None) -> Iterator[dict]:
        try:
            yield from usage_rows(self.db, since)
        except sqlite3.OperationalError:
            return  # a read-only index made before the audit tables existed: no answers

    def get_answer(self, answer_id: int) -> dict | None:
        rows = list_answers(self.db, limit=1, where=("a.id = ?", [answer_id]))
        return rows[0] if rows else None

    def claim_handoff(self, answer_id: int, user: str, owner: str, target: str) -> str | None:
        return claim_handoff(self.db, answer_id, user, owner, target)

    def release_handoff(self, answer_id: int) -> None:
        with writing(self.db):
            self.db.execute("DELETE FROM handoffs WHERE answer_id = ?", [answer_id])

    def thread_answered(self, channel: str, thread_ts: str) -> bool:
        try:
            row = self.db.execute(
                "SELECT 1 FROM answers WHERE channel = ? AND thread_ts = ? LIMIT 1",
                [channel, thread_ts],
            ).fetchone()
        except sqlite3.OperationalError:
            return False  # no audit table (a read-only index): no thread was answered
        return row is not None

    def claim_event(self, *keys: str, event: dict | None = None) -> bool:
        keys = tuple(k for k in keys if k)
        now = time.time()
        try:
            return self._claim_in_db(keys, now)
        except sqlite3.DatabaseError as e:
            if not self._warned:
                self._warned = True
                log.warning("claimed events kept in memory: the index cannot be written (%s)", e)
        return super().claim_event(*keys)

    def _claim_in_db(self, keys: tuple[str, ...], now: float) -> bool:
        with writing(self.db):
            # expired claims go first, so the table holds about an hour of events
            self.db.execute("DELETE FROM slack_events WHERE claimed < ?", [now - self.event_ttl])
            marks = ",".join("?" * len(keys))
            if (
                keys
                and self.db.execute(
                    f"SELECT 1 FROM slack_events WHERE key IN ({marks}) LIMIT 1", list(keys)
                ).fetchone()
            ):
                return False
            self.db.conn.executemany(
                "INSERT INTO slack_events (key, claimed) VALUES (?, ?)", [(k, now) for k in keys]
            )
            return True
