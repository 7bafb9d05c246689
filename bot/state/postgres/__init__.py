"""`State` on PostgreSQL: what a fleet of replicas shares (FIELDGUIDE_DATABASE_URL), one module
per concern — the pool and the replica's session (session.py), the audit trail (audit.py), event
claims (claims.py), rate limits (limits.py), the reindex lock (reindex.py), what users are
looking at beside the app (viewing.py) — joined here.

- Audit rows and feedback go to `answers` / `feedback`; `fieldguide audit` reads them there.
- Event de-duplication: each delivery claims its keys (Slack event id, channel:ts) in one
  `INSERT … ON CONFLICT` statement, and is answered only if it got every key. A claim is a lease
  held by the claiming replica's database session (its pid and start time, from the connection
  kept open for the reindex lock) until the answer is recorded: a retry of an event whose claimer
  died before answering (its session is gone), or has not answered within `LEASE_SECONDS`, is
  answered by the replica that gets it. An answered claim holds for an hour, then expires.
  The claim keeps the event (what Slack sent): an event whose claimer died unanswered is taken
  over by another replica's sweeper (`take_orphans`, bot/slack/orphans.py), as Slack does not
  resend an event it saw acknowledged.
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

from ..loop import Loop
from .audit import Audit
from .claims import LEASE_SECONDS, Claims
from .limits import RateLimits
from .reindex import ReindexLock
from .session import QUEUE_MAX, outage
from .viewing import Viewing

__all__ = ["LEASE_SECONDS", "QUEUE_MAX", "PostgresState", "outage"]


class PostgresState(Audit, Claims, RateLimits, ReindexLock, Viewing):
    """The fleet's State (bot/state/__init__.py; see the module docstring)."""

    fleet = True

    def __init__(self, url: str, max_connections: int = 8):
        super().__init__(url, max_connections)
        self._loop = Loop(self._run, "%s")
        self._start()

    @property
    def loop(self) -> Loop:
        """The owners' loop (bot/state/loop.py), in the fleet's PostgreSQL."""
        return self._loop  # the background thread, once every part is set up
