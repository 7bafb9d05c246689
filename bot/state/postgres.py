"""`State` on PostgreSQL: what a fleet of replicas shares (FIELDGUIDE_DATABASE_URL).

- Audit rows and feedback go to `answers` / `feedback`; `fieldguide audit` reads them there.
- Event de-duplication: each delivery claims its keys (Slack event id, channel:ts) in one
  `INSERT … ON CONFLICT` statement, and is answered only if it got every key. A claim is a lease
  held by the claiming replica's database session (its pid and start time, from the connection
  kept open for the reindex lock) until the answer is recorded: a retry of an event whose claimer
  died before answering (its session is gone), or has not answered within `LEASE_SECONDS`, is
  answered by the replica that gets it. An answered claim holds for an hour, then expires.
  The claim keeps the event (what Slack sent): an event whose claimer died unanswered is taken
  over by another replica's sweeper (`take_orphans`, bot/slack/orphans.py), as Slack does not resend
  an event it saw acknowledged.
- Rate limits: one row per user with the times of their questions in the last minute, updated in
  one statement (the row lock makes concurrent replicas count together).
- The reindex lock: a session advisory lock, released by PostgreSQL if the holder dies.

While PostgreSQL is unreachable, answers go on: audit rows and feedback wait in a bounded queue
and are written on reconnect, de-duplication and rate limits fall back to this process's memory
(one warning per outage). An event is not acknowledged while its claim cannot be made durable
(`durable`, checked by bot/slack/slack_app.py before Bolt acks): Slack keeps it and sends it again,
to this replica or another, so a replica dying during the outage loses nothing it held only in
memory; Slack's last retry is answered from memory rather than refused for good.

Text PostgreSQL cannot hold (NUL, lone surrogates) is cleaned before it is stored (index/clean.py),
and a claim that fails for any other database reason is made in memory: the question is answered.

Connections: the pool (at most `max_connections`) serves every statement, and one of its
connections is held as the replica's session (claims' owner, the reindex lock), so a replica
needs no connection beyond its pool: when the server refuses new ones, a replica whose pool still
has one restores its session from it (docs/deploy.md counts them for a fleet).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from index.clean import storable, storable_json
from index.pg import (
    POOL_ERRORS,
    FleetError,
    open_pool,
    reindex_locked,
    reindex_unlock,
    try_reindex_lock,
)
from index.store import utc_now

from .sqlite import USAGE_BATCH, InProcess, answer_filter, answer_row, decode_row

log = logging.getLogger(__name__)

LEASE_SECONDS = 120  # an unanswered claim whose owner still lives is taken over after this
QUEUE_MAX = 1000  # audit rows + feedback kept while PostgreSQL is away (oldest dropped past it)
PROBE_SECONDS = 0.5  # how often the background thread retries while the database is away
SESSION_CHECK_SECONDS = 5.0  # how often the replica's own session is checked

COLUMNS = [  # the audit columns, in table order
    "created",
    "question",
    "condensed",
    "decision",
    "intents",
    "routing",
    "hits",
    "passages",
    "dropped_passages",
    "models",
    "prompts",
    "answer",
    "citations",
    "evidence",
    "offline",
    "notes",
    "timings_ms",
    "usage",
    "channel",
    "user",
    "thread_ts",
    "message_ts",
]
INSERT_ANSWER = (
    "WITH done AS (UPDATE event_claims SET done = true WHERE key = ANY(%(keys)s))"
    f" INSERT INTO answers ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in COLUMNS)})"
    f" VALUES ({', '.join(f'%({c})s' for c in COLUMNS)}) RETURNING id"
)
UPSERT_FEEDBACK = """INSERT INTO feedback (answer_id, "user", value, created)
VALUES (%s, %s, %s, %s)
ON CONFLICT (answer_id, "user") DO UPDATE SET value = excluded.value, created = excluded.created"""
CLAIM = """INSERT INTO event_claims AS c (key, owner_pid, owner_start, event)
SELECT k, %(pid)s, %(start)s, %(event)s FROM unnest(%(keys)s::text[]) AS k ORDER BY k
ON CONFLICT (key) DO UPDATE
SET owner_pid = excluded.owner_pid, owner_start = excluded.owner_start, claimed = now(),
    done = false, event = coalesce(excluded.event, c.event)
WHERE c.claimed < now() - interval '1 hour'
   OR (NOT c.done AND (c.claimed < now() - make_interval(secs => %(lease)s)
       OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                      WHERE a.pid = c.owner_pid AND a.backend_start = c.owner_start)))
RETURNING key"""
# Unanswered events whose claimer's session is gone (the candidates; CLAIM decides who takes each).
# A claim made before the server (re)started lost its session to the restart, not necessarily its
# replica: that one is left to its lease, so a live replica finishes it without a second answer.
ORPHANS = """SELECT DISTINCT event FROM (
    SELECT c.event FROM event_claims c
    WHERE NOT c.done AND c.event IS NOT NULL AND c.claimed > now() - interval '1 hour'
      AND (c.claimed > pg_postmaster_start_time()
           OR c.claimed < now() - make_interval(secs => %(lease)s))
      AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                      WHERE a.pid = c.owner_pid AND a.backend_start = c.owner_start)
    ORDER BY c.claimed LIMIT %(limit)s) o"""
ALLOW = """INSERT INTO rate_windows AS r (user_id, times) VALUES (%(user)s, ARRAY[now()])
ON CONFLICT (user_id) DO UPDATE
SET times = array(SELECT t FROM unnest(r.times) t WHERE t > now() - interval '1 minute')
            || now()
WHERE cardinality(array(SELECT t FROM unnest(r.times) t WHERE t > now() - interval '1 minute'))
      < %(limit)s
RETURNING 1"""


def outage(e: Exception) -> bool:
    """Is `e` the database being away (no connection, a connection lost or refused, the server
    shutting down), rather than one statement refused (a limit, a timeout)?"""
    state = getattr(e, "sqlstate", None)
    # 08: connection exception, 53: insufficient resources (too many connections),
    # 57P: the server shutting down or restarting; no SQLSTATE: no server answered at all
    return state is None or state.startswith(("08", "53", "57P"))


class PostgresState:
    """The fleet's State (see the module docstring)."""

    def __init__(self, url: str, max_connections: int = 8):
        self.url = url
        self.pool = open_pool(url, max_connections)  # FleetError when unreachable at start
        self.statements = 0  # statements sent (bench/fleet.py reports them per answer)
        self._local = InProcess()
        self._queue: deque[tuple] = deque()
        self._dropped = 0
        self._down = False
        self._mine = threading.local()  # keys this thread claimed, marked done with its answer
        self._threads: set[tuple[str, str]] = set()  # threads of the queued answers
        self._session_lock = threading.Lock()
        self._session: psycopg.Connection | None = None
        self._identity: tuple[int, Any] = (0, None)
        self._holding_reindex = False
        self._open_session()
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._background, name="pg-state", daemon=True)
        self._worker.start()

    # --- plumbing

    def _open_session(self) -> None:
        """The connection that stands for this replica: its pid and start time own the event
        claims, and it holds the reindex lock. Taken from the pool and kept out of it, so it
        needs no connection the server might refuse when the pool has one."""
        try:
            conn = self.pool.getconn()
        except POOL_ERRORS as e:
            raise FleetError(
                f"no PostgreSQL connection for the session ({type(e).__name__})"
            ) from None
        try:
            row = conn.execute(
                "SELECT pg_backend_pid(), backend_start FROM pg_stat_activity"
                " WHERE pid = pg_backend_pid()"
            ).fetchone()
        except POOL_ERRORS:
            self.pool.putconn(conn)  # broken: the pool discards it
            raise
        assert row is not None
        self._session, self._identity = conn, (row[0], row[1])

    def _drop_session(self) -> None:
        if self._session is not None:
            self.pool.putconn(self._session)  # a broken one is discarded, a live one reused
            self._session = None

    def _run(self, sql: str, params: Any = None) -> list[tuple]:
        with self.pool.connection() as conn:
            self.statements += 1
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def _failed(self, what: str, e: Exception) -> None:
        if not outage(e):  # the server answered: this statement failed, the database is fine
            log.error("PostgreSQL refused %s: %s", what, " ".join(str(e).split()))
            return
        if not self._down:
            self._down = True
            log.warning(
                "PostgreSQL unreachable (%s: %s): answering on; de-duplication and rate limits"
                " use this replica's memory, audit rows and feedback are queued (up to %d) until"
                " it is back",
                what,
                type(e).__name__,
                QUEUE_MAX,
            )

    def _enqueue(self, item: tuple) -> None:
        if len(self._queue) == QUEUE_MAX:
            self._dropped += 1
            if self._dropped in (1, 10, 100) or self._dropped % 1000 == 0:
                log.warning("audit queue full: %d oldest rows dropped", self._dropped)
        self._queue.append(item)  # a deque with maxlen would drop silently; count instead
        while len(self._queue) > QUEUE_MAX:
            self._queue.popleft()

    def flush(self) -> int:
        """Write the queued audit rows and feedback, oldest first; how many were written."""
        written = 0
        while self._queue:
            kind, params = self._queue[0]
            try:
                self._run(INSERT_ANSWER if kind == "answer" else UPSERT_FEEDBACK, params)
                written += 1
            except POOL_ERRORS as e:
                if outage(e):
                    raise  # kept for the next try
                # a row the server refuses would be refused forever, holding up the rest
                log.error("dropped a queued %s PostgreSQL refuses: %s", kind, e)
            self._queue.popleft()
        self._threads.clear()  # PostgreSQL knows those threads now
        return written

    def _background(self) -> None:
        """While the database is away: probe it, then flush the queue and restore the session.
        Otherwise: expire old claims now and then."""
        last_cleanup = last_check = 0.0
        while not self._stop.wait(PROBE_SECONDS):
            try:
                if time.monotonic() - last_check > SESSION_CHECK_SECONDS:
                    # a database restart ends the session silently: notice it, take a new one
                    last_check = time.monotonic()
                    with self._session_lock:
                        if self._session is not None and not self._session.closed:
                            self._session.execute("SELECT 1")
                if self._down or self._queue or self._session is None or self._session.closed:
                    self._restore()
                if time.monotonic() - last_cleanup > 60:
                    self._run("DELETE FROM event_claims WHERE claimed < now() - interval '1 hour'")
                    last_cleanup = time.monotonic()
            except POOL_ERRORS as e:
                self._failed("reconnecting", e)

    def _restore(self) -> None:
        with self._session_lock:
            if self._session is None or self._session.closed or self._session.broken:
                self._drop_session()
                self._open_session_quietly()
        n = self.flush()
        if self._down:
            self._down = False
            log.warning("PostgreSQL is back: %d queued audit rows and feedback written", n)

    def _open_session_quietly(self) -> None:
        try:
            self._open_session()
        except FleetError as e:  # still away
            raise psycopg.OperationalError(str(e)) from None

    def close(self) -> None:
        self._stop.set()
        self._worker.join(timeout=5)
        with self._session_lock:
            self._drop_session()
        self.pool.close()

    # --- State

    def record_answer(self, ans: Any, context: dict) -> int | None:
        row = {
            k: storable(v) if isinstance(v, str) else v for k, v in answer_row(ans, context).items()
        }
        # the claim's keys come with the question (answered on another thread than it was claimed)
        row["keys"] = list(context.get("keys") or getattr(self._mine, "keys", []))
        self._mine.keys = []
        if not self._down and not self._queue:
            try:
                return int(self._run(INSERT_ANSWER, row)[0][0])
            except POOL_ERRORS as e:
                self._failed("recording an answer", e)
        self._enqueue(("answer", row))
        if context.get("channel") and context.get("thread_ts"):
            self._threads.add((context["channel"], context["thread_ts"]))
        return None  # no id yet: the answer is posted without feedback buttons

    def record_feedback(self, answer_id: int, user: str, value: str) -> None:
        user, value = storable(user), storable(value)
        if not self._down and not self._queue:
            try:
                self._run(UPSERT_FEEDBACK, [answer_id, user, value, utc_now()])
                return
            except POOL_ERRORS as e:
                self._failed("recording feedback", e)
        self._enqueue(("feedback", [answer_id, user, value, utc_now()]))

    def list_answers(
        self,
        since: str | None = None,
        decision: str | None = None,
        limit: int = 50,
        where: tuple[str, list] | None = None,
    ) -> list[dict]:
        where_sql, args = answer_filter(since, decision, "%s", where)
        sql = f"""SELECT a.*, (SELECT json_object_agg(f."user", f.value)::text FROM feedback f
                               WHERE f.answer_id = a.id) AS feedback,
                              (SELECT h.target FROM handoffs h WHERE h.answer_id = a.id) AS handoff
                  FROM answers a {where_sql} ORDER BY a.id DESC LIMIT %s"""
        with self.pool.connection() as conn:
            cur = conn.execute(sql, [*args, limit])
            names = [d.name for d in cur.description or []]
            return [decode_row(dict(zip(names, r, strict=True))) for r in cur.fetchall()]

    def usage_rows(self, since: str | None = None) -> Iterator[dict]:
        where_sql, args = answer_filter(since, None, "%s")
        sql = f"""SELECT a.decision, a.usage, (SELECT json_object_agg(f."user", f.value)::text
                      FROM feedback f WHERE f.answer_id = a.id) AS feedback
                  FROM answers a {where_sql} ORDER BY a.id"""
        # a server-side cursor: the rows come in batches, however many answers there are
        with (
            self.pool.connection() as conn,
            conn.transaction(),
            conn.cursor(name="usage_rows") as cur,
        ):
            cur.itersize = USAGE_BATCH
            cur.execute(sql, args)
            for decision, usage, feedback in cur:
                yield {
                    "decision": decision,
                    "usage": json.loads(usage or "{}"),
                    "feedback": json.loads(feedback or "{}"),
                }

    def get_answer(self, answer_id: int) -> dict | None:
        rows = self.list_answers(limit=1, where=("a.id = %s", [answer_id]))
        return rows[0] if rows else None

    def claim_handoff(self, answer_id: int, user: str, owner: str, target: str) -> str | None:
        # one statement: of two replicas clicking at once, one inserts, the other reads its row
        rows = self._run(
            """WITH ins AS (
                   INSERT INTO handoffs (answer_id, "user", owner, target, created)
                   VALUES (%s, %s, %s, %s, %s) ON CONFLICT (answer_id) DO NOTHING
                   RETURNING answer_id)
               SELECT (SELECT count(*) FROM ins),
                      (SELECT target FROM handoffs WHERE answer_id = %s)""",
            [answer_id, user, owner, target, utc_now(), answer_id],
        )
        inserted, earlier = rows[0]
        if inserted:
            return None
        if earlier is None:  # the other insert committed after this statement's snapshot
            found = self._run("SELECT target FROM handoffs WHERE answer_id = %s", [answer_id])
            earlier = found[0][0] if found else ""
        return earlier

    def release_handoff(self, answer_id: int) -> None:
        self._run("DELETE FROM handoffs WHERE answer_id = %s", [answer_id])

    def thread_answered(self, channel: str, thread_ts: str) -> bool:
        if (channel, thread_ts) in self._threads:
            return True
        if not self._down:
            try:
                return bool(
                    self._run(
                        "SELECT 1 FROM answers WHERE channel = %s AND thread_ts = %s LIMIT 1",
                        [storable(channel), storable(thread_ts)],
                    )
                )
            except POOL_ERRORS as e:
                self._failed("reading a thread", e)
        return False

    def durable(self) -> bool:
        """Can an event be claimed in PostgreSQL now (checked before Slack gets its ack)? The
        replica's session is what is checked: a claim is owned by it, and one made in the name of
        a session a server restart ended would look orphaned to the other replicas at once."""
        if self._down:
            return False
        try:
            with self._session_lock:
                try:
                    if self._session is None:
                        raise psycopg.OperationalError("no session")
                    self._session.execute("SELECT 1")
                except POOL_ERRORS:  # ended (a restart): a new one from the pool, if any
                    self._drop_session()
                    self._open_session_quietly()
            return True
        except POOL_ERRORS as e:
            self._failed("checking the database", e)
            return False

    def claim_event(self, *keys: str, event: dict | None = None) -> bool:
        wanted = sorted({storable(k) for k in keys if k})
        got = self._local.claim_event(*wanted)  # also remembered here, for an outage
        if not self._down:
            try:
                return self._claim(wanted, storable_json(event))
            except POOL_ERRORS as e:
                self._failed("claiming an event", e)
            except psycopg.Error:  # not an outage, yet no reason to leave a question unanswered
                log.exception("claiming event %s failed: de-duplicated in memory", wanted)
        if got:
            self._mine.keys = wanted
        return got

    def note_placeholder(self, keys: tuple[str, ...], ts: str) -> None:
        """Keep the answer's placeholder with the claim: a replica taking the event over
        (take_orphans) answers in it instead of leaving it behind."""
        if keys and not self._down:
            try:
                self._run(
                    "UPDATE event_claims SET event = jsonb_set(event, '{placeholder}', %s)"
                    " WHERE key = ANY(%s) AND event IS NOT NULL",
                    [Jsonb(ts), [storable(k) for k in keys]],
                )
            except POOL_ERRORS as e:
                self._failed("noting a placeholder", e)

    def _claim(self, wanted: list[str], event: dict | None) -> bool:
        rows = self._run(
            CLAIM,
            {
                "keys": wanted,
                "pid": self._identity[0],
                "start": self._identity[1],
                "lease": LEASE_SECONDS,
                "event": Jsonb(event) if event is not None else None,
            },
        )
        # Ours only if every key was. A key taken here while another was not (a second
        # delivery of a message already claimed) names that same message, so it is never
        # answered twice through it; it expires with the rest.
        mine = len(rows) == len(wanted)
        if mine:
            self._mine.keys = wanted
        return mine

    def done_event(self, *keys: str) -> None:
        if keys and not self._down:
            try:
                self._run(
                    "UPDATE event_claims SET done = true WHERE key = ANY(%s)",
                    [[storable(k) for k in keys]],
                )
            except POOL_ERRORS as e:
                self._failed("closing an event", e)

    def take_orphans(self, limit: int) -> list[dict]:
        """Up to `limit` unanswered events whose claimer died, now claimed by this replica (each
        through CLAIM, so two replicas never take the same one): the `event` stored with each."""
        if self._down or limit <= 0:
            return []
        taken = []
        try:
            for (event,) in self._run(ORPHANS, {"limit": limit, "lease": LEASE_SECONDS}):
                if event.get("keys") and self._claim(sorted(event["keys"]), event):
                    taken.append(event)
        except POOL_ERRORS as e:
            self._failed("taking over orphaned events", e)
        return taken

    def allow_question(self, user: str, per_minute: int) -> bool:
        user = storable(user)
        if not self._down:
            try:
                return bool(self._run(ALLOW, {"user": user, "limit": per_minute}))
            except POOL_ERRORS as e:
                self._failed("checking a rate limit", e)
        return self._local.allow_question(user, per_minute)

    @contextmanager
    def reindex_lock(self) -> Iterator[bool]:
        try:
            with self._session_lock:
                assert self._session is not None
                got = try_reindex_lock(self._session)
        except (AssertionError, *POOL_ERRORS) as e:
            self._failed("taking the reindex lock", e)
            with self._local.reindex_lock() as mine:
                yield mine
            return
        self._holding_reindex = got
        try:
            yield got
        finally:
            self._holding_reindex = False
            if got:
                try:
                    with self._session_lock:
                        assert self._session is not None
                        reindex_unlock(self._session)
                except POOL_ERRORS:
                    pass  # the session is gone, and the lock with it

    def reindex_running(self) -> bool:
        if self._holding_reindex or self._local.reindex_running():
            return True
        try:
            with self.pool.connection() as conn:
                return reindex_locked(conn)
        except POOL_ERRORS as e:
            self._failed("reading the reindex lock", e)
            return False
