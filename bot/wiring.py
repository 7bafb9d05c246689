"""Build the clients and the engine from Settings: the one place that turns settings into
objects."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .settings import Settings

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # imported for annotations only: the commands import what they use lazily
    from bot.scopes import Scopes
    from bot.state.sqlite import State
    from index.embedders import Embedder
    from index.gitsource import GitSource
    from index.indexer import RunSummary
    from index.publish import Follower
    from index.rerank import VoyageReranker
    from router.claude import MessagesClient
    from router.engine import Engine
    from router.pipeline import Pipeline


def embedder_for(settings: Settings) -> Embedder:
    from index.embedders import make_embedder as make

    return make(
        settings.voyage_api_key,
        settings.voyage_model,
        settings.voyage_base_url,
        settings.timeout,
        settings.model_dir,
        settings.query_timeout,
    )


def make_anthropic(settings: Settings) -> MessagesClient | None:
    """The Anthropic client, or None when no key is set (every Claude step then runs offline)."""
    if not settings.anthropic_api_key:
        return None
    import anthropic

    return anthropic.Anthropic(
        api_key=settings.anthropic_api_key,
        base_url=settings.anthropic_base_url or None,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
    )


def make_reranker(settings: Settings) -> VoyageReranker | None:
    """Voyage's reranker when a Voyage key is set and FIELDGUIDE_RERANK_MODEL is not empty: at
    question time, one try of FIELDGUIDE_QUERY_TIMEOUT seconds, then the fused order."""
    if not settings.voyage_api_key or not settings.rerank_model:
        return None
    from index.rerank import VoyageReranker

    return VoyageReranker(
        settings.voyage_api_key,
        settings.rerank_model,
        settings.rerank_depth,
        settings.voyage_base_url,
        settings.query_timeout,
        max_retries=0,
    )


def make_engine(settings: Settings, db: str | None = None) -> Engine:
    from router.engine import Engine

    return Engine(
        db or settings.db,
        embedder_for(settings),
        make_anthropic(settings),
        settings.classify_model,
        settings.bm25_weight,
        settings.fusion,
        make_reranker(settings),
    )


def make_state(settings: Settings, db: str | None = None) -> State:
    """Where answers, feedback, de-duplication, rate limits and the reindex lock live: PostgreSQL
    when FIELDGUIDE_DATABASE_URL is set (shared by the fleet), else the index file and this
    process."""
    if settings.database_url:
        from bot.state.postgres import PostgresState

        return PostgresState(settings.database_url)
    from bot.state.sqlite import SqliteState
    from index.store import open_db

    # its own connection: answers are written from Slack's worker threads
    return SqliteState(
        open_db(db or settings.db, create=False), retention_days=settings.audit_retention_days
    )


def make_scopes(settings: Settings, db: str | None = None) -> Scopes | None:
    """FIELDGUIDE_SCOPES read and checked against the index (a ScopeError when bad); None when
    not set (every channel searches everything)."""
    if not settings.scopes:
        return None
    from bot.scopes import scopes_for_index
    from index.store import open_db

    return scopes_for_index(settings.scopes, open_db(db or settings.db, create=False))


def make_pipeline(settings: Settings, db: str | None = None) -> Pipeline:
    from router.pipeline import Pipeline

    if settings.anthropic_api_key:
        from .costs import unpriced

        if no_price := unpriced(settings):
            log.warning(
                "No price for %s: audit --stats cannot estimate its cost; add it to"
                " FIELDGUIDE_PRICES",
                ", ".join(no_price),
            )
    engine = make_engine(settings, db)
    models = {
        "condense": settings.condense_model,
        "extract": settings.extract_model,
        "answer": settings.answer_model,
        "check": settings.check_model,
    }
    return Pipeline(
        engine,
        engine.anthropic,
        models,
        settings.docs_base_url,
        state=make_state(settings, db),
        deadline=settings.deadline,
        path=settings.claude_path,
    )


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


def docs_source(settings: Settings, db: str | Path, docs: str | Path | None = None) -> DocsSource:
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
            checkout_folder(db),
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
    db: str,
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
    from index.indexer import SourceUnreachable, check_source, index_folder

    source = docs if isinstance(docs, DocsSource) else docs_source(settings, db, docs)
    if settings.database_url:
        sync_published(settings, db)  # the fleet's index is the one to check and update
    check_source(db, source.identity, replace)
    if source.git is not None:
        try:
            source.git.pull()
        except GitError as e:
            raise SourceUnreachable(
                f"could not pull {source.identity} ({e}); the index is unchanged"
            ) from None
    kwargs: dict[str, Any] = dict(source=source.identity, replace=replace, **callbacks)
    if not settings.database_url:
        return index_folder(db, source.root, embedder, settings.chunk_chars, **kwargs), None
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
    pool = open_pool(settings.database_url, max_size=2)
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


def sync_published(settings: Settings, db: str) -> int | None:
    """A fleet replica's start: its local index brought to the newest published generation (a
    FleetError, fit to show, when the database is unreachable); the generation it now holds."""
    from index.pg import check_schema, connect
    from index.publish import sync

    with connect(settings.database_url) as conn:
        check_schema(conn)
        return sync(conn, db)


def start_follower(settings: Settings, db: str, engine: Engine) -> Follower:
    """Keep the local index on the newest published generation: each new one is loaded into
    `engine` in the background while questions are answered from the old one."""
    from index.publish import Follower

    return Follower(settings.database_url, db, on_switch=engine.loaded).start()
