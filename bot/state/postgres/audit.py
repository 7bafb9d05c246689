"""The fleet's audit trail in PostgreSQL: answers (closing their event's claim in the same
statement), feedback and hand-offs; `fieldguide audit` reads them there. While the database is
away, answers and feedback wait in a bounded queue, written when it is back."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from typing import Any

from index.clean import storable
from index.pg import POOL_ERRORS
from index.store import utc_now

from ..rows import USAGE_BATCH, answer_filter, answer_row, decode_row
from .session import QUEUE_MAX, Session, log, outage

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

# one Slack message holds one answer: an answer given again in the same message (by the replica
# that took over a claim its dead claimer never closed) replaces the row recorded for it
INSERT_ANSWER = (
    "WITH done AS (UPDATE event_claims SET done = true WHERE key = ANY(%(keys)s)),"
    " gone AS (DELETE FROM answers WHERE channel = %(channel)s"
    " AND thread_ts IS NOT DISTINCT FROM %(thread_ts)s AND message_ts = %(message_ts)s"
    " RETURNING id),"
    " unrated AS (DELETE FROM feedback WHERE answer_id IN (SELECT id FROM gone))"
    f" INSERT INTO answers ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in COLUMNS)})"
    f" VALUES ({', '.join(f'%({c})s' for c in COLUMNS)}) RETURNING id"
)

UPSERT_FEEDBACK = """INSERT INTO feedback (answer_id, "user", value, created)
VALUES (%s, %s, %s, %s)
ON CONFLICT (answer_id, "user") DO UPDATE SET value = excluded.value, created = excluded.created"""


class Audit(Session):
    def __init__(self, url: str, max_connections: int = 8):
        super().__init__(url, max_connections)
        self._queue: deque[tuple] = deque()
        self._dropped = 0
        self._threads: set[tuple[str, str]] = set()  # threads of the queued answers

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

    def _behind(self) -> bool:
        return bool(self._queue)

    def _catch_up(self) -> int:
        return self.flush()

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
