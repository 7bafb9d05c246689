"""The SQLite index: one file, WAL, opened through sqlite-utils; this module owns its tables.

Tables: meta (key/value: embedding model, generation and its random id), docs, chunks, embeddings
(a cache keyed by the hash of the embedded text and the model), intents, runs. Their schema is
index/schema.py's `INDEX_MIGRATIONS` (sqlite-utils' Migrations, applied when the file is opened);
what the rest of fieldguide reads of them is read here (a doc's url as index/links.py says). The
audit trail shares the file and has its own tables and migrations (bot/state/sqlite.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import sqlite_utils

from .links import DOC_URL, claimed_pages
from .schema import (
    DOC_FACTS,
    FRESHNESS,
    INDEX_MIGRATIONS,
    IndexMissing,
    IndexUnreadable,
    doc_updated,
    migrate,
    refuse_newer,
    table_columns,
)

BUSY_SECONDS = 30  # how long a write waits for another's to end before "database is locked"


class ModelMismatch(Exception):
    """The index was embedded with another model than the one in use."""


class PerThread(sqlite_utils.Database):
    """sqlite-utils' Database on one SQLite file with a connection per thread, each opened on
    the thread's first use: `conn` is the calling thread's. So a thread's transaction, and each
    of sqlite-utils' read savepoints, is its own, and SQLite's locks alone order the writers,
    across threads and processes alike (`writing`). `close` closes every thread's connection.
    `read_only`: opened where nothing can be written (a read-only file, folder or volume)."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        first: sqlite3.Connection | None = None,
        read_only: bool = False,
    ):
        """`connect()` opens a thread's connection; `first`: this thread's, opened already."""
        self._connect = connect
        self._local = threading.local()
        self._opened: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._guard = threading.Lock()
        self.read_only = read_only
        super().__init__(self._open(first), execute_plugins=False)

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        return conn if conn is not None else self._open()

    @conn.setter
    def conn(self, value: sqlite3.Connection) -> None:
        self._local.conn = value

    def _open(self, conn: sqlite3.Connection | None = None) -> sqlite3.Connection:
        conn = conn if conn is not None else self._connect()
        self._local.conn = conn
        with self._guard:  # a connection of a thread that has ended goes with its thread
            for _, old in [(t, c) for t, c in self._opened if not t.is_alive()]:
                old.close()
            self._opened = [(t, c) for t, c in self._opened if t.is_alive()]
            self._opened.append((threading.current_thread(), conn))
        return conn

    def close(self) -> None:
        with self._guard:
            opened, self._opened = self._opened, []
        for _, conn in opened:
            conn.close()
        self._local = threading.local()


def open_db(path: str | Path, create: bool = True) -> PerThread:
    """The index at `path` as sqlite-utils' Database with a connection per thread (PerThread),
    the index's migrations applied. Each connection waits up to BUSY_SECONDS for another's
    write (SQLite's own busy timeout, set once as it connects).

    A new index file is created private (0600; SQLite gives its -wal and -shm files the same
    mode): it holds every question asked and who asked it. A reader (`create=False`) also opens an
    index it cannot write (`read_only_uri`): a read-only file, folder or volume (a container's
    `:ro` mount), told apart before anything is tried, or by SQLite refusing a write. A file a
    newer fieldguide wrote is refused (NewerIndex), read-only or not."""
    path = Path(path)
    if not create and not path.is_file():
        raise IndexMissing(
            f"No index at {path}. Build one with: fieldguide index DOCS_DIR --db {path}"
        )
    if not create and not writable(path):
        return _read_only(path)
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    conn = _connect(path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        migrate(sqlite_utils.Database(conn, execute_plugins=False), INDEX_MIGRATIONS, str(path))
    except sqlite3.OperationalError as e:
        conn.close()
        if create or not e.sqlite_errorname.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
            raise
        return _read_only(path)
    except BaseException:
        conn.close()
        raise
    return PerThread(lambda: _connect(path), first=conn)


def writable(path: Path) -> bool:
    """Whether this process may write the index file and make its -wal and -shm beside it: the
    file and its folder writable to it, on a volume mounted read-write (access(2) answers EROFS
    for a read-only mount, to root too)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _read_only(path: Path) -> PerThread:
    """The index opened read-only (PerThread.read_only), after the newer-fieldguide check."""
    uri = read_only_uri(path)

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=BUSY_SECONDS, check_same_thread=False)

    first = connect()
    try:
        refuse_newer(
            sqlite_utils.Database(first, execute_plugins=False), INDEX_MIGRATIONS, str(path)
        )
    except BaseException:
        first.close()
        raise
    return PerThread(connect, first=first, read_only=True)


def read_only_uri(path: str | Path) -> str:
    """The URI a read-only connection opens the index at `path` with. `mode=ro` reads it as any
    reader does, beside writers (their -shm shared); where SQLite cannot make that shared memory
    (a read-only folder or volume, and no -shm there), the file cannot change under it (nothing
    can write there) and it is read `immutable=1`, without locks or WAL. A non-empty -wal there
    holds committed changes immutable would not see: IndexUnreadable, saying so."""
    path = Path(path)
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return uri
    except sqlite3.OperationalError as e:
        if not e.sqlite_errorname.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")):
            raise
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size:
        raise IndexUnreadable(
            f"{path} is read-only and its write-ahead log ({wal.name}) holds changes not yet in"
            " it, which a reader there cannot apply: copy the index while no fieldguide has it"
            " open, or open it once where it can be written"
        )
    return uri + "&immutable=1"


def _connect(path: Path) -> sqlite3.Connection:
    # used by one thread only (PerThread); any thread may close it (PerThread.close)
    conn = sqlite3.connect(path, timeout=BUSY_SECONDS, check_same_thread=False)
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL's: durable at each checkpoint
    return conn


@contextlib.contextmanager
def writing(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """One write transaction that takes SQLite's write lock as it begins (BEGIN IMMEDIATE),
    waiting for it up to the connection's busy timeout. A deferred one (sqlite-utils' `atomic`)
    that reads before it writes (sqlite-utils reads the table's columns first) fails at once with
    "database is locked" (SQLITE_BUSY_SNAPSHOT) when another connection committed in between.
    Inside a transaction of this thread's connection already: a savepoint of it."""
    conn = db.conn
    if conn.in_transaction:
        with db.atomic():
            yield db
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        conn.rollback()
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        conn.rollback()
        raise


# what the readers below take: the process's connection (sqlite-utils) or a plain one
Reader = sqlite_utils.Database | sqlite3.Connection


def open_read_only(path: str | Path) -> sqlite3.Connection:
    """The index file as it is on disk now, read-only (a check's connection: `doctor`, /healthz,
    MCP's sections; it changes nothing, migrations included), on a read-only volume too
    (`read_only_uri`)."""
    return sqlite3.connect(read_only_uri(path), uri=True)


def generation_on_disk(path: str | Path) -> int:
    """The generation the index file on disk holds, read afresh (/healthz: a running bot's own
    connection would not notice the file gone or damaged). The main file's header and schema are
    read first as they are on disk (immutable: no lock, no write-ahead log), so a file damaged
    there is told even while the log still holds its first pages. Through SQLite, never a plain
    open(): closing another descriptor of the file would drop this process's SQLite locks."""
    uri = Path(path).resolve().as_uri()
    with closing(sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)) as conn:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    with closing(open_read_only(path)) as conn:
        return int(get_meta(conn, "generation", "0") or 0)


def examine(conn: Reader) -> dict:
    """What `fieldguide doctor` reports of an index: {"integrity" ("ok" or SQLite's finding),
    "meta", "docs", "chunks", "last_run" ((status, finished) or None), "shared" (the pages two
    or more docs claim: `claimed_pages`)}."""
    docs, chunks = counts(conn)
    return {
        "shared": claimed_pages(conn),
        "integrity": conn.execute("PRAGMA integrity_check").fetchone()[0],
        "meta": dict(conn.execute("SELECT key, value FROM meta").fetchall()),
        "docs": docs,
        "chunks": chunks,
        "last_run": conn.execute(
            "SELECT status, finished FROM runs ORDER BY id DESC LIMIT 1"
        ).fetchone(),
    }


def counts(conn: Reader) -> tuple[int, int]:
    """(docs, chunks) in the index."""
    row = conn.execute("SELECT (SELECT count(*) FROM docs), (SELECT count(*) FROM chunks)")
    docs, chunks = row.fetchone()
    return int(docs), int(chunks)


def doc_intents(conn: Reader) -> list[tuple[str, str]]:
    """(path, intent) of every doc."""
    return [(path, intent) for path, intent in conn.execute("SELECT path, intent FROM docs")]


def doc_chunk_counts(conn: Reader) -> list[tuple[str, str, int]]:
    """(path, intent, chunks) of every doc."""
    return conn.execute(
        "SELECT d.path, d.intent, count(c.id) FROM docs d LEFT JOIN chunks c ON c.doc = d.path"
        " GROUP BY d.path"
    ).fetchall()


@contextlib.contextmanager
def read_snapshot(path: str | Path) -> Iterator[sqlite3.Connection]:
    """The index file read-only, in one read transaction: every read sees one generation,
    whatever a reindex commits meanwhile (`fieldguide mcp`'s sections)."""
    with closing(open_read_only(path)) as conn:
        conn.execute("BEGIN")
        yield conn


def chunk_place(conn: Reader, chunk_id: str) -> tuple[str, str] | None:
    """(doc, heading_path JSON) of a chunk; None when the index has no such chunk."""
    row = conn.execute("SELECT doc, heading_path FROM chunks WHERE id = ?", [chunk_id]).fetchone()
    return (row[0], row[1]) if row else None


def doc_urls(conn: Reader) -> list[tuple[str, str | None]]:
    """(path, front-matter url as readers take it: DOC_URL) of every doc."""
    return [(path, url) for path, url in conn.execute(f"SELECT d.path, {DOC_URL} FROM docs d")]


def doc_sections(conn: Reader, doc: str) -> list[str]:
    """The heading paths (JSON) of a doc's sections, in the doc's order."""
    return [
        path
        for (path,) in conn.execute(
            "SELECT heading_path FROM chunks WHERE doc = ? GROUP BY heading_path ORDER BY min(ord)",
            [doc],
        )
    ]


def all_sections(conn: Reader) -> list[tuple[str, str, str, str, str | None]]:
    """(doc, heading_path JSON, title, intent, url) of every section, in doc order."""
    return conn.execute(
        f"""SELECT c.doc, c.heading_path, d.title, d.intent, {DOC_URL} FROM chunks c
           JOIN docs d ON d.path = c.doc GROUP BY c.doc, c.heading_path
           ORDER BY c.doc, min(c.ord)"""
    ).fetchall()


def section_chunks(conn: Reader, doc: str, heading_path: str, limit: int) -> Iterator[tuple]:
    """(id, text's first `limit` characters, text's length, title, intent, url) of each chunk
    of a section, in order: a huge chunk is never read whole."""
    yield from conn.execute(
        f"""SELECT c.id, substr(c.text, 1, ?), length(c.text), d.title, d.intent, {DOC_URL}
           FROM chunks c JOIN docs d ON d.path = c.doc
           WHERE c.doc = ? AND c.heading_path = ? ORDER BY c.ord""",
        [limit, doc, heading_path],
    )


def last_runs(db: sqlite_utils.Database, limit: int = 5) -> list[dict]:
    """The index runs, newest first."""
    return [dict(r) for r in db.query("SELECT * FROM runs ORDER BY id DESC LIMIT ?", [limit])]


def record_failed_pull(db: sqlite_utils.Database, root: str, error: str) -> None:
    """A docs source that could not be pulled, as a failed run (of the index's own model: nothing
    was embedded): one row per streak of failures, its `finished` and `error` brought up to the
    latest try, its `started` saying since when (`run_status`)."""
    model = get_meta(db, "embed_model", "")
    with writing(db):
        last = db.execute("SELECT id, status, added FROM runs ORDER BY id DESC LIMIT 1")
        row = last.fetchone()
        now = utc_now()
        if row and row[1] == "failed" and row[2] is None:  # the streak's row: a pull's
            db.execute("UPDATE runs SET finished = ?, error = ? WHERE id = ?", [now, error, row[0]])
        else:
            db.execute(
                "INSERT INTO runs (started, finished, status, docs_root, model, error)"
                " VALUES (?, ?, 'failed', ?, ?, ?)",
                [now, now, root, model, error],
            )


def run_status(db: sqlite_utils.Database) -> dict | None:
    """The last run (None: never run), with `failing_since` (when its streak of failures began;
    None after a good run) and `last_ok` (the last good run's end; None: never)."""
    runs = last_runs(db, 1)
    if not runs:
        return None
    (last_ok,) = db.execute("SELECT max(finished) FROM runs WHERE status = 'ok'").fetchone()
    (since,) = db.execute(
        """SELECT min(started) FROM runs WHERE status = 'failed'
           AND id > (SELECT coalesce(max(id), 0) FROM runs WHERE status = 'ok')"""
    ).fetchone()
    return runs[0] | {"failing_since": since, "last_ok": last_ok}


def get_meta(db: Reader, key: str, default: str | None = None) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else default


def set_meta(db: sqlite_utils.Database, **values) -> None:
    db.table("meta").upsert_all([{"key": k, "value": str(v)} for k, v in values.items()], pk="key")


def utc_now() -> str:
    """The time as stored in the index and audit tables: UTC ISO 8601, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def vector_blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=np.float32).tobytes()


def generation(db: sqlite_utils.Database) -> int:
    """Bumped by every committed index run: readers reload when it changes."""
    value = get_meta(db, "generation", "0")
    assert value is not None  # set_meta stores str(v); a missing row gives the default
    return int(value)


def check_model(indexed_model: str, model: str | None) -> None:
    """Refuse a query embedder other than the index's (None: no vector search, nothing to check)."""
    if model is not None and model != indexed_model:
        raise ModelMismatch(
            f"This index was embedded with {indexed_model}, but the embedder in use is {model}. "
            "Reindex with the current settings (fieldguide index DOCS_DIR)"
            " or restore the old ones."
        )


def record(row: tuple) -> dict:
    """A chunk's record from (id, doc, heading_path JSON, text, search_text, start, end, title,
    intent, url, updated): `updated` is the doc's last change (UTC ISO 8601, or None)."""
    cid, doc, path, text, search_text, start, end, title, intent, url, updated = row
    return {
        "id": cid,
        "doc": doc,
        "heading_path": json.loads(path),
        "text": text,
        "search_text": search_text,
        "start": start,
        "end": end,
        "title": title,
        "intent": intent,
        "url": url,
        "updated": updated,
    }


def load_chunks(
    db: sqlite_utils.Database, model: str | None
) -> tuple[list[dict], np.ndarray | None]:
    """Every chunk of the current index, in a stable order, with its doc's fields and (when `model`
    is given) its embedding as one row of a contiguous float32 matrix."""
    indexed_model = get_meta(db, "embed_model")
    if indexed_model is None:
        raise IndexMissing("The index is empty. Build it with: fieldguide index DOCS_DIR")
    check_model(indexed_model, model)
    # each doc's fields once, shared by its chunks: read per chunk row, a long field (an index
    # written before names were checked holds 100,000-character intents) would be copied into
    # every chunk's record
    docs = {
        path: (path, title, intent, url, updated)
        for path, title, intent, url, updated in db.execute(
            f"SELECT path, title, intent, {DOC_URL}, {doc_updated(db.conn)} FROM docs d"
        )
    }
    count = db.execute("SELECT count(*) FROM chunks WHERE doc IN (SELECT path FROM docs)")
    n = count.fetchone()[0]
    rows = db.execute(  # iterated, not fetched whole
        """SELECT c.id, c.doc, c.heading_path, c.text, c.search_text, c.start, c."end", e.vector
           FROM chunks c JOIN docs d ON d.path = c.doc
           LEFT JOIN embeddings e ON e.text_hash = c.text_hash AND e.model = ?
           ORDER BY c.doc, c.ord""",
        [indexed_model],
    )
    records = []
    vectors = None
    for i, (cid, doc, path, text, search_text, start, end, blob) in enumerate(rows):
        doc_path, title, intent, url, updated = docs[doc]
        fields = (cid, doc_path, path, text, search_text, start, end, title, intent, url, updated)
        records.append(record(fields))
        if model is not None and blob is not None:
            if vectors is None:
                vectors = np.zeros((n, len(blob) // 4), dtype=np.float32)
            vectors[i] = np.frombuffer(blob, dtype=np.float32)
    return records, vectors


def chunk_headings(db: sqlite_utils.Database) -> Iterator[dict]:
    """Each chunk's doc, intent, doc title and heading path (what router.describe.intent_headings
    reads), streamed rather than loaded."""
    for doc, intent, title, path in db.execute(
        "SELECT d.path, d.intent, d.title, c.heading_path FROM chunks c"
        " JOIN docs d ON d.path = c.doc"
    ):
        yield {"doc": doc, "intent": intent, "title": title, "heading_path": json.loads(path)}


# intents.yaml's example questions are embedded as queries (input_type "query") by the index run
# and kept in `embeddings` beside the chunks' vectors, under the hash of this prefix and the
# question: a question embedded as a query is never taken for the same text embedded as a passage.
QUERY_PREFIX = "query\n"


def example_key(question: str) -> str:
    import hashlib

    return hashlib.sha256((QUERY_PREFIX + question).encode("utf-8")).hexdigest()


def example_vectors(db: Reader, intents: list[dict], model: str) -> dict[str, np.ndarray]:
    """intent → the stored query embeddings of its example questions (rows), by `model`; an
    example the index run did not embed (an index built before, or Voyage down then) is left
    out: nothing is embedded here, at question time."""
    keys = {example_key(q) for i in intents for q in i["examples"]}
    if not keys:
        return {}
    found: dict[str, np.ndarray] = {}
    listed = sorted(keys)
    for s in range(0, len(listed), 500):
        part = listed[s : s + 500]
        for h, blob in db.execute(
            "SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN"
            f" ({','.join('?' * len(part))})",
            [model, *part],
        ):
            found[h] = np.frombuffer(blob, dtype=np.float32)
    out = {}
    for i in intents:
        rows = [found[k] for k in map(example_key, i["examples"]) if k in found]
        if rows:
            out[i["name"]] = np.vstack(rows)
    return out


def load_intents(db: Reader) -> list[dict]:
    out = []
    for row in db.execute(
        "SELECT name, description, examples, docs, chunks, owner FROM intents ORDER BY name"
    ):
        out.append(
            {
                "name": row[0],
                "description": row[1] or "",
                "examples": json.loads(row[2] or "[]"),
                "docs": row[3],
                "chunks": row[4],
                "owner": row[5] or "",
            }
        )
    return out


def load_owners(
    db: sqlite_utils.Database, doc_owners: bool = False
) -> tuple[dict[str, str], dict[str, str]]:
    """({doc path: owner}, {intent: owner}): the owners intents.yaml names, and those named in a
    doc's front matter only with `doc_owners` (FIELDGUIDE_DOC_OWNERS=on: whoever can commit a doc
    may then receive the questions about it; never its intent's)."""
    docs: dict[str, str] = {}
    if doc_owners:
        docs = dict(
            db.execute("SELECT path, owner FROM docs WHERE owner IS NOT NULL AND owner != ''")
        )
    intents = dict(
        db.execute("SELECT name, owner FROM intents WHERE owner IS NOT NULL AND owner != ''")
    )
    return docs, intents


def owner_of(
    owners: tuple[dict[str, str], dict[str, str]], doc: str | None, intent: str | None
) -> str:
    """The owner of a doc: its own (front matter), else its intent's (intents.yaml); "" if none."""
    return owners[0].get(doc or "") or owners[1].get(intent or "") or ""


def doc_records(db: Reader) -> list[dict]:
    """Every doc with what the owners' loop reads of it: path, title, intent, url, updated, owner
    (front matter), codeowner, author, reviewed, review_every, watches (list) and watched
    ({path: last change})."""
    have = table_columns(db.conn if isinstance(db, sqlite_utils.Database) else db, "docs")
    columns = ["path", "title", "intent", "url", "updated", "owner", *FRESHNESS, *DOC_FACTS]
    shown = ", ".join(c if c in have else f"NULL AS {c}" for c in columns)
    out = []
    for row in db.execute(f"SELECT {shown} FROM docs ORDER BY path"):
        d = dict(zip(columns, row, strict=True))
        d["watches"] = json.loads(d["watches"] or "[]")
        d["watched"] = json.loads(d["watched"] or "null")
        out.append(d)
    return out


def load_related(db: sqlite_utils.Database) -> dict[str, set[str]]:
    """intent -> the related_intents its docs declare."""
    related: dict[str, set[str]] = {}
    for intent, rel in db.execute("SELECT intent, related_intents FROM docs"):
        related.setdefault(intent, set()).update(json.loads(rel or "[]"))
    return related
