"""One reindex at a time across a fleet: a session advisory lock, released by PostgreSQL if the
holder dies; this replica's own lock while the database is away."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from index.pg import POOL_ERRORS, reindex_locked, reindex_unlock, try_reindex_lock

from .session import Session


class ReindexLock(Session):
    def __init__(self, url: str, max_connections: int = 8):
        super().__init__(url, max_connections)
        self._holding_reindex = False

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
