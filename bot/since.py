"""`--since` values: an ISO 8601 date or date-time, or a time ago (`7d`, `24h`, `30m`), turned into
the form the audit tables store (`created`: UTC ISO 8601 to the second), so comparing the two as
text compares the times."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
AGO = re.compile(r"(\d{1,6})\s*([wdhms])", re.I)


def parse_since(text: str, now: datetime | None = None) -> str:
    """UTC ISO 8601 to the second; a time without a zone is taken as UTC (as stored). ValueError
    saying what is accepted for anything else (`yesterday`, `2020-13-45`)."""
    raw = text.strip()
    if m := AGO.fullmatch(raw):
        when = (now or datetime.now(UTC)) - timedelta(**{UNITS[m[2].lower()]: int(m[1])})
    else:
        try:
            when = datetime.fromisoformat(raw)
        except ValueError as e:
            # "month must be in 1..12" says more than "Invalid isoformat string"
            why = "" if str(e).startswith("Invalid isoformat") else f" ({e})"
            raise ValueError(
                f"{text!r} is neither an ISO date or date-time (2026-11-01, 2026-11-01T09:30,"
                f" 2026-11-01T09:30+01:00) nor a time ago (30m, 24h, 7d, 2w){why}"
            ) from None
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.isoformat(timespec="seconds")
