"""A question's answer with Claude, measured against the Messages API stand-in playing each
model's latency and output speed (tests/standins/claude.py MODEL_TIMING: seconds to the first
token, output tokens per second) with the default models (bot/settings.py: claude-haiku-5-5 for
classify / check, claude-sonnet-5-5 for the answer), prompt caching billed as the API bills it
(each model's minimum cacheable prefix) and priced with bot/prices.py's DEFAULT_PRICES.

Over the answerable questions of each set: time to the first streamed word, time to the checked
answer (the claim check included), prompt and output tokens, and the estimated cost per answer;
with prompt caching, and without it (every prompt billed in full: what the cache_control markers
save). The answer reads the search's candidates packed to the token budget as search_result
blocks (a block per paragraph) and its citations are the extraction; Claude classifies beside it.

    python bench/claude_paths.py [--questions 8]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import threading
import time
from pathlib import Path

from harness import ROOT, SHARED, WORK, eval_db, table, write_section

from bot.app import FieldGuide
from bot.costs import stats
from bot.prices import DEFAULT_PRICES
from bot.settings import Settings
from bot.wiring import embedder_for
from index.embedders import make_embedder
from index.indexer import index_folder
from tests.standins.claude import MODEL_TIMING, FakeClaude, hanging
from tests.standins.server import StubServer
from tests.standins.voyage import voyage_embeddings, voyage_rerank
from tests.standins.voyage import voyage_hanging as voyage_hanging_handler

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
RUNS = [("prompt caching", True), ("no caching", False)]  # (label, caching honoured)
HEADERS = [
    "set",
    "run",
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


def run(db: Path, qs: list[str], cache: bool, **overrides) -> dict:
    """The questions `qs` through the pipeline against the stand-in (`overrides`: more settings):
    times, tokens and cost per answer."""
    fake = FakeClaude(answer=REPLY, timing=MODEL_TIMING, cache=cache)
    server = StubServer()
    server.route("/v1/messages", fake)
    settings = Settings(
        db=str(db), anthropic_api_key="bench", anthropic_base_url=server.url, **overrides
    )
    p = FieldGuide(settings).pipeline
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


# -- the deadlines ---------------------------------------------------------------------

SIGNATURE_Q = "How do I verify the signature of a webhook?"
LONG = [
    (f"Sentence {n} says what the docs say about verifying a webhook signature.", [(0, 0, 1)])
    for n in range(12)
]


def slow_stream(db: Path) -> float:
    """Seconds to the delivered answer: an 8 s deadline, the answer streamed at 3 words a
    second (~25 s whole), the claim check in its reserved time."""
    server = StubServer()
    # the answer streamed slowly; the claim check at Haiku 5.5's published pace
    check = {"claude-haiku-5-5": MODEL_TIMING["claude-haiku-5-5"]}
    server.route("/v1/messages", FakeClaude(answer=LONG, words_per_second=3, timing=check))
    settings = Settings(
        db=str(db), anthropic_api_key="bench", anthropic_base_url=server.url, deadline=8.0
    )
    try:
        p = FieldGuide(settings).pipeline
        p.answer(SIGNATURE_Q)  # what a first question loads, timed apart
        started = time.monotonic()
        ans = p.answer(SIGNATURE_Q)
        assert "time limit" in ans.caveat, ans.caveat
        return time.monotonic() - started
    finally:
        server.close()


def api_hanging(db: Path) -> float:
    """Seconds to the answer with the Messages API accepting connections and never answering,
    default settings, the index and model loaded by the question itself."""
    release = threading.Event()
    server = StubServer()
    server.route(
        "/v1/messages", FakeClaude(down={k: hanging(release) for k in ("classify", "answer")})
    )
    try:
        started = time.monotonic()
        settings = Settings(db=str(db), anthropic_api_key="bench", anthropic_base_url=server.url)
        ans = FieldGuide(settings).pipeline.answer(SIGNATURE_Q)
        assert ans.trace.offline
        return time.monotonic() - started
    finally:
        release.set()
        server.close()


def voyage_hanging(work: Path) -> float:
    """Seconds to the first question after a reindex with Voyage hanging (the query timeout at
    its default, 2 s)."""
    server = StubServer()
    server.route("/v1/embeddings", voyage_embeddings())
    server.route("/v1/rerank", voyage_rerank())
    docs = work / "docs"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(ROOT / "examples", docs)
    settings = Settings(
        db=str(work / "v.db"), voyage_api_key="bench", voyage_base_url=server.url + "/v1"
    )
    release = threading.Event()
    try:
        embedder = embedder_for(settings)
        index_folder(settings.db, docs, embedder)
        p = FieldGuide(settings, embedder=embedder).pipeline
        p.answer(SIGNATURE_Q)
        page = next(docs.rglob("*.md"))
        page.write_text(page.read_text() + "\n\nOne more line.\n")
        index_folder(settings.db, docs, embedder)
        server.route("/v1/embeddings", voyage_hanging_handler(release))
        server.route("/v1/rerank", voyage_hanging_handler(release))
        started = time.monotonic()
        p.answer(SIGNATURE_Q)
        return time.monotonic() - started
    finally:
        release.set()
        server.close()


def deadlines(db: Path) -> list[list]:
    d = Settings()
    return [
        [
            "8 s deadline, the answer streamed at 3 words/s (~25 s whole)",
            "9 s",
            f"{slow_stream(db):.1f} s",
        ],
        [
            f"Messages API hanging, default settings ({d.deadline:.0f} s deadline,"
            f" {d.timeout:.0f} s timeout, {d.max_retries} retries,"
            f" {d.first_byte_timeout:.0f} s first byte), load included",
            "45 s",
            f"{api_hanging(db):.1f} s",
        ],
        [
            "Voyage hanging, first question after a reindex"
            f" (query timeout {d.query_timeout:.0f} s)",
            f"{d.query_timeout + 1:.0f} s",
            f"{voyage_hanging(WORK / 'voyage-hanging'):.1f} s",
        ],
    ]


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
        for label, cache in RUNS:
            r = run(db, qs, cache)
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
    limits = deadlines(sets[0][1])
    print(table(["question", "bound", "measured"], limits), flush=True)
    body = f"""
`python bench/claude_paths.py --questions {args.questions}`: the answerable questions of each set
(the first {args.questions}) through the whole pipeline with the default models
(classify / check on claude-haiku-5-5, the answer on claude-sonnet-5-5), against the
Messages API stand-in playing each model's time to first token and output speed ({timing}: the
model pages give only "Fastest" / "Fast" / "Moderate"; the figures are the latest measured ones in
the pages read, see MODEL_TIMING), adaptive thinking as the docs describe it (on by default on the
5.x models, its tokens before the text and within max_tokens: the stand-in's THINKING_TOKENS),
billing prompt caching by each model's minimum (512 tokens on the 5.5 models) and priced with
bot/prices.py's DEFAULT_PRICES (the English pricing page). Answers whose every step ran on
Claude; times from the question to its first streamed word and to the returned, checked answer.
Prompt tokens: input + cache write + cache read, per answer (the stand-in counts ~3.5 characters a
token).

{table(HEADERS, rows)}

One Claude round trip before the first word: retrieval does not wait for Claude's
classification (the offline router, which only breaks ties, picks the candidates the answer reads
while Claude classifies beside it; the classification is kept in the audit's routing when it is
back: bench/RESULTS.md "context"), and there is no extraction call: the answer's own search_result
citations, checked by their block indices, are the extraction, and the claim check still reads
each sentence against the paragraphs it cites. Every step sends thinking as low as its model
allows (Sonnet 5.5 `between_tools`, Haiku 5.5 `disabled`) and its effort (router/messages.py
EFFORT): left at the default, adaptive thinking would spend its tokens before the first word. The
first word's floor is the answer model's own time to first token (1.8 s for Sonnet here). Why this
is the only path: section 'claude-paths-choice'.

### A deadline that holds

{table(["question", "bound", "measured"], limits)}

The answer's stream is cut at the question's deadline less the claim check's reserved time
(router/claims.py RESERVE: 4 s, at most a third of the deadline), what was shown and checked is
kept and marked ("cut short at the question's time limit"); a streamed reply whose first byte (or a
later read) does not come within FIELDGUIDE_FIRST_BYTE_TIMEOUT (5 s) fails as a timeout and is
retried within the deadline, then the docs' own quotes answer. Voyage at question time: the query
embedded once (FIELDGUIDE_QUERY_TIMEOUT), no reranker when it did not answer, and the intents'
example questions were embedded by the index run (as queries), not by the question.
"""
    write_section("claude-paths", body)


if __name__ == "__main__":
    main()
