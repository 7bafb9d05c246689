"""What a question costs with Claude, and what the claim check adds after the answer is written.

1. Input tokens billed per question over 20 questions of a set, with prompt caching (each step's
   stable prefix marked with cache_control) and without (every prompt billed in full), against
   the Messages API stub (tests/standins/claude.py FakeClaude), which bills caching as the API does:
   a prefix up to a breakpoint is written once it reaches the model's minimum cacheable length
   (512 tokens on the 5.5 models, 4,096 on Haiku 4.5) and read by later identical prefixes. The
   stub counts ~3.5 characters a token (it has no tokenizer). The models are the defaults in
   bot/settings.py; the cost is estimated with its default price table. Sets: the example docs
   and claude-docs.
2. The claim check's latency after the last streamed word: the stub at bench/slack_latency.py's
   latency (0.6 s a classify / check reply, the answer's first token after 1 s, then
   40 words/s); from the last word the pipeline hands on to the answer being returned (when
   Slack's stream is stopped with the sources and any caveat), and the check step's own time.

    python bench/claude_cost.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from harness import ROOT, SHARED, eval_db, table, write_section

from bot.app import FieldGuide
from bot.costs import stats
from bot.prices import DEFAULT_PRICES
from bot.settings import Settings
from index.embedders import make_embedder
from tests.standins.claude import FakeClaude, estimate_tokens, min_cacheable, prompt_parts
from tests.standins.server import StubServer

QUESTIONS = 20
COST_HEADERS = [
    "set",
    "caching",
    "questions",
    "prompt tokens",
    "billed as input",
    "cache write",
    "cache read",
    "output",
    "est. USD per 1,000 questions",
]
STEPS = ("condense", "classify", "answer", "check")
# bench/slack_latency.py's stub latency
CLAUDE_LATENCY, FIRST_TOKEN, WORDS_PER_SECOND = 0.6, 1.0, 40.0


def questions(path) -> list[str]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    items = [json.loads(line) for line in lines if line.strip()]
    return [q["question"] for q in items if q.get("answer")][:QUESTIONS]


def pipeline_on(db, fake: FakeClaude, classify_model: str = ""):
    server = StubServer()
    server.route("/v1/messages", fake)
    settings = Settings(db=str(db), anthropic_api_key="bench", anthropic_base_url=server.url)
    if classify_model:
        settings = settings.changed(classify_model=classify_model)
    p = FieldGuide(settings).pipeline
    p.engine.loaded()
    p.engine.embed_query("warm up")
    return p, server


def prefix_tokens(body: dict) -> int:
    parts = prompt_parts(body)
    marks = [i for i, (_, bp) in enumerate(parts) if bp]
    return sum(estimate_tokens(p) for p, _ in parts[: marks[-1] + 1]) if marks else 0


def cost_run(db, qs: list[str], cache: bool, classify: str) -> tuple[list[dict], FakeClaude]:
    fake = FakeClaude(cache=cache)
    p, server = pipeline_on(db, fake, classify)
    try:
        usages = [p.answer(q).trace.usage for q in qs]
    finally:
        server.close()
    return usages, fake


def cost_section(name: str, db, qs: list[str], classify: str) -> tuple[list, list]:
    rows, steps = [], []
    runs = {}
    for cache in (False, True):
        usages, fake = cost_run(db, qs, cache, classify)
        runs[cache] = fake
        rows_in = [{"decision": "", "usage": u, "feedback": {}} for u in usages]
        s = stats(rows_in, DEFAULT_PRICES)
        n = len(usages)

        def per_q(key: str, us=usages, n=n) -> float:
            return sum(u.get(key, 0) for u in us) / n

        prompt = per_q("input_tokens") + per_q("cache_creation_input_tokens")
        prompt += per_q("cache_read_input_tokens")
        rows.append(
            [
                name,
                "on" if cache else "off",
                n,
                f"{prompt:,.0f}",
                f"{per_q('input_tokens'):,.0f}",
                f"{per_q('cache_creation_input_tokens'):,.0f}",
                f"{per_q('cache_read_input_tokens'):,.0f}",
                f"{per_q('output_tokens'):,.0f}",
                f"{s['cost_per_question_usd'] * 1000:.3f}",
            ]
        )
    fake = runs[True]
    for step in STEPS:
        calls = fake.calls(step)
        if not calls:
            continue
        model = calls[0]["model"]
        sizes = sorted({prefix_tokens(c) for c in calls})
        size = f"{sizes[0]:,}" if len(sizes) == 1 else f"{sizes[0]:,}–{sizes[-1]:,}"
        steps.append(
            [
                name,
                step,
                model,
                len(calls),
                size,
                f"{min_cacheable(model):,}",
                "yes" if sizes[0] >= min_cacheable(model) else "no",
            ]
        )
    return rows, steps


LATENCY_REPLY = [
    ("Compute an HMAC-SHA256 of the raw request body with your signing secret.", [(0, 0, 1)]),
    (" Compare it with the signature header in constant time.", [(0, 0, 1)]),
    " Reject the request when they differ.",
]


def latency(db, qs: list[str]) -> tuple[list, dict]:
    fake = FakeClaude(
        answer=LATENCY_REPLY,
        latency=CLAUDE_LATENCY,
        first_token=FIRST_TOKEN,
        words_per_second=WORDS_PER_SECOND,
    )
    p, server = pipeline_on(db, fake)
    after, check, checked = [], [], 0
    try:
        for q in qs:
            last = [0.0]
            ans = p.answer(q, on_text=lambda _d, last=last: last.__setitem__(0, time.monotonic()))
            done = time.monotonic()
            if not last[0]:
                continue  # abstained: nothing streamed
            after.append(done - last[0])
            check.append(ans.trace.timings_ms.get("check", 0.0) / 1000)
            checked += "check" in ans.trace.usage
    finally:
        server.close()

    def pct(values, q):
        return float(np.percentile(np.asarray(values) * 1000, q))

    rows = [
        [
            "last streamed word → answer returned (stream stopped)",
            f"{pct(after, 50):.0f}",
            f"{pct(after, 95):.0f}",
        ],
        ["of which the claim check step", f"{pct(check, 50):.0f}", f"{pct(check, 95):.0f}"],
    ]
    return rows, {"streamed": len(after), "checked": checked}


def main() -> None:
    embedder = make_embedder()
    examples = eval_db("examples", embedder)
    claude_docs = eval_db("claude-docs", embedder)
    ours = questions(ROOT / "examples" / "questions.jsonl")
    sets = [
        ("examples", examples, ours, ""),
        ("claude-docs", claude_docs, questions(SHARED / "claude-docs" / "questions.jsonl"), ""),
        # what if: a classifier model whose minimum the examples' taxonomy prefix does not pass
        ("examples, classify on Haiku 4.5", examples, ours, "claude-haiku-4-5"),
    ]
    cost_rows, step_rows = [], []
    for name, db, qs, classify in sets:
        rows, steps = cost_section(name, db, qs, classify)
        cost_rows += rows
        step_rows += steps
        print(table(["set", "cache", "questions"], [r[:3] for r in rows]))
    lat_rows, lat = latency(examples, ours)
    d = Settings()

    body = f"""
`python bench/claude_cost.py`: {QUESTIONS} answerable questions of each set through the whole
pipeline with the default models (classify and check on {d.classify_model}, the answer on
{d.answer_model}), against the Messages API
stub billing prompt caching as the API does (~3.5 characters a token). Per question, mean: the
prompt's tokens, those billed at the full input price, written to and read from the cache, output
tokens, and the estimated cost (bot/settings.py's default prices).

{table(COST_HEADERS, cost_rows)}

Each step's stable prefix (tools + system prompt, up to its cache_control breakpoint) against the
model's minimum cacheable length: a shorter prefix is billed as plain input, with or without
cache_control.

{table(["set", "step", "model", "calls", "prefix tokens", "model minimum", "cached"], step_rows)}

A step's prefix carries a cache_control marker only where it reaches its model's minimum
(router/messages.py `cached_system`): the classifier's taxonomy prompt, the one prefix that grows
with the docs, passes the 5.5 models' 512 tokens and is written by the first question and read by
the others; the other steps' system prompts (200-300 tokens) carry none. The last rows: the same
taxonomy on Haiku 4.5 (minimum 4,096) is not cached.

The claim check's latency after the last streamed word (examples set, {lat["streamed"]} streamed
answers, {lat["checked"]} checked by Claude; stub at {CLAUDE_LATENCY} s a reply, first answer
token after {FIRST_TOKEN} s, {WORDS_PER_SECOND:.0f} words/s):

{table(["interval", "p50 ms", "p95 ms"], lat_rows)}
"""
    write_section("claude-cost", body)


if __name__ == "__main__":
    main()
