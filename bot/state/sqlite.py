"""The embedded default `State` (bot/state/__init__.py): the audit trail (every answer, with what
led to it, the feedback users gave on it and its hand-off), claimed Slack events and the channels
users are looking at in the index file; rate limits and the reindex lock in this process
(memory.py).

A claim keeps the event it was made for and the process that made it (process.py), until the
answer is recorded or the event is done: what a process acknowledged and did not answer before it
was stopped or killed is taken over by the next one (`take_orphans`, bot/slack/orphans.py), as a
fleet's replicas take over each other's (bot/state/postgres/events.py)."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlite_utils

from index.schema import migrate, refuse_newer
from index.store import utc_now, writing

from . import process
from .loop import Loop, tables
from .memory import InProcess
from .rows import USAGE_BATCH, answer_filter, answer_row, decode_row

log = logging.getLogger(__name__)

# pruning old answers is a DELETE over an index: done at most this often per process, not per answer
PRUNE_EVERY_SECONDS = 3600

EVENT_TTL = 3600.0  # seconds an answered Slack event stays claimed (Slack retries within minutes)
# seconds an unanswered claim is kept for the next process to answer or apologise for
UNANSWERED_TTL = 86_400.0

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


READ_ONLY = (
    "the audit trail is not recorded: the index is read-only (answers, feedback and hand-offs"
    " are not kept; fieldguide doctor says so too)"
)


@AUDIT_MIGRATIONS()
def m003_claims_keep_their_event(db: sqlite_utils.Database) -> None:
    """A claim keeps its event (what is needed to answer it), whether it is done, and the process
    that holds it. Claims made before are taken as done: nothing is known to answer them with."""
    for sql in (
        "ALTER TABLE slack_events ADD COLUMN event TEXT",
        "ALTER TABLE slack_events ADD COLUMN done INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE slack_events ADD COLUMN owner TEXT",
        "UPDATE slack_events SET done = 1",
    ):
        db.execute(sql)


@AUDIT_MIGRATIONS()
def m004_viewing(db: sqlite_utils.Database) -> None:
    """The channel each user is looking at beside the app's DM (Slack's app_context_changed)."""
    db.execute(
        """CREATE TABLE IF NOT EXISTS viewing (
            user TEXT, channel TEXT, viewing TEXT NOT NULL, updated REAL NOT NULL,
            PRIMARY KEY (user, channel))"""
    )


def record_answer(db: sqlite_utils.Database, ans: Any, context: dict) -> int:
    """The answer's audit row, and its claim closed (`context["keys"]`), in one transaction. One
    Slack message holds one answer: an answer given again in the same message (by the next
    process, after one killed before it closed the claim) replaces the row recorded for it."""
    keys = [k for k in context.get("keys") or () if k]
    with writing(db):
        if context.get("message_ts"):
            where = "channel = ? AND thread_ts IS ? AND message_ts = ?"
            same = [context.get("channel"), context.get("thread_ts"), context["message_ts"]]
            db.execute(
                f"DELETE FROM feedback WHERE answer_id IN (SELECT id FROM answers WHERE {where})",
                same,
            )
            db.execute(f"DELETE FROM answers WHERE {where}", same)
        pk = db.table("answers").insert(answer_row(ans, context)).last_pk
        if keys:
            db.execute(
                f"UPDATE slack_events SET done = 1 WHERE key IN ({','.join('?' * len(keys))})",
                keys,
            )
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
    """The embedded default: audit tables, claimed Slack events and the channels users look at in
    the index file; rate limits and the reindex lock held by this process.

    Answers older than `retention_days` (0 = keep forever) are pruned as answers are written, at
    most once an hour. When the index cannot be written answers are still given: opened
    read-only (a read-only volume: `index.store.PerThread.read_only`) the audit trail is off,
    said once as the state opens; a write that fails (a full disk) fails soft, with one warning
    per process. Claimed events are then kept in this process's memory instead. An index whose
    audit tables a newer fieldguide migrated is refused (index.store.NewerIndex)."""

    def __init__(
        self, db: sqlite_utils.Database, event_ttl: float = EVENT_TTL, retention_days: int = 90
    ):
        self.db = db
        self.event_ttl = event_ttl
        self.retention_days = retention_days
        self._last_prune: float | None = None
        self._warned = False
        super().__init__()  # claims live here only while the index can't be written
        self._loop = Loop(self._run, "?")  # the owners' loop in the index file
        self.recording = not getattr(db, "read_only", False)
        if not self.recording:
            refuse_newer(db, AUDIT_MIGRATIONS, "the index's audit trail")
            self._warned = True
            log.warning(READ_ONLY)
            return
        # the tables once, now, so the per-answer writes below don't repeat it
        self._audit_failed(lambda: migrate(db, AUDIT_MIGRATIONS, "the index's audit trail"))

    def _run(self, sql: str, params: list) -> list[tuple]:
        with writing(self.db):
            return self.db.execute(sql, params).fetchall()

    def _audit_failed(self, write) -> bool:
        """Run an audit write; on a database error warn once and go on (True). Read-only: not
        tried (True)."""
        if not self.recording:
            return True
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

    def note_viewing(self, user: str, channel: str, viewing: str) -> None:
        def write() -> None:
            with writing(self.db):
                self.db.execute(
                    "INSERT OR REPLACE INTO viewing (user, channel, viewing, updated)"
                    " VALUES (?, ?, ?, ?)",
                    [user, channel, viewing, time.time()],
                )

        if self._audit_failed(write):  # the index cannot be written: this process keeps it
            super().note_viewing(user, channel, viewing)

    def viewing(self, user: str, channel: str) -> str:
        with self._lock:  # noted here while the index could not be written: the newest
            noted = self._viewing.get((user, channel))
        if noted is not None:
            return noted
        try:
            row = self.db.execute(
                "SELECT viewing FROM viewing WHERE user = ? AND channel = ?", [user, channel]
            ).fetchone()
        except sqlite3.OperationalError:  # no table (a read-only index): nothing noted
            return ""
        return row[0] if row else ""

    def take_event(self, *keys: str, event: dict | None = None) -> bool:
        keys = tuple(k for k in keys if k)
        if not self.recording:
            return super().take_event(*keys)
        try:
            return self._claim_in_db(keys, event)
        except sqlite3.DatabaseError as e:
            if not self._warned:
                self._warned = True
                log.warning("claimed events kept in memory: the index cannot be written (%s)", e)
        return super().take_event(*keys)

    def _claim_in_db(self, keys: tuple[str, ...], event: dict | None) -> bool:
        """Every key claimed by this process, or none: a key answered (done) or held by a process
        that still runs is not taken; one left unanswered by a process that died is."""
        now = time.time()
        with writing(self.db):
            # answered claims go after an hour (Slack retries within minutes), unanswered ones
            # after a day
            self.db.execute(
                "DELETE FROM slack_events WHERE claimed < ? AND (done = 1 OR claimed < ?)",
                [now - self.event_ttl, now - UNANSWERED_TTL],
            )
            marks = ",".join("?" * len(keys))
            # a claim older than an hour no longer holds (Slack retries within minutes), as in a
            # fleet; an unanswered one is kept meanwhile for `take_orphans`
            held = self.db.execute(
                f"SELECT done, owner FROM slack_events WHERE key IN ({marks}) AND claimed >= ?",
                [*keys, now - self.event_ttl],
            ).fetchall()
            if any(done or process.alive(owner) for done, owner in held):
                return False
            stored = json.dumps(event) if event is not None else None
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO slack_events (key, claimed, event, done, owner)"
                " VALUES (?, ?, ?, 0, ?)",
                [(k, now, stored, process.me()) for k in keys],
            )
            return True

    def done_event(self, *keys: str) -> None:
        keys = tuple(k for k in keys if k)
        if keys:
            self._audit_failed(lambda: self._update_claims("done = 1", keys))

    def note_placeholder(self, keys: tuple[str, ...], ts: str) -> None:
        """Keep the answer's placeholder with its claim: the next process, taking the event over,
        answers in it instead of leaving it behind."""
        if keys:
            self._audit_failed(
                lambda: self._update_claims(
                    "event = json_set(event, '$.placeholder', ?)", keys, [ts], "event IS NOT NULL"
                )
            )

    def _update_claims(
        self, change: str, keys: tuple[str, ...], args: list | None = None, where: str = "1"
    ) -> None:
        with writing(self.db):
            self.db.execute(
                f"UPDATE slack_events SET {change} WHERE key IN ({','.join('?' * len(keys))})"
                f" AND {where}",
                [*(args or []), *keys],
            )

    def take_orphans(self, limit: int) -> list[dict]:
        """Up to `limit` unanswered events whose process died (stopped or killed) after claiming
        them, now claimed by this one; each taken only if all its keys still were that process's,
        so two processes never take the same."""
        if limit <= 0:
            return []
        try:
            rows = self.db.execute(
                "SELECT event, owner, min(claimed) FROM slack_events WHERE done = 0"
                " AND event IS NOT NULL AND owner IS NOT ? AND claimed >= ?"
                " GROUP BY event, owner ORDER BY min(claimed)",
                [process.me(), time.time() - UNANSWERED_TTL],
            ).fetchall()
        except sqlite3.OperationalError:
            return []  # a read-only index made before claims kept their events
        taken: list[dict] = []
        for stored, owner, _ in rows:
            if len(taken) >= limit:
                break
            event = json.loads(stored)
            keys = [k for k in event.get("keys") or () if k]
            if not keys or process.alive(owner):
                continue
            if self._audit_failed(lambda k=keys, o=owner, e=event: self._take(k, o, taken, e)):
                break
        return taken

    def _take(self, keys: list[str], owner: str, taken: list[dict], event: dict) -> None:
        marks = ",".join("?" * len(keys))
        with writing(self.db):
            (still,) = self.db.execute(
                f"SELECT count(*) FROM slack_events WHERE key IN ({marks}) AND owner = ?"
                " AND done = 0",
                [*keys, owner],
            ).fetchone()
            if still != len(keys):  # taken by another meanwhile, or answered: not ours
                return
            self.db.execute(
                f"UPDATE slack_events SET owner = ?, claimed = ? WHERE key IN ({marks})",
                [process.me(), time.time(), *keys],
            )
        taken.append(event)
