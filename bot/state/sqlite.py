"""What outlives one answer: the audit trail (every answer, with what led to it, and the feedback
users gave on it), Slack event de-duplication, per-user rate limits and the reindex lock.

`State` is the interface the pipeline, the Slack app and the CLI use; `SqliteState` is the
embedded default (tables in the index file, limits and the lock in this process). A fleet of
replicas uses the same interface on PostgreSQL.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import sqlite_utils

from index.store import utc_now, writing

log = logging.getLogger(__name__)

# one writer at a time on a connection shared by Slack's worker threads
_write_lock = threading.Lock()
# pruning old answers is a DELETE over an index: done at most this often per process, not per answer
PRUNE_EVERY_SECONDS = 3600

AUDIT_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT, question TEXT, condensed TEXT,
    decision TEXT, intents TEXT, routing TEXT, hits TEXT, passages TEXT, dropped_passages INTEGER,
    models TEXT, prompts TEXT, answer TEXT, citations TEXT, evidence TEXT, offline INTEGER,
    notes TEXT, timings_ms TEXT, usage TEXT, channel TEXT, user TEXT, thread_ts TEXT,
    message_ts TEXT);
CREATE INDEX IF NOT EXISTS answers_created ON answers(created);
CREATE INDEX IF NOT EXISTS answers_thread ON answers(channel, thread_ts);
CREATE TABLE IF NOT EXISTS feedback (
    answer_id INTEGER, user TEXT, value TEXT, created TEXT, PRIMARY KEY (answer_id, user));
CREATE TABLE IF NOT EXISTS slack_events (key TEXT PRIMARY KEY, claimed REAL NOT NULL);
CREATE INDEX IF NOT EXISTS slack_events_claimed ON slack_events(claimed);
CREATE TABLE IF NOT EXISTS handoffs (
    answer_id INTEGER PRIMARY KEY, user TEXT, owner TEXT, target TEXT, created TEXT);
"""
EVENT_TTL = 3600.0  # seconds a claimed Slack event stays claimed (Slack retries within minutes)


class State(Protocol):
    """Where a process keeps what outlives one answer (shared by replicas in a fleet)."""

    def record_answer(self, ans: Any, context: dict) -> int | None:
        """Store an answer (a router.pipeline.Answer) with its Slack context; its id."""
        ...

    def record_feedback(self, answer_id: int, user: str, value: str) -> None:
        """Last choice per user and answer wins."""
        ...

    def list_answers(
        self, since: str | None = None, decision: str | None = None, limit: int = 50
    ) -> list[dict]: ...

    def usage_rows(self, since: str | None = None) -> Iterator[dict]:
        """Every answer since `since` as {"decision", "usage", "feedback"} (for `audit
        --stats`), read in batches."""
        ...

    def thread_answered(self, channel: str, thread_ts: str) -> bool:
        """Has an answer been posted in this thread (so a reply there is a follow-up)?"""
        ...

    def claim_event(self, *keys: str, event: dict | None = None) -> bool:
        """True for the first claim of any of `keys` (Slack event id, channel:ts); a retry or a
        second delivery of the same event gets False. `event` (what is needed to answer it) is
        kept with the claim where another replica could answer it if this one dies."""
        ...

    def done_event(self, *keys: str) -> None:
        """The claimed event was handled without an answer being recorded (refused, failed):
        nobody is to answer it again."""
        ...

    def allow_question(self, user: str, per_minute: int) -> bool:
        """Per-user rate limit over a sliding minute."""
        ...

    def get_answer(self, answer_id: int) -> dict | None:
        """One audit row, as list_answers gives it; None when it is not (or no longer) there."""
        ...

    def claim_handoff(self, answer_id: int, user: str, owner: str, target: str) -> str | None:
        """Record that `user` handed answer `answer_id` to `owner` (posted to `target`), once per
        answer across every replica: None when this call recorded it, else the earlier target."""
        ...

    def release_handoff(self, answer_id: int) -> None:
        """Forget a hand-off whose message could not be posted, so it can be tried again."""
        ...

    def reindex_lock(self) -> Any:
        """A context manager yielding True when this caller holds the one reindex at a time."""
        ...

    def reindex_running(self) -> bool: ...


def ensure_tables(db: sqlite_utils.Database) -> None:
    """Create the tables once, when a SqliteState opens its connection, so the per-answer writes
    below don't repeat it."""
    db.conn.executescript(AUDIT_SCHEMA)


def answer_row(ans: Any, context: dict) -> dict:
    """The audit row of an answer (a router.pipeline.Answer) with its Slack context."""
    return {
        "created": utc_now(),
        "question": ans.question,
        "condensed": ans.condensed,
        "decision": ans.decision,
        "intents": json.dumps(ans.intents),
        "routing": json.dumps(ans.trace.route),
        "hits": json.dumps(
            [
                {
                    "id": h["id"],
                    "doc": h["doc"],
                    "section": h["heading_path"][-1:] and h["heading_path"][-1],
                    "bm25": round(h["bm25"], 4),
                    "vector": round(h["vector"], 4),
                    "score": round(h["score"], 4),
                }
                for h in ans.trace.hits
            ]
        ),
        "passages": json.dumps([asdict(p) for p in ans.passages]),
        "dropped_passages": ans.trace.dropped_passages,
        "models": json.dumps(ans.trace.models),
        "prompts": json.dumps(ans.trace.prompts),
        "answer": ans.text,
        "citations": json.dumps([asdict(c) for c in ans.citations]),
        "evidence": json.dumps(ans.trace.evidence),
        "offline": int(ans.trace.offline),
        "notes": json.dumps(ans.trace.notes),
        "timings_ms": json.dumps(ans.trace.timings_ms),
        "usage": json.dumps(ans.trace.usage),
        "channel": context.get("channel"),
        "user": context.get("user"),
        "thread_ts": context.get("thread_ts"),
        "message_ts": context.get("message_ts"),
    }


JSON_COLUMNS = (
    "intents",
    "routing",
    "hits",
    "passages",
    "models",
    "prompts",
    "citations",
    "evidence",
    "notes",
    "timings_ms",
    "usage",
    "feedback",
)


def decode_row(r: dict) -> dict:
    """An audit row as stored → as listed (JSON columns parsed, offline a bool)."""
    for key in JSON_COLUMNS:
        r[key] = json.loads(r[key]) if r[key] else ({} if key == "feedback" else None)
    r["offline"] = bool(r["offline"])
    return r


def record_answer(db: sqlite_utils.Database, ans: Any, context: dict) -> int:
    with _write_lock, writing(db):
        pk = db.table("answers").insert(answer_row(ans, context)).last_pk
    assert pk is not None  # an AUTOINCREMENT id
    return int(pk)


def record_feedback(db: sqlite_utils.Database, answer_id: int, user: str, value: str) -> None:
    """Last choice per user and answer wins."""
    with _write_lock, writing(db):
        db.table("feedback").upsert(
            {"answer_id": answer_id, "user": user, "value": value, "created": utc_now()},
            pk=("answer_id", "user"),
        )


def prune_answers(db: sqlite_utils.Database, retention_days: int) -> int:
    """Delete answers (and their feedback) older than `retention_days`; how many went."""
    cutoff = (datetime.now(UTC) - timedelta(days=retention_days)).isoformat(timespec="seconds")
    with _write_lock, writing(db):
        for table in ("feedback", "handoffs"):
            db.execute(
                f"DELETE FROM {table} WHERE answer_id IN"
                " (SELECT id FROM answers WHERE created < ?)",
                [cutoff],
            )
        return db.execute("DELETE FROM answers WHERE created < ?", [cutoff]).rowcount


def answer_filter(
    since: str | None, decision: str | None, mark: str, extra: tuple[str, list] | None = None
) -> tuple[str, list]:
    """The WHERE clause (and its arguments) of an audit listing; `mark`: the driver's placeholder
    (`?` for SQLite, `%s` for psycopg); `extra`: one more condition and its arguments."""
    where, args = [extra[0]] if extra else [], list(extra[1]) if extra else []
    if since:
        where.append(f"a.created >= {mark}")
        args.append(since)
    if decision:
        where.append(f"a.decision = {mark}")
        args.append(decision.upper())
    return ("WHERE " + " AND ".join(where) if where else ""), args


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


USAGE_BATCH = 500  # audit rows read at a time by `audit --stats`


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
    with _write_lock, writing(db):
        inserted = db.execute(
            "INSERT OR IGNORE INTO handoffs (answer_id, user, owner, target, created)"
            " VALUES (?, ?, ?, ?, ?)",
            [answer_id, user, owner, target, utc_now()],
        ).rowcount
        if inserted:
            return None
        row = db.execute("SELECT target FROM handoffs WHERE answer_id = ?", [answer_id])
        return row.fetchone()[0]


class InProcess:
    """De-duplication, rate limits and the reindex lock held by this process: the embedded default,
    and a fleet replica's fallback while PostgreSQL is away."""

    def __init__(self, seen_size: int = 5000):
        self._seen: dict[str, None] = {}
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
        self._audit_failed(lambda: ensure_tables(db))

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
        with _write_lock, writing(self.db):
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
        with _write_lock, writing(self.db):
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
