"""One incremental index run: read the folder, chunk what changed, embed only text never embedded
with this model, then swap the new state in with a single transaction.

Embeddings are written as they are computed (they are a cache, invisible to readers), so a run that
fails or is killed keeps them and the next run resumes cheaply; docs, chunks and intents change in
one transaction at the end, so readers see either the previous index or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .chunker import Chunk, chunk_doc
from .embedders import Embedder, EmbeddingError
from .gitsource import doc_dates
from .links import share_urls
from .loader import (
    INTENT,
    MAX_DOC_BYTES,
    Doc,
    DocError,
    content_hash,
    load_intents_yaml,
    parse_doc,
    walk_docs,
)
from .mapped import arrays_path, drop_older, prepare, write_generation
from .rows import (
    INTENT_ROWS,
    chunk_rows,
    doc_rows,
    intent_rows,
    refresh_intents,
    text_hash,
    unknown_related,
)
from .schema import DOC_FACTS
from .store import (
    BUSY_SECONDS,
    example_key,
    generation,
    get_meta,
    load_intents,
    open_db,
    set_meta,
    utc_now,
    vector_blob,
    writing,
)
from .store import last_runs as store_last_runs
from .store import record_failed_pull as store_failed_pull
from .store import run_status as store_run_status


class SharedVectors(Protocol):
    """An embedding cache shared by several machines (index/publish.py's VectorCache)."""

    def fetch(self, model: str, hashes: list[str]) -> dict[str, bytes]: ...

    def store(self, model: str, vectors: dict[str, bytes]) -> None: ...


class IndexError_(Exception):
    """The run cannot start or finish; the message is fit to show a user."""


class SourceMismatch(IndexError_):
    """The index was built from other docs than the ones given: indexing them would swap its docs
    for others."""

    def __init__(self, indexed: str, given: str):
        self.indexed, self.given = indexed, given
        super().__init__(
            f"This index was built from {indexed}; indexing {given} into it would replace its"
            " docs with those. Pass --replace to swap sources, or use another index (--db)"
        )


class SourceUnreachable(IndexError_):
    """A git docs source could not be pulled; the index is left as it was."""


def folder_source(root: str | Path) -> str:
    """What an index built from a folder remembers as its source: the folder's absolute path."""
    return str(Path(root).expanduser().resolve())


def indexed_source(db_path: str | Path) -> str | None:
    """The docs source the index at `db_path` was built from (None: no index, or one built before
    sources were recorded)."""
    if not Path(db_path).is_file():
        return None
    db = open_db(db_path, create=False)
    try:
        return get_meta(db, "docs_source")
    finally:
        db.conn.close()


def check_source(db_path: str | Path, source: str, replace: bool = False) -> None:
    """SourceMismatch when the index at `db_path` was built from another source than `source`
    (and `replace` is not given). An index that never recorded its source takes this one."""
    indexed = indexed_source(db_path)
    if indexed is not None and indexed != source and not replace:
        raise SourceMismatch(indexed, source)


@dataclass
class RunSummary:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}
    warnings: list[dict] = field(default_factory=list)  # {"path", "warning"}: indexed all the same
    chunks: int = 0  # chunks in the index after the run
    embedded: int = 0  # texts sent to the embedder in this run
    seconds: float = 0.0
    model: str = ""

    def counts(self) -> dict:
        return {
            "added": len(self.added),
            "changed": len(self.changed),
            "removed": len(self.removed),
            "unchanged": len(self.unchanged),
            "skipped": self.skipped,
            "warnings": self.warnings,
            "chunks": self.chunks,
            "embedded": self.embedded,
            "seconds": round(self.seconds, 3),
            "model": self.model,
        }


def index_folder(
    db_path: str | Path,
    root: str | Path,
    embedder: Embedder,
    max_chars: int = 2000,
    on_embed_start: Callable[[int], None] | None = None,
    on_embedded: Callable[[int], None] | None = None,
    embed_batch: int = 256,
    shared: SharedVectors | None = None,
    source: str | None = None,
    replace: bool = False,
    dated: Callable[[list[str]], dict[str, str]] | None = None,
    max_doc_bytes: int = MAX_DOC_BYTES,
) -> RunSummary:
    """Bring the index at `db_path` up to date with the markdown under `root`.

    `on_embed_start(n)` is called once with the number of texts to embed, `on_embedded(k)` after
    each batch: the CLI draws its progress bar and the Slack command its progress messages from
    them. Embeddings are committed to the cache every `embed_batch` texts. `shared` is a fleet's
    embedding cache: texts another machine embedded are taken from it, new ones are added to it.

    `source` names where the docs come from (default: `root`'s absolute path); the index
    remembers it and refuses another (SourceMismatch) unless `replace`. `dated(paths)` gives the
    last change (UTC ISO 8601) of the docs at those paths (default: git's commit date when `root`
    is in a git working copy, else the file's time); it is asked for new and changed docs.
    A file over `max_doc_bytes` is skipped unread, with the reason (its earlier version, if any,
    stays).
    """
    t0 = time.perf_counter()
    root = Path(root)
    if not root.is_dir():
        raise IndexError_(f"Docs folder not found: {root}")
    walked = walk_docs(root)
    files = walked.files
    if not files:
        raise IndexError_(f"No markdown files (*.md, *.markdown) under {root}")

    source = source or folder_source(root)
    check_source(db_path, source, replace)
    db = open_db(db_path)
    started = utc_now()
    staged: Staged | None = None
    summary = RunSummary(model=embedder.name, skipped=list(walked.skipped))
    old_hashes, fresh, present = _read_changed(db, root, files, summary, max_chars, max_doc_bytes)
    summary.removed = sorted(set(old_hashes) - present)
    try:
        intents_info = load_intents_yaml(root)
    except DocError as e:
        summary.skipped.append(
            {"path": "intents.yaml", "reason": str(e).removeprefix("intents.yaml: ")}
        )
        intents_info = None

    replaced = {d.path for d, _ in fresh} | set(summary.removed)
    undated = [
        p
        for (p,) in db.execute("SELECT path FROM docs WHERE updated IS NULL")
        if p in present and p not in replaced
    ]
    dates = (dated or (lambda paths: doc_dates(root, paths)))([d.path for d, _ in fresh] + undated)
    facts, facts_changed = _doc_facts(db, root, fresh, present - set(summary.removed))
    try:
        summary.embedded = _embed_missing(
            db, embedder, fresh, replaced, on_embed_start, on_embedded, embed_batch, shared
        )
        examples, warnings = _embed_examples(db, embedder, intents_info)
        summary.warnings += warnings
        staged = _stage(
            db_path, fresh, replaced, intents_info, embedder.name, examples or facts_changed
        )
        with writing(db):
            _commit(
                db,
                fresh,
                replaced,
                summary.removed,
                intents_info,
                embedder.name,
                dates,
                examples or facts_changed,
                staged,
                db_path,
            )
            _write_facts(db, facts)
            set_meta(db, docs_source=source)
            for path in undated:  # docs indexed before their last change was recorded
                db.execute("UPDATE docs SET updated = ? WHERE path = ?", [dates.get(path), path])
            summary.chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
            summary.warnings = (
                [{"path": d.path, "warning": w} for d, _ in fresh for w in d.warnings]
                + unknown_related(db)
                + share_urls(db)
            )
            summary.seconds = time.perf_counter() - t0
            _record_run(db, started, root, summary, "ok")
        current = arrays_path(db_path, generation(db))
    except BaseException as e:
        summary.seconds = time.perf_counter() - t0
        if staged is not None and staged.arrays is not None:  # never published
            staged.arrays.unlink(missing_ok=True)
        # the original error is the one worth reporting
        with contextlib.suppress(Exception):
            _record_run(db, started, root, summary, "failed", error=f"{type(e).__name__}: {e}")
        raise
    finally:
        db.conn.close()
    if current.is_file():
        drop_older(db_path, current)
    else:  # an index written by an older version, which this run did not change: its arrays now
        with contextlib.suppress(OSError, sqlite3.Error):
            prepare(db_path)
    return summary


def _doc_facts(db, root: Path, fresh, present: set[str]) -> tuple[dict[str, dict], bool]:
    """Each present doc's owners and watched paths' changes (index/ownership.py), and whether
    they differ from what the index holds (a new generation then carries them to a fleet)."""
    from .ownership import doc_facts

    stored = {
        r["path"]: r
        for r in (
            dict(zip(("path", "watches", *DOC_FACTS), row, strict=True))
            for row in db.execute(f"SELECT path, watches, {', '.join(DOC_FACTS)} FROM docs")
        )
    }
    watches = {p: json.loads((stored.get(p) or {}).get("watches") or "[]") for p in present}
    watches |= {d.path: d.watches for d, _ in fresh}
    facts = doc_facts(root, watches)
    changed = any(
        [(stored.get(p) or {}).get(k) for k in DOC_FACTS]
        != [f[k] if k != "watched" or f[k] is None else json.dumps(f[k]) for k in DOC_FACTS]
        for p, f in facts.items()
    )
    return facts, changed


def _write_facts(db, facts: dict[str, dict]) -> None:
    db.conn.executemany(
        f"UPDATE docs SET {', '.join(f'{k} = ?' for k in DOC_FACTS)} WHERE path = ?",
        [
            (f["codeowner"], f["author"], json.dumps(f["watched"]) if f["watched"] else None, p)
            for p, f in facts.items()
        ],
    )


@dataclass
class Staged:
    """The generation an index run is about to commit, read before its write transaction
    (`_stage`): `base`, the (generation, generation_id) it was read from; `meta`, the new
    generation's (None: the run changes nothing); `arrays`, its search arrays' file, written."""

    base: tuple[str, str | None]
    meta: dict[str, str] | None = None
    arrays: Path | None = None


def _stage(
    db_path, fresh, replaced: set[str], intents_info, model: str, other_changes: int
) -> Staged:
    """The index as this run's commit will leave it, read on a connection of its own: the
    committed index with this run's docs and chunks in place of the ones it replaces (temporary
    tables and views, which take no lock on the index). When that is a new generation, its search
    arrays are written now: before the commit publishes it, so that no question waits for them or
    builds them, and without holding the index's write lock while they are built (the audit
    trail and Slack's event claims write on meanwhile)."""
    conn = sqlite3.connect(db_path, timeout=BUSY_SECONDS)
    try:
        conn.execute("BEGIN")  # one snapshot
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        staged = Staged((meta.get("generation", "0"), meta.get("generation_id")))
        conn.execute("CREATE TEMP TABLE gone (path TEXT PRIMARY KEY)")
        conn.executemany("INSERT INTO gone VALUES (?)", [(p,) for p in replaced])
        rows = {"docs": iter(doc_rows(fresh, {})), "chunks": chunk_rows(fresh)}
        for table, key in (("docs", "path"), ("chunks", "doc")):
            # the view shadows the index's table of the same name on this connection only
            conn.execute(f"CREATE TEMP TABLE new_{table} AS SELECT * FROM main.{table} WHERE 0")
            if (first := next(rows[table], None)) is not None:
                quoted = ", ".join(f'"{n}"' for n in first)
                conn.executemany(
                    f"INSERT INTO new_{table} ({quoted}) VALUES ({', '.join('?' * len(first))})",
                    (list(r.values()) for r in itertools.chain([first], rows[table])),
                )
            conn.execute(
                f"CREATE TEMP VIEW {table} AS SELECT * FROM main.{table}"
                f" WHERE {key} NOT IN (SELECT path FROM gone) UNION ALL SELECT * FROM new_{table}"
            )
        before = conn.execute(INTENT_ROWS).fetchall()
        if not (
            fresh
            or replaced
            or other_changes  # example questions embedded, owners or watched paths changed
            or meta.get("embed_model") != model
            or intent_rows(conn, intents_info, before) != before
        ):
            return staged
        # readers (a running bot) reload only when the index really changed; the random id tells
        # this generation from another index's with the same number (index/mapped.py)
        staged.meta = {
            "embed_model": model,
            "generation": str(int(staged.base[0]) + 1),
            "generation_id": uuid.uuid4().hex,
        }
        staged.arrays = arrays_path(db_path, int(staged.meta["generation"]))
        _write_arrays(conn, db_path, staged.meta)
        return staged
    finally:
        conn.close()


def _write_arrays(conn: sqlite3.Connection, db_path, meta: dict[str, str]) -> None:
    """The search arrays of the generation `meta` describes, as `conn` sees the index (before it
    is committed); a file that cannot be written fails the run, the index unchanged."""
    try:
        write_generation(conn, db_path, meta)
    except OSError as e:
        raise IndexError_(
            f"writing the search arrays beside {db_path} failed ({e.strerror or e}; a full disk?):"
            " the index is unchanged"
        ) from e


def _read_changed(
    db, root: Path, files: list[Path], summary: RunSummary, max_chars: int, max_bytes: int
):
    """Read every file; parse and chunk the new and changed ones. Returns (the stored hashes by
    path, [(doc, chunks)] to write, the paths still present)."""
    old_hashes = {}
    # docs an older version stored with an intent that is no longer valid (a 100,000-character
    # one): parsed again, and dropped from the index when they are still invalid
    stale = set()
    for path, hash_, intent in db.execute("SELECT path, hash, intent FROM docs"):
        old_hashes[path] = hash_
        if not INTENT.fullmatch(intent or ""):
            stale.add(path)
    fresh: list[tuple[Doc, list[Chunk]]] = []
    present = set()
    for path in files:
        rel = path.relative_to(root).as_posix()
        present.add(rel)
        try:
            if (size := path.stat().st_size) > max_bytes:  # never read: it would hold the run up
                summary.skipped.append({"path": rel, "reason": too_large(size, max_bytes)})
                continue
            data = path.read_bytes()
        except OSError as e:
            summary.skipped.append({"path": rel, "reason": f"cannot read: {e.strerror}"})
            continue
        if old_hashes.get(rel) == content_hash(data) and rel not in stale:
            summary.unchanged.append(rel)
            continue
        try:
            doc = parse_doc(rel, data)
        except DocError as e:
            # an earlier good version of this file, if any, stays in the index
            summary.skipped.append({"path": rel, "reason": str(e)})
            if rel in stale:
                present.discard(rel)
            continue
        chunks = chunk_doc(doc, max_chars)
        if not chunks:
            summary.skipped.append({"path": rel, "reason": "no text under any heading"})
            continue
        (summary.changed if rel in old_hashes else summary.added).append(rel)
        fresh.append((doc, chunks))
    return old_hashes, fresh, present


def too_large(size: int, cap: int) -> str:
    mb = 1024 * 1024
    return f"{size / mb:.1f} MB, over the {cap / mb:g} MB cap on a doc (FIELDGUIDE_MAX_DOC_MB)"


def _embed_missing(
    db,
    embedder: Embedder,
    fresh,
    replaced: set[str],
    on_start,
    on_embedded,
    batch_size: int,
    shared: SharedVectors | None = None,
) -> int:
    needed: dict[str, str] = {}
    for _, chunks in fresh:
        for c in chunks:
            needed[text_hash(c.search_text)] = c.search_text
    kept = db.execute(
        f"""SELECT c.text_hash, c.search_text FROM chunks c
            LEFT JOIN embeddings e ON e.text_hash = c.text_hash AND e.model = ?
            WHERE e.text_hash IS NULL AND c.doc NOT IN ({",".join("?" * len(replaced))})""",
        [embedder.name, *replaced],
    )
    needed.update(dict(kept.fetchall()))
    have = {
        h
        for (h,) in db.execute("SELECT text_hash FROM embeddings WHERE model = ?", [embedder.name])
    }
    missing = [(h, t) for h, t in needed.items() if h not in have]
    if shared is not None and missing:
        pulled = shared.fetch(embedder.name, [h for h, _ in missing])
        _save_vectors(db, embedder.name, pulled)
        missing = [(h, t) for h, t in missing if h not in pulled]
    if on_start:
        on_start(len(missing))
    for s in range(0, len(missing), batch_size):
        batch = missing[s : s + batch_size]
        vectors = embedder.embed_documents([t for _, t in batch], progress=on_embedded)
        blobs = {h: vector_blob(v) for (h, _), v in zip(batch, vectors, strict=True)}
        _save_vectors(db, embedder.name, blobs)
        if shared is not None:
            shared.store(embedder.name, blobs)
    return len(missing)


def _embed_examples(db, embedder: Embedder, intents_info) -> tuple[int, list[dict]]:
    """intents.yaml's example questions embedded as queries and stored (store.example_key), those
    not stored yet: a question never waits for them. `intents_info` None (intents.yaml unreadable
    this run): the examples already stored in the index. A failure costs only the examples (they
    sharpen the offline routing vote): a warning, and the next run tries again."""
    if intents_info is not None:
        questions = [q for i in intents_info.values() for q in i.examples]
    else:
        questions = [q for i in load_intents(db) for q in i["examples"]]
    have = {
        h
        for (h,) in db.execute("SELECT text_hash FROM embeddings WHERE model = ?", [embedder.name])
    }
    missing = list({example_key(q): q for q in questions if example_key(q) not in have}.items())
    if not missing:
        return 0, []
    try:
        vectors = embedder.embed_queries([q for _, q in missing])
    except EmbeddingError as e:
        return 0, [{"path": "intents.yaml", "warning": f"example questions not embedded: {e}"}]
    blobs = {h: vector_blob(v) for (h, _), v in zip(missing, vectors, strict=True)}
    _save_vectors(db, embedder.name, blobs)
    return len(blobs), []


def _save_vectors(db, model: str, blobs: dict[str, bytes]) -> None:
    with writing(db):
        db["embeddings"].upsert_all(
            ({"text_hash": h, "model": model, "vector": b} for h, b in blobs.items()),
            pk=("text_hash", "model"),
        )


def _commit(
    db,
    fresh,
    replaced: set[str],
    removed: list[str],
    intents_info,
    model: str,
    dates: dict,
    other_changes: int,
    staged: Staged,
    db_path: str | Path,
) -> None:
    for path in replaced:
        db.execute("DELETE FROM chunks WHERE doc = ?", [path])
    for path in removed:
        db.execute("DELETE FROM docs WHERE path = ?", [path])
    db["docs"].upsert_all(doc_rows(fresh, dates), pk="path")
    db["chunks"].insert_all(chunk_rows(fresh), pk="id")
    intents_changed = refresh_intents(db, intents_info)
    db.execute("DROP TABLE IF EXISTS bm25_cache")  # BM25 postings cached before index/mapped.py
    if (get_meta(db, "generation", "0"), get_meta(db, "generation_id")) == staged.base:
        if staged.meta is not None:
            set_meta(db, **staged.meta)  # a new generation, its search arrays written (_stage)
        return
    # another run committed since this one's stage was read: the same, decided and built here
    # newly embedded example questions are a new generation too: a running bot reads them on load
    if fresh or removed or intents_changed or other_changes or get_meta(db, "embed_model") != model:
        set_meta(
            db, embed_model=model, generation=generation(db) + 1, generation_id=uuid.uuid4().hex
        )
        _write_arrays(db.conn, db_path, dict(db.execute("SELECT key, value FROM meta").fetchall()))


def _record_run(
    db, started: str, root: Path, summary: RunSummary, status: str, error: str | None = None
) -> None:
    row = summary.counts()
    row.pop("model")
    row.update(
        started=started,
        finished=utc_now(),
        status=status,
        docs_root=str(root),
        model=summary.model,
        skipped=json.dumps(summary.skipped),
        warnings=json.dumps(summary.warnings),
        error=error,
    )
    db["runs"].insert(row, alter=True)  # an index made before `warnings` existed gains it


def record_failed_pull(db_path: str | Path, root: Path, error: str) -> None:
    """A docs source that could not be pulled, as a failed run of the index at `db_path` (if it
    exists and can be written; store.record_failed_pull on a connection of its own)."""
    if not Path(db_path).is_file():
        return
    with contextlib.suppress(sqlite3.Error):
        db = open_db(db_path)
        try:
            store_failed_pull(db, str(root), error)
        finally:
            db.conn.close()


def run_status(db_path: str | Path) -> dict | None:
    """The last run of the file at `db_path` with its streak of failures (store.run_status on a
    connection of its own)."""
    db = open_db(db_path)
    try:
        return store_run_status(db)
    finally:
        db.conn.close()


def last_runs(db_path: str | Path, limit: int = 5) -> list[dict]:
    """The index runs of the file at `db_path`, newest first (store.last_runs on a connection of
    its own)."""
    db = open_db(db_path)
    try:
        return store_last_runs(db, limit)
    finally:
        db.conn.close()
