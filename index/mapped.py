"""Opening an index for search without reading it into memory.

Per index generation, one file beside the SQLite index (`index.db.gen-7.arrays`) holds what search
needs per row as flat arrays: the embedding matrix (float32), the BM25 postings and vocabulary, each
row's intent id and section id, and the chunk ids; and the corpus's page furniture, which the
offline quoter reads (index/furniture.py: the keys of the lines on most pages and of its titles).
It is written once per generation, by the index run that makes the generation (or a replica's
sync, index/publish.py) before committing it, so the first reader of a generation finds its file
there (`write_generation`); a process that finds none, or one of an older format (an index written
by an older version), builds it (`prepare`). Every process memory-maps it: opening costs a header
read, and the operating system pages in only what queries touch, sharing
those pages between processes. Chunk records (text, title, url…) stay in SQLite and are read by
chunk id for the hits used (`Records`).

File layout: 8 bytes magic, 8 bytes header length, a JSON header (format, generation, model,
tokenizer, intent names, and each array's dtype, shape and offset), then the arrays, each aligned
to 64 bytes.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import sqlite3
import threading
from pathlib import Path

import numpy as np
import sqlite_utils

from .furniture import Counts, Furniture
from .links import DOC_URL, Anchors, section_anchor
from .search import BM25, TOKENIZER_VERSION, IndexChanged, Searcher, bm25_tokens
from .store import IndexMissing, check_model, doc_updated, open_db, record

MAGIC = b"FGARRAY1"
FORMAT = 4  # 2: the furniture arrays; 3: copies of a page counted once in them; 4: repeats
ALIGN = 64


def arrays_path(db_path: str | Path, gen: int) -> Path:
    db_path = Path(db_path)
    return db_path.with_name(f"{db_path.name}.gen-{gen}.arrays")


def write_arrays(path: Path, header: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write atomically (a temporary file renamed over): a reader sees the whole file or none, and
    it is on disk (fsync'd, its folder too) before the generation it serves is committed."""
    layout: dict[str, dict] = {}
    offset = 0
    for name, a in arrays.items():
        layout[name] = {"dtype": a.dtype.str, "shape": list(a.shape), "offset": offset}
        offset += -(-a.nbytes // ALIGN) * ALIGN
    head = json.dumps(header | {"arrays": layout}).encode()
    start = -(-(16 + len(head)) // ALIGN) * ALIGN
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        # private like the index (0600): the vocabulary and vectors come from the docs
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(MAGIC + len(head).to_bytes(8, "little") + head)
            for name, a in arrays.items():
                f.seek(start + layout[name]["offset"])
                f.write(np.ascontiguousarray(a).data)
            f.truncate(start + offset)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def read_arrays(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and read-only arrays mapped from the file (nothing is copied)."""
    with open(path, "rb") as f:
        if f.read(8) != MAGIC:
            raise ValueError(f"{path} is not an arrays file")
        size = int.from_bytes(f.read(8), "little")
        head = json.loads(f.read(size))
        start = -(-(16 + size) // ALIGN) * ALIGN
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    arrays = {}
    for name, spec in head.pop("arrays").items():
        dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
        count = int(np.prod(shape))
        arrays[name] = (
            np.frombuffer(mm, dtype=dtype, count=count, offset=start + spec["offset"]).reshape(
                shape
            )
            if count
            else np.zeros(shape, dtype=dtype)
        )
    return head, arrays


# What a question reads of one chunk's text (and search text): ten times the chunker's largest
# chunk (2,000 characters and its overlap), so every chunk it makes is read whole, while a chunk
# it could not split (an index holding one 50 MB code block) costs a question no more than this.
# Quotes are checked against what was read: they stay exact.
CHUNK_READ_CHARS = 20_000


class Records:
    """Chunk records read from the SQLite index by chunk id, for the hits used: one query for a
    list of rows, through `db` (the process's index, a connection per thread: index.store
    .PerThread), each with its section's `anchor` on its page (`repeats`: the arrays')."""

    def __init__(self, db: sqlite_utils.Database, ids: np.ndarray, repeats: np.ndarray):
        self.ids, self.repeats = ids, repeats
        self._db = db
        self._updated = doc_updated(db.conn)

    def __call__(self, rows: list[int]) -> list[dict]:
        ids = [self.ids[r].decode() for r in rows]
        found = self._db.execute(
            f"""SELECT c.id, c.doc, c.heading_path, substr(c.text, 1, {CHUNK_READ_CHARS}),
                       substr(c.search_text, 1, {CHUNK_READ_CHARS}), c.start, c."end",
                       d.title, d.intent, {DOC_URL}, {self._updated}
                FROM chunks c JOIN docs d ON d.path = c.doc
                WHERE c.id IN ({",".join("?" * len(ids))})""",
            ids,
        ).fetchall()
        by_id = {row[0]: record(row) for row in found}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise IndexChanged(
                f"chunk {missing[0]} left the index while answering (a reindex committed): "
                "ask again"
            )
        return [
            by_id[i] | {"anchor": section_anchor(by_id[i]["heading_path"], int(self.repeats[r]))}
            for i, r in zip(ids, rows, strict=True)
        ]

    def docs(self) -> list[str]:
        """Each row's doc path ("" for a chunk a reindex removed since), for scopes by folder."""
        doc_of = dict(self._db.execute("SELECT id, doc FROM chunks").fetchall())
        return [doc_of.get(i.decode(), "") for i in self.ids]


def _meta(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def build(conn: sqlite3.Connection, meta: dict[str, str]) -> tuple[dict, dict[str, np.ndarray]]:
    """The arrays of the index as `conn` sees it (call inside one read transaction), streamed
    from SQLite: rows in (doc, chunk order), as `store.load_chunks` orders them."""
    model = meta["embed_model"]
    (n,) = conn.execute("SELECT count(*) FROM chunks c JOIN docs d ON d.path = c.doc").fetchone()
    (dim,) = conn.execute(
        """SELECT length(e.vector) / 4 FROM chunks c
           JOIN embeddings e ON e.text_hash = c.text_hash AND e.model = ? LIMIT 1""",
        [model],
    ).fetchone() or (0,)
    vectors = np.zeros((n, dim), dtype=np.float32)
    ids: list[bytes] = []
    intent_of: dict[str, int] = {}
    intents = np.zeros(n, dtype=np.int32)
    section_of: dict[tuple[str, str], int] = {}
    sections = np.zeros(n, dtype=np.int32)
    # each section's heading: how many earlier headings of its page share its slug
    anchors, repeat_of = Anchors(), dict[int, int]()
    repeats = np.zeros(n, dtype=np.int32)
    furniture = Counts()

    def rows():
        cursor = conn.execute(
            """SELECT c.id, c.doc, c.heading_path, c.search_text, d.intent, e.vector, c.text,
                      c.start, d.title
               FROM chunks c JOIN docs d ON d.path = c.doc
               LEFT JOIN embeddings e ON e.text_hash = c.text_hash AND e.model = ?
               ORDER BY c.doc, c.ord""",
            [model],
        )
        for i, row in enumerate(cursor):
            cid, doc, path, search_text, intent, blob, text, start, title = row
            ids.append(cid.encode())
            intents[i] = intent_of.setdefault(intent, len(intent_of))
            sections[i] = section_of.setdefault((doc, path), len(section_of))
            headings = json.loads(path)
            if sections[i] not in repeat_of:
                repeat_of[sections[i]] = anchors.repeat(doc, headings)
            repeats[i] = repeat_of[sections[i]]
            furniture.add(doc, title, headings, text, start)
            if blob is not None:
                vectors[i] = np.frombuffer(blob, dtype=np.float32)
            yield bm25_tokens(search_text)

    bm25 = BM25(rows())
    # intent ids in name order
    names = sorted(intent_of)
    remap = np.zeros(max(len(names), 1), dtype=np.int32)
    remap[[intent_of[x] for x in names]] = np.arange(len(names), dtype=np.int32)
    header = {
        "format": FORMAT,
        "generation": int(meta.get("generation", "0")),
        "generation_id": meta.get("generation_id"),
        "model": model,
        "tokenizer": TOKENIZER_VERSION,
        "intent_names": names,
    }
    arrays = {
        "ids": np.array(ids, dtype=f"S{max(map(len, ids), default=1)}"),
        "intent_ids": remap[intents],
        "sections": sections,
        "repeats": repeats,
        "vectors": vectors,
        **bm25.arrays(),
        **furniture.result().arrays(),
    }
    return header, arrays


def _current(head: dict, meta: dict[str, str]) -> bool:
    return (
        head.get("format") == FORMAT
        and head.get("tokenizer") == TOKENIZER_VERSION
        and head.get("generation") == int(meta.get("generation", "0"))
        and head.get("generation_id") == meta.get("generation_id")
        and head.get("model") == meta.get("embed_model")
    )


def write_generation(conn: sqlite3.Connection, db_path: str | Path, meta: dict[str, str]) -> Path:
    """Build the search arrays of the generation `meta` describes (embed_model, generation,
    generation_id) from what `conn` sees, and write its file beside the index at `db_path`:
    called before that generation is committed (OSError: the file could not be written)."""
    head, arrays = build(conn, meta)
    path = arrays_path(db_path, head["generation"])
    write_arrays(path, head, arrays)
    return path


def drop_older(db_path: str | Path, keep: Path) -> None:
    """Remove the arrays files of the index at `db_path` but `keep` (a process mapping one keeps
    its pages)."""
    db_path = Path(db_path)
    for old in db_path.parent.glob(f"{db_path.name}.gen-*.arrays"):
        if old != keep:
            with contextlib.suppress(OSError):
                old.unlink()


def prepare(
    db_path: str | Path, reader: sqlite3.Connection | None = None
) -> tuple[dict, dict[str, np.ndarray]]:
    """The current generation's header and arrays: mapped from its file, or, when there is none
    that fits (an index written by an older version, or an arrays format changed since), built
    from SQLite and written beside it (older generations' files are removed). Where the file
    cannot be written (a read-only folder), the built arrays are used from memory. `reader`: the
    process's connection to the index, which tells whether the file is current; a build reads the
    index through a connection of its own, in one read transaction."""
    db_path = Path(db_path)
    if reader is not None:
        meta = _meta(reader)
        if "embed_model" in meta:
            with contextlib.suppress(OSError, ValueError, KeyError):
                head, arrays = read_arrays(arrays_path(db_path, int(meta.get("generation", "0"))))
                if _current(head, meta):
                    return head, arrays
    conn = open_db(db_path, create=False).conn
    try:
        conn.execute("BEGIN")  # one snapshot: the generation read is the one built
        meta = _meta(conn)
        if "embed_model" not in meta:
            raise IndexMissing("The index is empty. Build it with: fieldguide index DOCS_DIR")
        path = arrays_path(db_path, int(meta.get("generation", "0")))
        with contextlib.suppress(OSError, ValueError, KeyError):
            head, arrays = read_arrays(path)
            if _current(head, meta):
                return head, arrays
        head, arrays = build(conn, meta)
    finally:
        conn.close()
    try:
        write_arrays(path, head, arrays)
    except OSError:
        return head, arrays
    drop_older(db_path, path)
    return read_arrays(path)


def open_searcher(
    db_path: str | Path, model: str | None, db: sqlite_utils.Database | None = None
) -> tuple[int, Searcher]:
    """(generation, Searcher) of the index at `db_path`; `model`: the query embedder's name, which
    must be the index's (None: no vector search). `db`: the index chunk records are read through
    (default: one opened for this Searcher)."""
    db = db if db is not None else open_db(db_path, create=False)
    head, a = prepare(db_path, db.conn)
    check_model(head["model"], model)
    vectors = a["vectors"] if model is not None and a["vectors"].shape[1] else None
    searcher = Searcher.from_arrays(
        a["intent_ids"],
        head["intent_names"],
        a["sections"],
        vectors,
        BM25.from_arrays(a),
        Records(db, a["ids"], a["repeats"]),
        Furniture.from_arrays(a),
    )
    return head["generation"], searcher
