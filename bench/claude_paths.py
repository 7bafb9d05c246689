"""Fewer round trips before the first word (issue 34 item 5): the Claude paths of
FIELDGUIDE_CLAUDE_PATH measured against the Messages API stand-in playing each model's latency and
output speed (tests/standins/claude.py MODEL_TIMING: seconds to the first token, output tokens per
second) with the default models (bot/settings.py: claude-haiku-5-5 for classify / extract / check,
claude-sonnet-5-5 for the answer), prompt caching billed as the API bills it (each model's minimum
cacheable prefix) and priced with bot/settings.py's DEFAULT_PRICES.

Per path, over the answerable questions of each set: time to the first streamed word, time to the
checked answer (the claim check included), prompt and output tokens, and the estimated cost per
answer. Paths:
- sequential: the seed's classify → search → extract → answer → check;
- overlap: Claude's classification running while the question is embedded and searched;
- cite: overlap, and no extraction call: the answer reads the top 5 chunks as search_result
  blocks (a block per paragraph) and its citations are the extraction;
- cite, no caching: the same, every prompt billed in full (what the cache_control markers save).

    python bench/claude_paths.py [--questions 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

from harness import ROOT, SHARED, eval_db, table, write_section

from bot.costs import stats
from bot.settings import DEFAULT_PRICES, Settings
from bot.wiring import make_pipeline
from index.embedders import make_embedder
from tests.standins.claude import MODEL_TIMING, FakeClaude
from tests.standins.server import StubServer

# an answer of the usual length (~110 output tokens), every sentence citing the first block
REPLY = [
    ("To verify a webhook, compute an HMAC-SHA256 of the raw request body", [(0, 0, 1)]),
    (
        " with your endpoint's signing secret, and compare it with the signature header.",
        [(0, 0, 1)],
    ),
    (" Use a constant-time comparison, and reject the request when they differ.", [(0, 0, 1)]),
    (" Check the timestamp too: a request older than five minutes is refused.", [(0, 0, 1)]),
    (" Verify before you parse the body or act on the event.", [(0, 0, 1)]),
]
RUNS = [  # (label, FIELDGUIDE_CLAUDE_PATH, prompt caching honoured)
    ("sequential (seed)", "sequential", True),
    ("overlap", "overlap", True),
    ("cite", "cite", True),
    ("cite, no caching", "cite", False),
]
HEADERS = [
    "set",
    "path",
    "answers",
    "first word p50 s",
    "first word p95 s",
    "checked answer p50 s",
    "Claude calls",
    "prompt tokens",
    "output tokens",
    "USD per answer",
]


def questions(path: Path, n: int) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    items = [json.loads(line) for line in lines if line.strip()]
    return [q["question"] for q in items if q.get("answer")][:n]


def run(db: Path, qs: list[str], path: str, cache: bool) -> dict:
    fake = FakeClaude(answer=REPLY, timing=MODEL_TIMING, cache=cache)
    server = StubServer()
    server.route("/v1/messages", fake)
    settings = replace(
        Settings(db=str(db), anthropic_api_key="bench", anthropic_base_url=server.url),
        claude_path=path,
    )
    p = make_pipeline(settings)
    p.engine.loaded()
    p.engine.embed_query("warm up")
    p.answer(qs[0])  # loads what a first question loads (the language identifier: seconds)
    first: list[float] = []
    done: list[float] = []
    usages: list[dict] = []
    try:
        for q in qs:
            started = time.monotonic()
            seen: list[float] = []

            def first_word(_delta: str, seen: list[float] = seen) -> None:
                if not seen:
                    seen.append(time.monotonic())

            ans = p.answer(q, on_text=first_word)
            if not seen or ans.trace.offline:
                continue  # abstained, or a step ran offline: not a Claude answer
            first.append(seen[0] - started)
            done.append(time.monotonic() - started)
            usages.append(ans.trace.usage)
    finally:
        server.close()
    priced = stats([{"decision": "", "usage": u, "feedback": {}} for u in usages], DEFAULT_PRICES)
    n = len(usages) or 1
    prompt = sum(
        u.get(k, 0)
        for u in usages
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return {
        "answers": len(usages),
        "first": first,
        "done": done,
        "calls": sum(len([s for s in u.values() if isinstance(s, dict)]) for u in usages) / n,
        "prompt": prompt / n,
        "output": sum(u.get("output_tokens", 0) for u in usages) / n,
        "usd": priced["cost_per_question_usd"],
        "cache_read": sum(u.get("cache_read_input_tokens", 0) for u in usages) / n,
    }


def pct(values: list[float], q: int) -> float:
    if not values:
        return float("nan")
    return (
        statistics.quantiles(values, n=20)[18]
        if q == 95 and len(values) > 1
        else (statistics.median(values))
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=8)
    args = ap.parse_args()
    embedder = make_embedder()
    sets = [("examples", eval_db("examples", embedder), ROOT / "examples" / "questions.jsonl")]
    if (SHARED / "claude-docs").is_dir():
        sets.append(
            (
                "claude-docs",
                eval_db("claude-docs", embedder),
                SHARED / "claude-docs" / "questions.jsonl",
            )
        )
    rows = []
    for name, db, qfile in sets:
        qs = questions(qfile, args.questions)
        for label, path, cache in RUNS:
            r = run(db, qs, path, cache)
            rows.append(
                [
                    name,
                    label,
                    r["answers"],
                    f"{pct(r['first'], 50):.2f}",
                    f"{pct(r['first'], 95):.2f}",
                    f"{pct(r['done'], 50):.2f}",
                    f"{r['calls']:.1f}",
                    f"{r['prompt']:,.0f} ({r['cache_read']:,.0f} read)",
                    f"{r['output']:,.0f}",
                    f"{r['usd']:.5f}",
                ]
            )
            print(table(HEADERS, rows[-1:]), flush=True)
    timing = "; ".join(f"{m} {t:.2f} s + {s:.0f} tokens/s" for m, (t, s) in MODEL_TIMING.items())
    body = f"""
`python bench/claude_paths.py --questions {args.questions}`: the answerable questions of each set
(the first {args.questions}) through the whole pipeline with the default models
(classify / extract / check on claude-haiku-5-5, the answer on claude-sonnet-5-5), against the
Messages API stand-in playing each model's time to first token and output speed ({timing}: the
model pages give only "Fastest" / "Fast" / "Moderate"; the figures are the latest measured ones in
the pages read, see MODEL_TIMING), billing prompt caching by each model's minimum (512 tokens on
the 5.5 models) and priced with bot/settings.py's DEFAULT_PRICES. Answers whose every step ran on
Claude; times from the question to its first streamed word and to the returned, checked answer.
Prompt tokens: input + cache write + cache read, per answer (the stand-in counts ~3.5 characters a
token).

{table(HEADERS, rows)}

The default is **cite** (FIELDGUIDE_CLAUDE_PATH): two Claude round trips before the first word
(the classification, overlapped with the local search, then the answer) instead of three, because
the extraction call is gone: the answer's own search_result citations, checked by their block
indices, are the extraction, and the claim check still reads each sentence against the paragraphs
it cites. Its price is prompt tokens on the answer model: Sonnet 5.5 reads five chunks'
paragraphs instead of Haiku 5.5's extracted passages, about twice the cost per answer in the
table, a fraction of a cent either way; the first word is about a second sooner. Overlapping the
classification alone saves only the local search's time (embedding and search, tens of ms) and no
tokens. Caching reads the classifier's taxonomy prefix (over 512 tokens
on these sets) from the second question on; the other steps' stable prefixes (system prompts of
200-300 tokens) are below every model's minimum and carry no marker. `sequential` stays available
for a team that wants Claude's extraction step (its `nothing_relevant` abstains before the answer
model is called).
"""
    write_section("claude-paths", body)


if __name__ == "__main__":
    main()
