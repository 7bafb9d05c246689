"""Durations as people write them in settings and front matter: a number and a unit, `30s`,
`15m`, `1h`, `7d`, `12w` (the one parser FIELDGUIDE_REFRESH_EVERY and a doc's `review_every`
read)."""

from __future__ import annotations

import re

DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)", re.I)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
EXAMPLES = "30s, 15m, 1h, 90d or 12w"


def seconds_of(v: str) -> float:
    """`15m` → 900.0 (s, m, h, d, w; "" → 0); ValueError for anything else."""
    if not v.strip():
        return 0.0
    m = DURATION.fullmatch(v.strip())
    if not m:
        raise ValueError(v)
    return float(m.group(1)) * UNIT_SECONDS[m.group(2).lower()]
