"""Build the clients and the engine from Settings: the one place that turns settings into
objects."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .settings import Settings

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # imported for annotations only: the commands import what they use lazily
    from pathlib import Path

    import sqlite_utils

    from bot.scopes import Scopes
    from bot.state import State
    from index.embedders import Embedder
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


def models_of(settings: Settings) -> dict[str, str]:
    """The Claude model of each answer step."""
    return {
        "condense": settings.condense_model,
        "answer": settings.answer_model,
        "check": settings.check_model,
    }


def make_engine(
    settings: Settings,
    embedder: Embedder,
    anthropic: MessagesClient | None,
    db: sqlite_utils.Database,
    decision: Path,
) -> Engine:
    """The query side on the index FIELDGUIDE_DB, through the caller's connection to it (`db`),
    embedder and Anthropic client (None: offline), deciding with the `decision` file:
    bot/app.py's FieldGuide owns them."""
    from router.engine import Engine

    return Engine(
        settings.db,
        embedder,
        anthropic,
        settings.classify_model,
        settings.bm25_weight,
        settings.fusion,
        make_reranker(settings),
        db=db,
        decision=decision,
    )


def make_pipeline(settings: Settings, engine: Engine) -> Pipeline:
    """The stateless question path over the caller's `engine`."""
    from router.context import Budget
    from router.pipeline import Pipeline

    if settings.anthropic_api_key:
        from .costs import unpriced

        if no_price := unpriced(settings):
            log.warning(
                "No price for %s: audit --stats cannot estimate its cost; add it to"
                " FIELDGUIDE_PRICES",
                ", ".join(no_price),
            )
    return Pipeline(
        engine,
        engine.anthropic,
        models_of(settings),
        settings.docs_base_url,
        settings.deadline,
        first_byte=settings.first_byte_timeout,
        budget=Budget(settings.read_tokens, settings.rerank_depth, settings.second_looks),
    )


def make_offline_pipeline(settings: Settings, engine: Engine) -> Pipeline:
    """The question path over `engine` with every Claude step offline: how the owners' loop asks
    its topics' questions again after a reindex, the same way whatever keys are set."""
    from router.pipeline import Pipeline

    return Pipeline(engine, None, models_of(settings), settings.docs_base_url, settings.deadline)


def make_state(settings: Settings, db: sqlite_utils.Database | None) -> State:
    """Where answers, feedback, de-duplication, rate limits and the reindex lock live: PostgreSQL
    when FIELDGUIDE_DATABASE_URL is set (shared by the fleet; `db` None), else the index file
    through the caller's connection to it (`db`) and this process."""
    if settings.database_url:
        from bot.state.postgres import PostgresState

        return PostgresState(settings.database_url)
    from bot.state.sqlite import SqliteState

    assert db is not None, "a state on the index file needs its connection"
    return SqliteState(db, retention_days=settings.audit_retention_days)


def make_scopes(settings: Settings, db: sqlite_utils.Database) -> Scopes | None:
    """FIELDGUIDE_SCOPES read and checked against the index (through the caller's connection to
    it, `db`; a ScopeError when bad); None when not set (every channel searches everything)."""
    if not settings.scopes:
        return None
    from bot.scopes import scopes_for_index

    return scopes_for_index(settings.scopes, db)
