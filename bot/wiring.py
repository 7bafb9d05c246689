"""Build the clients and the engine from Settings: the one place that turns settings into
objects."""

from __future__ import annotations

from .settings import Settings


def make_embedder(settings: Settings):
    from index.embedders import make_embedder as make

    return make(
        settings.voyage_api_key,
        settings.voyage_model,
        settings.voyage_base_url,
        settings.timeout,
        settings.model_dir,
    )


def make_anthropic(settings: Settings):
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


def make_reranker(settings: Settings):
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


def make_engine(settings: Settings, db: str | None = None):
    from router.engine import Engine

    return Engine(
        db or settings.db,
        make_embedder(settings),
        make_anthropic(settings),
        settings.classify_model,
        settings.bm25_weight,
        settings.fusion,
        make_reranker(settings),
    )


def make_state(settings: Settings, db: str | None = None):
    """Where answers, feedback, de-duplication, rate limits and the reindex lock live: the
    embedded default keeps them in the index file and this process."""
    from index.store import open_db
    from router.state import SqliteState

    # its own connection: answers are written from Slack's worker threads
    return SqliteState(
        open_db(db or settings.db, create=False), retention_days=settings.audit_retention_days
    )


def make_pipeline(settings: Settings, db: str | None = None):
    from router.pipeline import Pipeline

    engine = make_engine(settings, db)
    models = {
        "condense": settings.condense_model,
        "extract": settings.extract_model,
        "answer": settings.answer_model,
    }
    return Pipeline(
        engine,
        engine.anthropic,
        models,
        settings.docs_base_url,
        state=make_state(settings, db),
        deadline=settings.deadline,
    )
