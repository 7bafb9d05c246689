"""Index generations shared through PostgreSQL: the indexer publishes its SQLite index, every
replica follows the newest one, and embeddings are cached fleet-wide.

A published generation is a compact copy of the SQLite index (docs, chunks, intents, the current
model's vectors, recent runs; no audit rows, no BM25 cache) stored as zlib-compressed parts of
`PART_BYTES` in `index_parts`, written and marked complete in one transaction followed by a
NOTIFY on `fieldguide_index`. A replica downloads it to a temp file beside its FIELDGUIDE_DB,
checks its sha256, then copies it into the live file with SQLite's backup API in one write
transaction: the engine's open connection sees the previous index or the new one, never a mix, and
reloads on the changed `meta.generation` as it does after a local reindex.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import psycopg

from .mapped import drop_older, write_generation
from .pg import INDEX_CHANNEL, POOL_ERRORS, FleetError, connect
from .retries import INITIAL, retrying
from .store import generation, get_meta, open_db, set_meta

log = logging.getLogger(__name__)

PART_BYTES = 8 << 20  # one bytea row (before compression)
KEEP_GENERATIONS = 3  # older published generations are deleted
COMPRESS_LEVEL = 1  # zlib: chunk texts shrink ~3x, float32 vectors ~10%


class VectorCache:
    """The fleet's embedding cache (`embeddings` in PostgreSQL), keyed like SQLite's: text hash +
    model. The indexer asks it before embedding and tells it what it embedded."""

    def __init__(self, pool):
        self.pool = pool

    def fetch(self, model: str, hashes: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        with self.pool.connection() as conn:
            for s in range(0, len(hashes), 5000):
                rows = conn.execute(
                    "SELECT text_hash, vector FROM embeddings"
                    " WHERE model = %s AND text_hash = ANY(%s)",
                    [model, hashes[s : s + 5000]],
                ).fetchall()
                out.update((h, bytes(v)) for h, v in rows)
        return out

    def store(self, model: str, vectors: dict[str, bytes]) -> None:
        if not vectors:
            return
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(
                "CREATE TEMP TABLE new_vectors (text_hash TEXT, vector BYTEA) ON COMMIT DROP"
            )
            with conn.cursor().copy("COPY new_vectors (text_hash, vector) FROM STDIN") as copy:
                for h, v in vectors.items():
                    copy.write_row((h, v))
            conn.execute(
                "INSERT INTO embeddings (text_hash, model, vector)"
                " SELECT text_hash, %s, vector FROM new_vectors ON CONFLICT DO NOTHING",
                [model],
            )


def _copy(conn: sqlite3.Connection, table: str, tail: str = "", args: list | None = None) -> None:
    """Copy `table` from the attached source by the columns both have: an index written by an
    older fieldguide may lack a column added since (runs.warnings), or hold one dropped since."""
    cols = [r[1] for r in conn.execute(f"PRAGMA main.table_info({table})")]
    have = {r[1] for r in conn.execute(f"PRAGMA src.table_info({table})")}
    names = ", ".join(f'"{c}"' for c in cols if c in have)
    conn.execute(
        f"INSERT INTO main.{table} ({names}) SELECT {names} FROM src.{table} {tail}", args or []
    )


def snapshot(db_path: str | Path, dest: Path) -> tuple[str, int]:
    """A compact, consistent copy of the index at `db_path` (one read transaction), in rollback
    journal mode so the file is complete on its own; returns (model, chunk count)."""
    out = open_db(dest)
    conn = out.conn
    conn.execute("ATTACH DATABASE ? AS src", [str(db_path)])
    with conn:  # one transaction: every table read from the same snapshot of the source
        for table in ("meta", "docs", "chunks", "intents"):
            _copy(conn, table)
        _copy(conn, "runs", "ORDER BY id DESC LIMIT 20")
        model = conn.execute("SELECT value FROM main.meta WHERE key = 'embed_model'").fetchone()
        _copy(
            conn,
            "embeddings",
            "WHERE model = ? AND text_hash IN (SELECT text_hash FROM main.chunks)",
            [model[0] if model else ""],
        )
    conn.execute("DETACH DATABASE src")
    conn.execute("PRAGMA journal_mode=DELETE")
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    conn.close()
    return (model[0] if model else ""), chunks


def publish(url: str, db_path: str | Path, source: str = "") -> dict:
    """Publish the index at `db_path` as the fleet's newest generation; its vectors join the shared
    cache. Returns {"generation", "bytes", "stored", "chunks", "seconds"}."""
    t0 = time.perf_counter()
    db_path = Path(db_path)
    tmp = db_path.with_name(f".{db_path.name}.publish-{uuid.uuid4().hex[:8]}")
    try:
        model, chunks = snapshot(db_path, tmp)
        data = tmp.read_bytes()
        vectors = dict(
            sqlite3.connect(tmp).execute("SELECT text_hash, vector FROM embeddings").fetchall()
        )
    finally:
        tmp.unlink(missing_ok=True)
    stored = 0
    with connect(url) as conn:
        VectorCache(_Single(conn)).store(model, vectors)
        with conn.transaction():
            row = conn.execute(
                "INSERT INTO index_generations (source, model, chunks, bytes, sha256)"
                " VALUES (%s, %s, %s, %s, %s) RETURNING id",
                [source, model, chunks, len(data), hashlib.sha256(data).hexdigest()],
            ).fetchone()
            assert row is not None
            gen = int(row[0])
            with conn.cursor().copy("COPY index_parts (generation, part, data) FROM STDIN") as cp:
                for part, s in enumerate(range(0, len(data), PART_BYTES)):
                    blob = zlib.compress(data[s : s + PART_BYTES], COMPRESS_LEVEL)
                    stored += len(blob)
                    cp.write_row((gen, part, blob))
            conn.execute("UPDATE index_generations SET complete = true WHERE id = %s", [gen])
            conn.execute(
                "DELETE FROM index_generations WHERE id <= %s",
                [gen - KEEP_GENERATIONS],
            )
            conn.execute("SELECT pg_notify(%s, %s)", [INDEX_CHANNEL, str(gen)])
    # the publisher already serves this content: it must not download it back
    local = open_db(db_path)
    set_meta(local, published_generation=gen)
    local.conn.close()
    return {
        "generation": gen,
        "bytes": len(data),
        "stored": stored,
        "chunks": chunks,
        "seconds": time.perf_counter() - t0,
    }


class _Single:
    """A one-connection stand-in for a pool (`with x.connection() as conn`)."""

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn

    @contextlib.contextmanager
    def connection(self):
        yield self.conn


def newest(conn: psycopg.Connection) -> tuple[int, str] | None:
    row = conn.execute(
        "SELECT id, sha256 FROM index_generations WHERE complete ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return (int(row[0]), row[1]) if row else None


def local_generation(db_path: str | Path) -> int | None:
    """The published generation the local file holds (None: none, or no file)."""
    if not Path(db_path).is_file():
        return None
    db = open_db(db_path)
    try:
        value = get_meta(db, "published_generation")
        return int(value) if value else None
    finally:
        db.conn.close()


def sync(conn: psycopg.Connection, db_path: str | Path) -> int | None:
    """Bring the local index at `db_path` to the newest published generation; returns the
    generation now held (None when nothing is published)."""
    top = newest(conn)
    if top is None:
        return local_generation(db_path)
    gen, sha = top
    if local_generation(db_path) == gen:
        return gen
    db_path = Path(db_path)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = db_path.with_name(f".{db_path.name}.sync-{uuid.uuid4().hex[:8]}")
    try:
        digest = hashlib.sha256()
        with open(tmp, "wb") as f:
            part = 0
            while True:
                row = conn.execute(
                    "SELECT data FROM index_parts WHERE generation = %s AND part = %s", [gen, part]
                ).fetchone()
                if row is None:
                    break
                data = zlib.decompress(row[0])
                digest.update(data)
                f.write(data)
                part += 1
        if digest.hexdigest() != sha:
            raise FleetError(f"published generation {gen} is incomplete or damaged (sha256)")
        drop_older(db_path, _install(tmp, db_path, gen))
    finally:
        tmp.unlink(missing_ok=True)
    return gen


def _install(tmp: Path, db_path: Path, gen: int) -> Path:
    """Make the downloaded file the live index: a new meta.generation (so a running engine
    reloads), its search arrays written beside the live file as an index run writes them (before
    the generation is there to read: no question builds them), then one atomic step — a rename
    when there is no live file yet, else SQLite's backup API into it (the engine's open
    connection follows). Returns the arrays file."""
    current = 0
    if db_path.is_file():
        live = open_db(db_path)
        current = generation(live)
        live.conn.close()
    new = sqlite3.connect(tmp)
    with new:
        new.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('generation', ?),"
            " ('published_generation', ?)",
            [str(current + 1), str(gen)],
        )
    try:
        arrays = write_generation(new, db_path, dict(new.execute("SELECT key, value FROM meta")))
    except OSError as e:
        new.close()
        raise FleetError(
            f"cannot write the search arrays of published generation {gen} beside {db_path}"
            f" ({e.strerror or e})"
        ) from e
    if not db_path.is_file():
        new.close()
        os.replace(tmp, db_path)
        return arrays
    dest = sqlite3.connect(db_path, timeout=30)
    try:
        new.backup(dest)
    finally:
        dest.close()
        new.close()
    return arrays


class Follower:
    """A replica's thread that keeps its local index on the newest published generation: it wakes
    on NOTIFY, and polls every `poll_seconds` in case a notification was missed (a dropped
    connection, a database restart). After a switch it calls `on_switch()` (the engine loads the
    new index there, while questions are answered from the old one)."""

    def __init__(
        self,
        url: str,
        db_path: str | Path,
        on_switch: Callable[[], object] | None = None,
        poll_seconds: float = 30.0,
    ):
        self.url, self.db_path, self.on_switch = url, db_path, on_switch
        self.poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._failing = False  # the database is out: said once, until a reconnection
        self._thread = threading.Thread(target=self._run, name="index-follower", daemon=True)

    def start(self) -> Follower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _check(self, conn: psycopg.Connection) -> None:
        before = local_generation(self.db_path)
        held = sync(conn, self.db_path)
        if held != before:
            if self.on_switch:
                self.on_switch()
            log.info("serving published index generation %s", held)

    def _run(self) -> None:
        """Follow until stopped. Connecting (and the download it starts with) is retried by the
        one retry policy (index/retries.py: from 0.5 s, doubling with jitter to 10 s apart); a
        connection lost later starts the policy afresh."""
        policy = retrying(
            lambda e: isinstance(e, Exception),  # a bad download too: the next one may work
            retries=None,
            sleep=self._stop.wait,
            until=self._stop,
            max_backoff=10.0,
            before_sleep=lambda state: self._failed(
                state.outcome.exception() if state.outcome else None
            ),
        )
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # raised only once stopped, and said before
                policy(self._session)

    def _session(self) -> None:
        if self._stop.is_set():
            return
        with connect(self.url) as conn:
            conn.execute(f"LISTEN {INDEX_CHANNEL}")
            self._check(conn)  # anything published while we were not listening
            if self._failing:
                log.warning("index follower: reconnected to PostgreSQL")
                self._failing = False
            try:
                while not self._stop.is_set():
                    # a notification, or the poll interval: either way look for a newer one
                    for _ in conn.notifies(timeout=self.poll_seconds, stop_after=1):
                        pass
                    self._check(conn)
            except Exception as e:  # noqa: BLE001 (said by _failed)
                self._failed(e)  # the next session reconnects, its backoff from the start
                self._stop.wait(INITIAL)

    def _failed(self, error: BaseException | None) -> None:
        """Said once an outage of the database; any other failure each time, with its trace."""
        if not isinstance(error, (FleetError, *POOL_ERRORS)):
            log.error("index follower failed; retrying", exc_info=error)
        elif not self._failing:
            log.warning("index follower: %s; serving the current index, retrying", error)
        self._failing = True
