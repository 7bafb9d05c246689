"""Shared by the bench scripts: timing, the openshift corpus, and writing a section of
RESULTS.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# shared/eval beside the checkout (CI's clone), or beside a folder holding it (a worktree under wt/)
SHARED = next(
    (p / "shared" / "eval" for p in ROOT.parents if (p / "shared" / "eval").is_dir()),
    ROOT.parent / "shared" / "eval",
)
WORK = ROOT / ".fieldguide" / "bench"
RESULTS = ROOT / "bench" / "RESULTS.md"


def ms(samples) -> tuple[float, float]:
    """(p50, p95) in milliseconds of a list of seconds."""
    a = np.asarray(samples) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


# the real-question sets (bench/sets/NAME): their questions are in the repository, their docs are
# laid out from each project's repository as its SOURCE.md says (not committed)
REAL_SETS = ("fastapi", "traefik", "duckdb", "chezmoi")
# a real-question set that no threshold, weight, budget or prompt was fitted or revised on: it
# checks their choices (its figures are reported, never fitted to)
CHECK_SETS = ("uv", "mise")
QUESTION_SETS = (*REAL_SETS, *CHECK_SETS)  # every real-question set, fitted on or not


def set_dir(set_name: str) -> Path:
    if set_name == "examples":
        return ROOT / "examples"
    if set_name in QUESTION_SETS:
        return ROOT / "bench" / "sets" / set_name
    return SHARED / set_name


def laid_out(set_name: str) -> bool:
    """Whether the set's docs are here (a real-question set's are laid out by hand)."""
    return (set_dir(set_name) / "docs").is_dir()


def eval_path(set_name: str, embedder=None) -> Path:
    """Where `fieldguide eval` keeps the set's index for `embedder` (default: the local model),
    built or not."""
    from bot.api import EVAL_WORK, eval_index
    from index.embedders import make_embedder

    return Path(eval_index(ROOT / EVAL_WORK, set_dir(set_name), embedder or make_embedder()))


def eval_db(set_name: str, embedder) -> Path:
    """The eval set indexed with `embedder` where `fieldguide eval` keeps it (.fieldguide/eval,
    incremental: built once, then shared by eval, calibrate and every bench)."""
    from index.indexer import index_folder

    db = eval_path(set_name, embedder)
    index_folder(db, set_dir(set_name) / "docs", embedder)
    return db


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section `name` of bench/RESULTS.md, stamped with the machine and
    date."""
    text = (
        RESULTS.read_text()
        if RESULTS.exists()
        else "# Benchmark results\n\nWritten by the scripts in bench/ (see bench/README.md).\n"
    )
    stamp = (
        f"_{date.today().isoformat()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}_\n\n"
    )
    block = f"<!-- {name}:start -->\n{stamp}{body.strip()}\n<!-- {name}:end -->"
    pattern = re.compile(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", re.S)
    text = (
        pattern.sub(lambda _: block, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + block + "\n"
    )
    RESULTS.write_text(text)
    print(f"\nwrote the '{name}' section of {RESULTS.relative_to(ROOT)}")


def table(headers: list[str], rows: list[list]) -> str:
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def in_checkout(script: str, flag: str, root: Path):
    """What `script FLAG root` prints on its last line as JSON: a bench's figure of the checkout
    at `root`, taken in a process of its own so that it runs that checkout's modules, not ours."""
    run = [sys.executable, script, flag, str(root)]
    out = subprocess.run(run, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])
