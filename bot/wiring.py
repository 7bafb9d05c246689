"""Build the clients and the engine from Settings: the one place that turns settings into
objects."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .settings import Settings

if TYPE_CHECKING:  # imported for annotations only: the commands import what they use lazily
    from bot.scopes import Scopes
    from bot.state.sqlite import State
    from index.embedders import Embedder
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
    """Voyage's reranker when a Voyage key is set and FIELDGUIDE_RERANK_MODEL is not empty."""
    if not settings.voyage_api_key or not settings.rerank_model:
        return None
    from index.rerank import VoyageReranker

    return VoyageReranker(
        settings.voyage_api_key,
        settings.rerank_model,
        settings.rerank_depth,
        settings.voyage_base_url,
        settings.timeout,
        settings.max_retries,
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
    )


def index_docs(
    settings: Settings, db: str, docs: Any, embedder: Embedder, **callbacks: Any
) -> tuple[RunSummary, dict | None]:
    """One index run, as `fieldguide index` and /docs-reindex make it: with
    FIELDGUIDE_DATABASE_URL set, texts the fleet already embedded are taken from PostgreSQL and the
    result is published there as the newest generation. Returns (RunSummary, publish figures or
    None)."""
    from index.indexer import index_folder

    if not settings.database_url:
        return index_folder(db, docs, embedder, settings.chunk_chars, **callbacks), None
    from index.pg import open_pool
    from index.publish import VectorCache, publish

    pool = open_pool(settings.database_url, max_size=2)
    try:
        summary = index_folder(
            db, docs, embedder, settings.chunk_chars, shared=VectorCache(pool), **callbacks
        )
    finally:
        pool.close()
    return summary, publish(settings.database_url, db, source=str(docs))


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
