"""What the reader costs a question: `ask` in one long-lived process, offline, on the example docs,
with the trained reader (router/reader/score.py) and without it (its weights hidden, so the
decision reads today's model), question by question alternately so neither gets the quieter
machine: the 35 answerable and 20 off-topic questions of examples/, each asked once per way after
one warm-up question each.

    python bench/reader_cost.py
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from harness import ROOT, WORK, ms, table, write_section

from bot.app import FieldGuide
from bot.settings import Settings
from index.embedders import make_embedder
from index.indexer import index_folder
from router.reader import score

WARM_UP = "warm up: load the model and the index"


def questions() -> list[str]:
    out = []
    for name in ("questions.jsonl", "offtopic.jsonl"):
        with open(ROOT / "examples" / name, encoding="utf-8") as f:
            out += [json.loads(line)["question"] for line in f if line.strip()]
    return out


def main() -> None:
    if score.trained() is None:
        raise SystemExit(f"no trained reader at {score.WEIGHTS}")
    embedder = make_embedder()
    db = WORK / "reader-cost.db"
    index_folder(WORK / "examples.db", ROOT / "examples" / "docs", embedder)
    shutil.copyfile(WORK / "examples.db", db)  # a copy: asking writes audit rows
    guide = FieldGuide.open(Settings(db=str(db)), embedder=embedder)
    guide.engine.warm()
    weights, hidden = score.WEIGHTS, Path(os.devnull) / "reader-int8.onnx"
    times: dict[str, list[float]] = {"with": [], "without": []}
    decisions: dict[str, list[str]] = {"with": [], "without": []}
    for way in ("with", "without"):  # each way warmed once
        score.WEIGHTS = weights if way == "with" else hidden
        guide.ask(WARM_UP)
    for q in questions():
        for way in ("with", "without"):
            score.WEIGHTS = weights if way == "with" else hidden
            t = time.perf_counter()
            ans = guide.ask(q)
            times[way].append(time.perf_counter() - t)
            decisions[way].append(ans.decision)
    score.WEIGHTS = weights
    (w50, w95), (o50, o95) = ms(times["with"]), ms(times["without"])
    extra = [a - b for a, b in zip(times["with"], times["without"], strict=True)]
    e50, e95 = ms(extra)
    changed = sum(a != b for a, b in zip(decisions["with"], decisions["without"], strict=True))
    rows = [
        ["with the reader", len(times["with"]), round(w50), round(w95)],
        ["without (today's model)", len(times["without"]), round(o50), round(o95)],
    ]
    body = f"""## What the reader costs a question (`bench/reader_cost.py`)

`python bench/reader_cost.py` — offline, the example docs, one long-lived process, {len(extra)}
questions (35 answerable, 20 off-topic) asked once each way, alternating. The reader reads the top
READ_K = {score.READ_K} sections with the question (int8 ONNX, one thread).

{table(["ask", "questions", "p50 ms", "p95 ms"], rows)}

Per question, with minus without: p50 {e50:.0f} ms, p95 {e95:.0f} ms. Decisions that differ:
{changed} of {len(extra)}. The 1-minute load average at the end: {os.getloadavg()[0]:.1f} on
{os.cpu_count()} cores (other work shares them: read the paired difference).
"""
    print(body)
    write_section("reader-cost", body)


if __name__ == "__main__":
    main()
