"""The indexing service: one index run as `fieldguide index`, /docs-reindex and serve's scheduled
refresh make it (the docs source checked, a git source pulled first), and in a fleet the reindex
lock across replicas, publishing a run to PostgreSQL and following what others publish."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .settings import Settings

if TYPE_CHECKING:
    from index.embedders import Embedder
    from index.gitsource import GitSource
    from index.indexer import RunSummary
    from index.publish import Follower
    from router.engine import Engine


@dataclass
class DocsSource:
    """The docs an index run reads: a folder (`git` None), or a git repository's working copy
    (pulled before the run). `identity` is what the index remembers as its source."""

    root: Path
    identity: str
    git: GitSource | None = None


def checkout_folder(db: str | Path) -> Path:
    """Where a git docs source is checked out: beside the index, named after it."""
    db = Path(db)
    return db.with_name(db.name + ".docs")


def docs_source(settings: Settings, docs: str | Path | None = None) -> DocsSource:
    """`docs` (a folder named on the command line), else FIELDGUIDE_DOCS_GIT, else FIELDGUIDE_DOCS;
    IndexError_ saying what to set when there is none."""
    from index.gitsource import GitSource
    from index.indexer import IndexError_, folder_source

    if docs is None and settings.docs_git and settings.docs:
        raise IndexError_(
            "FIELDGUIDE_DOCS and FIELDGUIDE_DOCS_GIT are both set: set one"
            " (FIELDGUIDE_DOCS_GIT_PATH names a folder inside the repository)"
        )
    if docs is None and settings.docs_git:
        git = GitSource(
            settings.docs_git,
            settings.docs_branch,
            checkout_folder(settings.db),
            settings.docs_git_path,
            settings.docs_git_token,
            settings.git_timeout,
        )
        return DocsSource(git.root, git.identity, git)
    folder = docs or settings.docs
    if not folder:
        raise IndexError_(
            "no docs to index: set FIELDGUIDE_DOCS (a folder) or FIELDGUIDE_DOCS_GIT (a git"
            " repository), or name the folder: fieldguide index DOCS_DIR"
        )
    return DocsSource(Path(folder), folder_source(folder))


def index_docs(
    settings: Settings,
    docs: DocsSource | str | Path | None,
    embedder: Embedder,
    replace: bool = False,
    **callbacks: Any,
) -> tuple[RunSummary, dict | None]:
    """One index run, as `fieldguide index`, /docs-reindex and serve's scheduled refresh make it:
    the docs source checked against the one the index was built from (SourceMismatch unless
    `replace`), a git source pulled first (SourceUnreachable, with the index unchanged, when it
    cannot be), then the incremental run. With FIELDGUIDE_DATABASE_URL set, the local index is
    first brought to the fleet's newest published generation, texts the fleet already embedded
    are taken from PostgreSQL, and a run that changed the index is published as the newest
    generation. Returns (RunSummary, publish figures or None)."""
    from index.gitsource import GitError
    from index.indexer import SourceUnreachable, check_source, index_folder, record_failed_pull

    db = settings.db
    source = docs if isinstance(docs, DocsSource) else docs_source(settings, docs)
    if settings.database_url:
        sync_published(settings)  # the fleet's index is the one to check and update
    check_source(db, source.identity, replace)
    if source.git is not None:
        try:
            source.git.pull()
        except GitError as e:
            why = f"could not pull {source.identity} ({e}); the index is unchanged"
            record_failed_pull(db, source.root, why)  # for status and App Home
            raise SourceUnreachable(why) from None
    kwargs: dict[str, Any] = dict(
        source=source.identity, replace=replace, max_doc_bytes=settings.max_doc_bytes, **callbacks
    )
    if not settings.database_url:
        return index_folder(db, source.root, embedder, settings.chunk_chars, **kwargs), None
    from bot.state.postgres.schema import LATEST
    from index.pg import open_pool
    from index.publish import VectorCache, local_generation, publish
    from index.store import generation, open_db

    def current() -> int:
        conn = open_db(db)
        try:
            return generation(conn)
        finally:
            conn.conn.close()

    before = current()
    pool = open_pool(settings.database_url, LATEST, max_size=2)
    try:
        summary = index_folder(
            db, source.root, embedder, settings.chunk_chars, shared=VectorCache(pool), **kwargs
        )
    finally:
        pool.close()
    if current() == before and local_generation(db) is not None:
        return summary, None  # nothing changed: the published generation stays the newest
    return summary, publish(settings.database_url, db, source=source.identity)


@contextlib.contextmanager
def fleet_reindex_lock(settings: Settings) -> Iterator[None]:
    """With FIELDGUIDE_DATABASE_URL set, one index run at a time across the fleet (the lock a
    replica's /docs-reindex takes too)."""
    if not settings.database_url:
        yield
        return
    from index.pg import POOL_ERRORS, FleetError, connect, reindex_unlock, try_reindex_lock

    with connect(settings.database_url) as conn:
        if not try_reindex_lock(conn):
            raise FleetError("A reindex is already running in the fleet; try again when it ends")
        try:
            yield  # the lock ends with the connection at the latest
        finally:
            # released now: the server ends a closed connection's backend (and its locks) a
            # moment later, which a run started right after this one could still find holding it
            with contextlib.suppress(*POOL_ERRORS):  # a lost connection took the lock with it
                reindex_unlock(conn)


def sync_published(settings: Settings) -> int | None:
    """A fleet replica's start: its local index brought to the newest published generation (a
    FleetError, fit to show, when the database is unreachable); the generation it now holds."""
    from bot.state.postgres.schema import LATEST
    from index.pg import check_schema, connect
    from index.publish import sync

    with connect(settings.database_url) as conn:
        check_schema(conn, LATEST)
        return sync(conn, settings.db)


def start_follower(settings: Settings, engine: Engine) -> Follower:
    """Keep the engine's index on the newest published generation: each new one is loaded into
    `engine` in the background while questions are answered from the old one."""
    from index.publish import Follower

    return Follower(settings.database_url, engine.db_path, on_switch=engine.loaded).start()
