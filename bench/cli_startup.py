"""A CLI question in a fresh process: `fieldguide ask` on the example docs' index, a plain question
and one with a typo, wall-clock seconds from start to exit and the laps the pipeline times (its
trace line), with this tree's code and, with --before DIR, another tree's (`git archive COMMIT |
tar -x -C DIR`) on the same index. Runs alternate between the codes; the median of --repeat runs.
Writes RESULTS.md section cli-startup.

    python bench/cli_startup.py [--before DIR] [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import ROOT, WORK, table, write_section

from index.embedders import make_embedder
from index.indexer import index_folder

QUESTIONS = {
    "plain": "How many times is a failed webhook retried, and over how long?",
    "typo": "How many times is a failed webhok retried, and over how long?",
}
LAP = re.compile(r"(\w+) (\d+)(?= ·| ms\))")


def ask(code: Path, db: Path, question: str) -> tuple[float, dict[str, int]]:
    """Seconds for one `python -m bot.cli ask` in a fresh process, and its trace's laps (ms)."""
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "ask", question, "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=code,
        env={k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "VOYAGE"))},
    )
    took = time.perf_counter() - t
    if out.returncode:
        raise SystemExit(f"{code}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    trace = next(line for line in out.stdout.splitlines() if line.startswith("("))
    return took, {k: int(v) for k, v in LAP.findall(trace)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--before", type=Path, help="a source tree with the code to compare against")
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    db = WORK / "cli-startup" / "examples.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    index_folder(db, ROOT / "examples" / "docs", make_embedder())
    codes = [("after", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    for _, code in codes:  # the per-generation files built, the page cache warm
        ask(code, db, QUESTIONS["plain"])
    runs: dict[tuple[str, str], list] = {(c, q): [] for c, _ in codes for q in QUESTIONS}
    load = [os.getloadavg()[0]]
    for _ in range(args.repeat):
        for q, question in QUESTIONS.items():
            for label, code in codes:
                runs[label, q].append(ask(code, db, question))
        load.append(os.getloadavg()[0])
    rows = []
    for (label, q), samples in runs.items():
        laps = {k: statistics.median(s[1].get(k, 0) for s in samples) for k in samples[0][1]}
        seconds = statistics.median(s[0] for s in samples)
        shown = " · ".join(f"{k} {v:.0f}" for k, v in laps.items() if k != "total")
        rows.append([q, label, f"{seconds:.2f}", f"{laps.get('total', 0):.0f}", shown])
        print(*rows[-1], sep=" | ", flush=True)
    body = f"""## A CLI question in a fresh process (`bench/cli_startup.py`)

`python bench/cli_startup.py --before DIR` — `fieldguide ask` (`python -m bot.cli ask`) on the
example docs' index, offline, each run a new process: wall-clock seconds from start to exit
(imports, settings, the index and model opened, the question answered, printed), and the laps the
pipeline times (ms, from its trace line). The median of {args.repeat} runs, the codes alternated.
Load average during the runs: {min(load):.1f} to {max(load):.1f} on {os.cpu_count()} cores
(times stretch with it).

{table(["question", "code", "seconds", "pipeline ms", "laps (ms)"], rows)}

"before": every process imported the indexer and the eval code, built symspellpy's English
dictionary (82,765 words) on the first word the docs don't know, and its noisy channel read "git"
as "get". "after": the CLI loads neither; a typo's English neighbours are read off wordfreq's table,
which the decision loads anyway; the docs' own spelling dictionary is built on the first word they
don't know.
"""
    write_section("cli-startup", body)


if __name__ == "__main__":
    main()
