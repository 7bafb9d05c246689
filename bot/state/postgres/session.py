"""A fleet replica's connection to PostgreSQL: the pool every statement goes through, the
replica's own session (one pool connection kept out of the pool: its pid and start time own the
events it takes, and it holds the reindex lock), telling an outage from one refused statement, and
the background thread that notices an outage end (or a restart that ended the session) and
catches up."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg

from index.pg import POOL_ERRORS, FleetError, open_pool

from ..memory import InProcess
from .schema import LATEST

log = logging.getLogger("bot.state.postgres")

QUEUE_MAX = 1000  # audit rows + feedback kept while PostgreSQL is away (oldest dropped past it)
PROBE_SECONDS = 0.5  # how often the background thread retries while the database is away
SESSION_CHECK_SECONDS = 5.0  # how often the replica's own session is checked
HOUSEKEEPING_SECONDS = 60.0  # how often expired rows are cleared


def outage(e: Exception) -> bool:
    """Is `e` the database being away (no connection, a connection lost or refused, the server
    shutting down), rather than one statement refused (a limit, a timeout)?"""
    state = getattr(e, "sqlstate", None)
    # 08: connection exception, 53: insufficient resources (too many connections),
    # 57P: the server shutting down or restarting; no SQLSTATE: no server answered at all
    return state is None or state.startswith(("08", "53", "57P"))


class Session:
    """The pool, the replica's session and the outage it may be in; what the other parts
    (audit.py, events.py, limits.py, reindex.py) run their statements through."""

    def __init__(self, url: str, max_connections: int = 8):
        self.url = url
        self.pool = open_pool(url, LATEST, max_connections)  # FleetError when unreachable at start
        self.statements = 0  # statements sent (bench/fleet.py reports them per answer)
        self._local = InProcess()  # events, limits and the lock while the database is away
        self._down = False
        self._mine = threading.local()  # keys this thread claimed, marked done with its answer
        self._session_lock = threading.Lock()
        self._session: psycopg.Connection | None = None
        self._identity: tuple[int, Any] = (0, None)
        self._open_session()
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._background, name="pg-state", daemon=True)

    def _open_session(self) -> None:
        """The connection that stands for this replica: its pid and start time own the events it
        takes, and it holds the reindex lock. Taken from the pool and kept out of it, so it needs
        no connection the server might refuse when the pool has one."""
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

    def _start(self) -> None:
        """The background thread, once every part is set up."""
        self._worker.start()

    def _background(self) -> None:
        """While the database is away: probe it, then restore the session and catch up.
        Otherwise: housekeeping now and then."""
        last_cleanup = last_check = 0.0
        while not self._stop.wait(PROBE_SECONDS):
            try:
                if time.monotonic() - last_check > SESSION_CHECK_SECONDS:
                    # a database restart ends the session silently: notice it, take a new one
                    last_check = time.monotonic()
                    with self._session_lock:
                        if self._session is not None and not self._session.closed:
                            self._session.execute("SELECT 1")
                if self._down or self._behind() or self._session is None or self._session.closed:
                    self._restore()
                if time.monotonic() - last_cleanup > HOUSEKEEPING_SECONDS:
                    self._housekeeping()
                    last_cleanup = time.monotonic()
            except POOL_ERRORS as e:
                self._failed("reconnecting", e)

    def _restore(self) -> None:
        with self._session_lock:
            if self._session is None or self._session.closed or self._session.broken:
                self._drop_session()
                self._open_session_quietly()
        n = self._catch_up()
        if self._down:
            self._down = False
            log.warning("PostgreSQL is back: %d queued audit rows and feedback written", n)

    def _open_session_quietly(self) -> None:
        try:
            self._open_session()
        except FleetError as e:  # still away
            raise psycopg.OperationalError(str(e)) from None

    # what the other parts add to the background thread's work

    def _behind(self) -> bool:
        """Is anything waiting to be written once the database is back?"""
        return False

    def _catch_up(self) -> int:
        """Write what waited for the database; how much."""
        return 0

    def _housekeeping(self) -> None:
        """Clear what has expired."""

    def close(self) -> None:
        self._stop.set()
        self._worker.join(timeout=5)
        with self._session_lock:
            self._drop_session()
        self.pool.close()
