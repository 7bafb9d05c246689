"""Times written by people: a duration (`30s`, `15m`, `1h`, `7d`, `2w`), read the same way by the
settings (FIELDGUIDE_REFRESH_EVERY) and by `--since`; and `--since` values (an ISO 8601 date or
date-time, or a duration ago) turned into the form the audit tables store (`created`: UTC ISO 8601
to the second), so comparing the two as text compares the times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# the one duration parser lives below bot/ so that the docs' loader reads `review_every` with it too
from index.durations import DURATION, DURATIONS, seconds_of

__all__ = ["DURATION", "DURATIONS", "parse_since", "seconds_of"]


def parse_since(text: str, now: datetime | None = None) -> str:
    """UTC ISO 8601 to the second; a time without a zone is taken as UTC (as stored). ValueError
    saying what is accepted for anything else (`yesterday`, `2020-13-45`, `9999999w`)."""
    raw = text.strip()
    if DURATION.fullmatch(raw):
        try:
            when = (now or datetime.now(UTC)) - timedelta(seconds=seconds_of(raw))
        except OverflowError:
            raise ValueError(f"{text!r} reaches back before the year 1") from None
    else:
        try:
            when = datetime.fromisoformat(raw)
        except ValueError as e:
            # "month must be in 1..12" says more than "Invalid isoformat string"
            why = "" if str(e).startswith("Invalid isoformat") else f" ({e})"
            raise ValueError(
                f"{text!r} is neither an ISO date or date-time (2026-11-01, 2026-11-01T09:30,"
                f" 2026-11-01T09:30+01:00) nor a time ago ({DURATIONS}){why}"
            ) from None
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.isoformat(timespec="seconds")
