"""Claude's list prices: the built-in table, and `FIELDGUIDE_PRICES` read as one (bot/costs.py
prices an answer's tokens with it)."""

from __future__ import annotations

import json

# USD per million tokens: the English pricing page (platform.claude.com/docs/en/about-claude/
# pricing, "Model pricing", 2026-11; translated pages and model pages lag it: Sonnet 5.5's cache
# read was cut from $0.20 to $0.10 on 2026-10-07). A cache write is the 5-minute one. A model id
# matches the longest key it starts with (claude-haiku-4-5-20251001 → claude-haiku-4-5).
# FIELDGUIDE_PRICES replaces the table. Haiku 5.5's prices are those of prompts up to 100,000
# tokens (a question's are ~2-6 K).
DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "claude-haiku-5-5": {"input": 0.10, "output": 0.50, "cache_write": 0.125, "cache_read": 0.01},
    "claude-sonnet-5-5": {"input": 2.0, "output": 10.0, "cache_write": 2.50, "cache_read": 0.10},
    "claude-sonnet-5": {"input": 2.0, "output": 10.0, "cache_write": 2.50, "cache_read": 0.20},
    "claude-opus-5-5": {"input": 4.0, "output": 20.0, "cache_write": 5.0, "cache_read": 0.20},
    "claude-opus-5": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-fable-5-1": {"input": 10.0, "output": 50.0, "cache_write": 12.5, "cache_read": 0.25},
    "claude-fable-5": {"input": 10.0, "output": 50.0, "cache_write": 12.5, "cache_read": 1.0},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.10},
    "claude-sonnet-4": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30},
    "claude-opus-4-8": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-opus-4-7": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-opus-4-6": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-opus-4-5": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-opus-4-1": {"input": 15.0, "output": 75.0, "cache_write": 18.75, "cache_read": 1.50},
}
PRICE_KEYS = ("input", "output", "cache_write", "cache_read")


def parse_prices(raw: str) -> dict[str, dict[str, float]]:
    """FIELDGUIDE_PRICES as a table (the built-in one when empty); ValueError saying what is
    wrong."""
    if not raw.strip():
        return DEFAULT_PRICES
    try:
        table = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"is not JSON ({e.msg})") from None
    if not isinstance(table, dict) or not table:
        raise ValueError("must be a JSON object of models")
    for model, p in table.items():
        if not isinstance(p, dict) or set(p) != set(PRICE_KEYS):
            raise ValueError(f"{model}: give exactly {', '.join(PRICE_KEYS)}")
        bad = [k for k in PRICE_KEYS if not isinstance(p[k], (int, float)) or p[k] < 0]
        if bad:
            raise ValueError(f"{model}: {', '.join(bad)} must be numbers ≥ 0")
    return {m: {k: float(v) for k, v in p.items()} for m, p in table.items()}
