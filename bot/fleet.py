"""Whether this install can run the fleet its settings ask for: a fleet (FIELDGUIDE_DATABASE_URL)
needs the `fleet` extra's packages (psycopg, psycopg-pool), which nothing loads otherwise."""

from __future__ import annotations

FLEET_EXTRA = "pip install 'fieldguide[fleet]'"


def fleet_missing(database_url: str) -> str:
    """'' when no fleet is configured or its packages load; else one short line saying what to
    install (every command but doctor stops with it; doctor lists it)."""
    if not database_url:
        return ""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as e:  # not installed, or psycopg without its libpq (the binary part)
        what = e.name or "psycopg"
        return (
            f"FIELDGUIDE_DATABASE_URL is set but {what} is not installed (the fleet's packages):"
            f" {FLEET_EXTRA}"
        )
    return ""
