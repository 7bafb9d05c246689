"""`fieldguide audit --stats`: questions, decisions, feedback, tokens and an estimated cost by
model, from the usage each audit row keeps per step (router/messages.py `usage_of`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from router.messages import TOKENS

from .prices import parse_prices

# a usage field → the price it is billed at (PRICE_KEYS)
PRICED = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_creation_input_tokens": "cache_write",
    "cache_read_input_tokens": "cache_read",
}


def price_for(model: str, prices: dict[str, dict[str, float]]) -> dict[str, float] | None:
    """The prices of the longest table key `model` starts with (a dated id takes its alias's)."""
    keys = [k for k in prices if model.startswith(k)]
    return prices[max(keys, key=len)] if keys else None


def unpriced(settings: Any) -> list[str]:
    """The configured Claude models (bot.settings.Settings) the price table has no price for."""
    prices = parse_prices(settings.prices)
    models = (
        settings.condense_model,
        settings.classify_model,
        settings.answer_model,
        settings.check_model,
        settings.judge_model,
    )
    return [m for m in dict.fromkeys(models) if price_for(m, prices) is None]


def cost_of(usage: dict, prices: dict[str, dict[str, float]]) -> float | None:
    """One step's cost in USD (its tokens at its model's prices), or None without a price."""
    p = price_for(str(usage.get("model") or ""), prices)
    if p is None:
        return None
    return sum(int(usage.get(k) or 0) * p[PRICED[k]] for k in TOKENS) / 1_000_000


def stats(rows: Iterable[dict], prices: dict[str, dict[str, float]]) -> dict:
    """Figures over audit rows ({"decision", "usage", "feedback"}, as State.usage_rows gives):
    by model, by step (classify, answer, check, ...), and the cost per question and per answer
    that called Claude."""
    out: dict = {"questions": 0, "decisions": {}, "feedback": {}, "models": {}, "steps": {}}
    with_claude = 0
    for r in rows:
        out["questions"] += 1
        out["decisions"][r["decision"]] = out["decisions"].get(r["decision"], 0) + 1
        for value in (r["feedback"] or {}).values():
            out["feedback"][value] = out["feedback"].get(value, 0) + 1
        steps = {k: v for k, v in (r["usage"] or {}).items() if isinstance(v, dict)}
        with_claude += bool(steps)  # the answer's totals, kept beside its steps, are left out
        for name, step in steps.items():
            model = step.get("model") or "(unknown model)"
            m = out["models"].setdefault(model, dict.fromkeys(TOKENS, 0) | {"calls": 0})
            m["calls"] += 1
            for k in TOKENS:
                m[k] += int(step.get(k) or 0)
            s = out["steps"].setdefault(name, {"calls": 0, "cost_usd": 0.0, "unpriced": 0})
            s["calls"] += 1
            cost = cost_of(step, prices)
            if cost is None:
                s["unpriced"] += 1
            else:
                s["cost_usd"] += cost
    total, unpriced = 0.0, []
    for model, m in out["models"].items():
        p = price_for(model, prices)
        if p is None:
            m["cost_usd"] = None
            unpriced.append(model)
            continue
        m["cost_usd"] = round(sum(m[k] * p[PRICED[k]] for k in TOKENS) / 1_000_000, 6)
        total += m["cost_usd"]
    out["cost_usd"] = round(total, 6)
    out["cost_per_question_usd"] = round(total / out["questions"], 6) if out["questions"] else 0.0
    out["answers_with_claude"] = with_claude
    out["cost_per_answer_usd"] = round(total / with_claude, 6) if with_claude else 0.0
    for s in out["steps"].values():
        s["cost_per_call_usd"] = round(s["cost_usd"] / s["calls"], 6)
        s["cost_usd"] = round(s["cost_usd"], 6)
    out["unpriced_models"] = unpriced
    return out


def format_stats(s: dict, since: str | None) -> str:
    counts = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"  # noqa: E731
    lines = [
        f"Answers{' since ' + since if since else ''}: {s['questions']}",
        f"Decisions: {counts(s['decisions'])}",
        f"Feedback: {counts(s['feedback'])}",
        "",
        "| model | calls | input | cache write | cache read | output | est. cost (USD) |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, m in sorted(s["models"].items()):
        cost = "no price" if m["cost_usd"] is None else f"{m['cost_usd']:.4f}"
        lines.append(
            f"| {model} | {m['calls']} | {m['input_tokens']:,} | "
            f"{m['cache_creation_input_tokens']:,} | {m['cache_read_input_tokens']:,} | "
            f"{m['output_tokens']:,} | {cost} |"
        )
    if not s["models"]:
        lines.append("| (no Claude calls) | 0 | 0 | 0 | 0 | 0 | 0.0000 |")
    if s.get("steps"):
        lines += ["", "| step | calls | est. cost (USD) | per call (USD) |", "|---|---|---|---|"]
        for name, st in sorted(s["steps"].items()):
            priced = "" if not st["unpriced"] else f" ({st['unpriced']} unpriced)"
            lines.append(
                f"| {name} | {st['calls']} | {st['cost_usd']:.4f}{priced} |"
                f" {st['cost_per_call_usd']:.5f} |"
            )
    with_claude = s.get("answers_with_claude", 0)
    lines += [
        "",
        f"Estimated cost: ${s['cost_usd']:.4f} (${s['cost_per_question_usd']:.5f} a question;"
        f" ${s.get('cost_per_answer_usd', 0.0):.5f} an answer that called Claude,"
        f" {with_claude} of them)"
        if with_claude
        else "Estimated cost: none (no answer called Claude)",
    ]
    if s["unpriced_models"]:
        lines.append(
            f"No price for {', '.join(s['unpriced_models'])}: add it to FIELDGUIDE_PRICES."
        )
    return "\n".join(lines)
