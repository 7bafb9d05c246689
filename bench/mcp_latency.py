"""`ask` over MCP: one question's latency through `fieldguide mcp` over stdio (the SDK's client
launching `python -m bot.cli mcp`, as Claude Code or Cursor does) against the same question asked
through the Python API (FieldGuide.ask), in one run, offline, on the example docs: the 35 questions
and 20 off-topic ones of examples/, each asked once per path after one warm-up question, the two
paths alternating question by question so neither gets the quieter machine. Also the time from
launching the server to its first answer (what a host waits for on its first call).

    python bench/mcp_latency.py
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

import anyio
from harness import ROOT, WORK, ms, table, write_section
from mcp import Client, StdioServerParameters

from bot.app import FieldGuide
from bot.settings import Settings
from index.embedders import make_embedder
from index.indexer import index_folder

WARM_UP = "warm up: load the model and the index"


def questions() -> list[str]:
    out = []
    for name in ("questions.jsonl", "offtopic.jsonl"):
        with open(ROOT / "examples" / name, encoding="utf-8") as f:
            out += [json.loads(line)["question"] for line in f if line.strip()]
    return out


def main() -> None:
    embedder = make_embedder()
    template = WORK / "examples.db"
    index_folder(template, ROOT / "examples" / "docs", embedder)
    db = WORK / "mcp.db"  # a copy: both paths write audit rows
    shutil.copyfile(template, db)
    asked = questions()
    guide = FieldGuide.open(Settings(db=str(db)), embedder=embedder)
    guide.engine.warm()
    guide.ask(WARM_UP)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bot.cli", "mcp", "--db", str(db)],
        cwd=str(WORK),
        env={"PYTHONPATH": str(ROOT)},
    )
    api_s: list[float] = []
    mcp_s: list[float] = []
    decisions_agree = 0

    async def session() -> float:
        nonlocal decisions_agree
        launched = time.perf_counter()
        async with Client(params) as client:
            await client.call_tool("ask", {"question": WARM_UP})
            first = time.perf_counter() - launched
            for q in asked:
                t = time.perf_counter()
                ans = guide.ask(q)
                api_s.append(time.perf_counter() - t)
                t = time.perf_counter()
                result = await client.call_tool("ask", {"question": q})
                mcp_s.append(time.perf_counter() - t)
                assert not result.is_error, result.content
                decisions_agree += result.structured_content["decision"] == ans.decision
        return first

    first = anyio.run(session)
    (a50, a95), (m50, m95) = ms(api_s), ms(mcp_s)
    over = [m - a for m, a in zip(mcp_s, api_s, strict=True)]
    o50, o95 = ms(over)
    rows = [
        ["Python API (FieldGuide.ask)", len(api_s), round(a50), round(a95), "-"],
        ["MCP over stdio (call_tool ask)", len(mcp_s), round(m50), round(m95), f"{o50:.0f}"],
    ]
    body = f"""## MCP: `ask` over stdio against the Python API (`bench/mcp_latency.py`)

`python bench/mcp_latency.py` — offline, the example docs, {len(asked)} questions (35 answerable,
20 off-topic) asked once through each path, alternating; both processes warmed by one question
first. Over stdio the SDK's client launched `python -m bot.cli mcp` as a host does; the extra
time is JSON-RPC over the pipe, the tool's schema checks and the result's structured and text
copies.

{table(["path", "questions", "p50 ms", "p95 ms", "extra per question, p50 ms"], rows)}

Per question, MCP minus API: p50 {o50:.0f} ms, p95 {o95:.0f} ms. The same decision on
{decisions_agree} of {len(asked)} questions. From launching `fieldguide mcp` to its first answer
(start-up, handshake, model and index loaded, one question): {first:.1f} s. The 1-minute load
average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work shares them:
read the paired difference, not the absolute times).
"""
    print(body)
    write_section("mcp", body)


if __name__ == "__main__":
    main()
