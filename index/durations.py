"""Durations as people write them: a number and a unit, `30s`, `15m`, `1h`, `7d`, `2w` — the one
parser the settings (FIELDGUIDE_REFRESH_EVERY), `--since` (bot/since.py) and a doc's
`review_every` (index/loader.py) read them with."""

from __future__ import annotations

import re

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
DURATION = re.compile(r"(\d{1,9}(?:\.\d{1,9})?)\s*([smhdw])", re.I)
DURATIONS = "30s, 15m, 1h, 7d or 2w"


def seconds_of(text: str) -> float:
    """`15m` → 900.0 (s, m, h, d, w; a blank → 0); ValueError for anything else."""
    if not text.strip():
        return 0.0
    m = DURATION.fullmatch(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a duration such as {DURATIONS}")
    return float(m[1]) * UNIT_SECONDS[m[2].lower()]
