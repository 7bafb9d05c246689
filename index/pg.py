"""PostgreSQL for a fleet of replicas: the connection pool, the versioned schema and the index's
tables in it.

Imported only when FIELDGUIDE_DATABASE_URL is set (psycopg is not loaded by the embedded default).
`fieldguide db upgrade` applies the migrations below, each once, in order; `schema_version` holds
the versions applied. A process that starts against a database that is unreachable or not upgraded
stops with a `FleetError` whose message says what to do.
"""

from __future__ import annotations

import logging
import os
import socket

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from .redact import redact

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 3  # seconds for one connection attempt
INDEX_CHANNEL = "fieldguide_index"  # NOTIFY payload: the new generation's id

# The schema is in parts, each kept by the owner of its tables: the index's here (published
# generations and the shared embedding cache), the state's in bot/state/postgres/schema.py (the
# audit trail, event claims, rate windows, hand-offs). Versions are the fleet's: version n is every
# part's n-th statements together. Append only: a deployed database has applied every earlier one.
INDEX_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE index_generations (
        id BIGSERIAL PRIMARY KEY, created TIMESTAMPTZ NOT NULL DEFAULT now(), source TEXT,
        model TEXT, chunks INTEGER, bytes BIGINT, sha256 TEXT, complete BOOLEAN DEFAULT false);
    CREATE TABLE index_parts (
        generation BIGINT REFERENCES index_generations(id) ON DELETE CASCADE, part INTEGER,
        data BYTEA, PRIMARY KEY (generation, part));
    CREATE TABLE embeddings (
        text_hash TEXT, model TEXT, vector BYTEA, PRIMARY KEY (text_hash, model));
    """,
}


def merged(*parts: dict[int, str]) -> list[str]:
    """The fleet's migrations, version 1 first: each version's statements from every part."""
    last = max(v for part in parts for v in part)
    return ["\n".join(part.get(v, "") for part in parts) for v in range(1, last + 1)]


class FleetError(Exception):
    """PostgreSQL cannot be used as configured; the message is fit to show a user."""


def _where(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "FIELDGUIDE_DATABASE_URL"
    return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def application_name() -> str:
    """How this process shows in pg_stat_activity (host and pid: which replica is which)."""
    return f"fieldguide {socket.gethostname()}:{os.getpid()}"[:63]


def connect(url: str) -> psycopg.Connection:
    """One connection (autocommit), or a FleetError saying why not."""
    try:
        return psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT,
            application_name=application_name(),
        )
    except psycopg.ProgrammingError as e:
        # libpq quotes the part it could not read: with an unencoded % it is the password
        raise FleetError(
            f"FIELDGUIDE_DATABASE_URL is not a valid connection URL ({redact(str(e), url)});"
            " percent-encode special characters in the user name and password (% as %25)"
        ) from None
    except psycopg.OperationalError as e:
        reason = redact(" ".join(str(e).split()), url) or type(e).__name__
        raise FleetError(
            f"Cannot reach PostgreSQL at {_where(url)} ({reason}). Check FIELDGUIDE_DATABASE_URL"
            " and that the server is running."
        ) from None


def ping(url: str) -> None:
    """A new connection and one statement (a health probe); FleetError when unreachable."""
    with connect(url) as conn:
        conn.execute("SELECT 1")


def schema_version(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return 0
    got = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    return int(got[0]) if got else 0


def upgrade(url: str, migrations: list[str]) -> tuple[int, int]:
    """Apply the `migrations` (`merged`, version 1 first) not applied yet, each in its own
    transaction, one upgrader at a time (an advisory lock); returns (version before, after)."""
    with connect(url) as conn:
        conn.execute("SELECT pg_advisory_lock(20131)")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version INTEGER PRIMARY KEY, applied TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        before = schema_version(conn)
        if before > len(migrations):
            conn.execute("SELECT pg_advisory_unlock(20131)")
            raise FleetError(newer_schema(before, len(migrations)))
        for version, sql in enumerate(migrations, 1):
            if version <= before:
                continue
            with conn.transaction():
                conn.execute(sql)
                conn.execute("INSERT INTO schema_version (version) VALUES (%s)", [version])
        conn.execute("SELECT pg_advisory_unlock(20131)")
        return before, schema_version(conn)


def check_schema(conn: psycopg.Connection, latest: int) -> None:
    """A FleetError unless the database's schema is at version `latest`."""
    have = schema_version(conn)
    if have < latest:
        raise FleetError(
            f"The PostgreSQL schema is at version {have}, this fieldguide needs {latest}:"
            " run fieldguide db upgrade"
        )
    if have > latest:
        raise FleetError(newer_schema(have, latest))


def newer_schema(have: int, latest: int) -> str:
    """A schema a newer fieldguide migrated: refused by name, as the SQLite index is."""
    return (
        f"The PostgreSQL schema was written by a newer fieldguide (version {have}; this one knows"
        f" up to {latest}): upgrade fieldguide"
    )


def open_pool(url: str, latest: int, max_size: int = 8) -> ConnectionPool:
    """The pool every replica shares its statements through; checked at start: a FleetError when
    the server is unreachable or the schema is not at version `latest`. A connection is checked
    when taken from the pool, so one broken by a database restart is replaced, not handed out."""
    with connect(url) as conn:  # a clear error now rather than a pool retrying in the background
        check_schema(conn, latest)
    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        timeout=2.0,  # waiting for a connection: past this the caller falls back
        kwargs={
            "autocommit": True,
            "connect_timeout": CONNECT_TIMEOUT,
            "application_name": application_name(),
        },
        check=ConnectionPool.check_connection,
        name="fieldguide",
        open=False,
    )
    pool.open(wait=False)
    return pool


POOL_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)


REINDEX_LOCK = (20132, 1)  # the advisory lock key: one reindex at a time across the fleet


def try_reindex_lock(conn: psycopg.Connection) -> bool:
    """Take the fleet's reindex lock on this session (released by unlock, or by PostgreSQL when
    the session ends: a replica that dies mid-run frees it)."""
    row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", REINDEX_LOCK).fetchone()
    return bool(row and row[0])


def reindex_unlock(conn: psycopg.Connection) -> None:
    conn.execute("SELECT pg_advisory_unlock(%s, %s)", REINDEX_LOCK)


def reindex_locked(conn: psycopg.Connection) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND classid = %s AND objid = %s AND objsubid = 2)",
        REINDEX_LOCK,
    ).fetchone()
    return bool(row and row[0])
