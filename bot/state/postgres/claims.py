"""Slack event claims shared by a fleet: each delivery claims its keys (Slack event id,
channel:ts) in one `INSERT … ON CONFLICT` statement and is answered only if it got every key. A
claim is a lease held by the claiming replica's session until the answer is recorded; it keeps the
event, so another replica's sweeper takes over what a dead replica acknowledged and never answered
(`take_orphans`, bot/slack/orphans.py)."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from index.clean import storable, storable_json
from index.pg import POOL_ERRORS

from .session import Session, log

LEASE_SECONDS = 120  # an unanswered claim whose owner still lives is taken over after this

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
    WHERE NOT c.done AND c.event IS NOT NULL AND c.claimed > now() - interval '1 day'
      AND (c.claimed > pg_postmaster_start_time()
           OR c.claimed < now() - make_interval(secs => %(lease)s))
      AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                      WHERE a.pid = c.owner_pid AND a.backend_start = c.owner_start)
    ORDER BY c.claimed LIMIT %(limit)s) o"""


class Claims(Session):
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

    def _housekeeping(self) -> None:
        """Answered claims expire after an hour, unanswered ones (kept for a live replica to
        answer, or apologise for: bot/slack/orphans.py) after a day."""
        self._run(
            "DELETE FROM event_claims WHERE claimed < now() - interval '1 hour'"
            " AND (done OR claimed < now() - interval '1 day')"
        )
