"""Freshness: the time from a doc's commit to the bot answering from it, with the docs in a git
repository (FIELDGUIDE_DOCS_GIT, a bare repository on this machine) and `serve`'s scheduled refresh
(FIELDGUIDE_REFRESH_EVERY), offline.

    python bench/freshness.py [--sets examples claude-docs openshift-4.15] [--every 10] [--trials 8]

For each docs set: the repository is made and indexed once (the first pull and full index, timed
but not the figure). Then, per trial, a new doc with made-up names is committed and pushed at a
random moment of the refresh period, and the question only it answers is asked every 0.25 s
(the offline pipeline, as the Slack bot runs it) until an answer cites it: commit → answer. Then
the parts of one refresh, by hand: the pull, the incremental index run (one new doc), the engine's
load of the new index, and the first answer. The delay is bounded by one period plus that work;
on average it is half a period plus it.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import time
from datetime import UTC, datetime

from harness import ROOT, SHARED, WORK, ms, table, write_section

from bot.app import FieldGuide
from bot.settings import Settings
from bot.slack.reindex import Refresher, Reindexer
from bot.state.memory import InProcess
from index.embedders import make_embedder

BIRDS = [
    "pelican",
    "heron",
    "osprey",
    "kestrel",
    "plover",
    "avocet",
    "curlew",
    "dunlin",
    "godwit",
    "shrike",
]
THINGS = ["ferry", "lantern", "harbour", "anchor", "beacon", "capstan", "rudder", "bollard"]
DAYS = ["Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays"]


def git(*args: str, cwd=None) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com")
    env |= {"GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def docs_of(name: str):
    return ROOT / "examples" / "docs" if name == "examples" else SHARED / name / "docs"


class Repo:
    def __init__(self, work, docs):
        self.bare, self.author = work / "docs.git", work / "author"
        git("init", "-q", "--bare", "-b", "main", str(self.bare))
        git("clone", "-q", str(self.bare), str(self.author))
        git("checkout", "-q", "-b", "main", cwd=self.author)
        shutil.copytree(docs, self.author, dirs_exist_ok=True)
        for folder, _, _ in os.walk(self.author):  # the shared sets are read-only
            os.chmod(folder, 0o755)
        self.push()

    def push(self) -> None:
        git("add", "-A", cwd=self.author)
        git("commit", "-q", "-m", "docs", cwd=self.author)
        git("push", "-q", "origin", "main", cwd=self.author)

    def new_doc(self, i: int, rng: random.Random) -> tuple[str, str]:
        """Commit and push a doc only it answers; (its path, the question)."""
        bird, thing, day = rng.choice(BIRDS), rng.choice(THINGS), rng.choice(DAYS)
        name = f"{bird}{i}"
        path = f"fresh/{name}.md"
        (self.author / "fresh").mkdir(exist_ok=True)
        (self.author / path).write_text(
            f"---\nintent: operations\n---\n# The {name} drill\n\n"
            f"The {name} drill rotates every {thing} token on {day} at 06:00 UTC.\n"
        )
        self.push()
        return path, f"When does the {name} drill rotate {thing} tokens?"


def cites(pipeline, question: str, path: str) -> bool:
    return any(s.doc == path for s in pipeline.answer(question).sources)


def run_set(name: str, every: float, trials: int, rng: random.Random) -> tuple[list, list, dict]:
    work = WORK / "freshness" / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    repo = Repo(work, docs_of(name))
    settings = Settings(
        db=str(work / "index.db"), docs_git=str(repo.bare), refresh_every=f"{every}s"
    )
    embedder = make_embedder()
    reindexer = Reindexer(settings, embedder, InProcess())
    t0 = time.perf_counter()
    first = reindexer.refresh()
    assert first is not None
    first_s = time.perf_counter() - t0
    pipeline = FieldGuide(settings).pipeline
    pipeline.answer("warm up: load the model and the index")

    # the parts of one refresh, by hand
    parts: dict[str, list[float]] = {"pull": [], "index": [], "load": [], "answer": []}
    for i in range(trials):
        path, question = repo.new_doc(100 + i, rng)
        t = time.perf_counter()
        s = reindexer.refresh()
        total = time.perf_counter() - t
        assert s is not None and s.added == [path], s
        parts["index"].append(s.seconds)
        parts["pull"].append(total - s.seconds)
        t = time.perf_counter()
        pipeline.engine.loaded()
        parts["load"].append(time.perf_counter() - t)
        t = time.perf_counter()
        assert cites(pipeline, question, path)
        parts["answer"].append(time.perf_counter() - t)

    # end to end, with the schedule
    refresher = Refresher(reindexer, every, pipeline.engine.loaded).start()
    delays = []
    try:
        for i in range(trials):
            time.sleep(rng.uniform(0, every))  # a commit lands anywhere in the period
            path, question = repo.new_doc(200 + i, rng)
            t = time.perf_counter()
            while not cites(pipeline, question, path):
                time.sleep(0.25)
                if time.perf_counter() - t > every * 4 + 120:
                    raise SystemExit(f"{path} never answered")
            delays.append(time.perf_counter() - t)
    finally:
        refresher.stop()
    info = {"files": len(first.added), "chunks": first.chunks, "first": first_s}
    return delays, [parts[k] for k in ("pull", "index", "load", "answer")], info


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sets", nargs="+", default=["examples", "claude-docs"])
    p.add_argument("--every", type=float, default=10.0, help="refresh period, seconds")
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = random.Random(args.seed)
    rows, part_rows = [], []
    for name in args.sets:
        delays, parts, info = run_set(name, args.every, args.trials, rng)
        p50, _ = ms(delays)
        rows.append(
            [
                name,
                f"{info['files']:,}",
                f"{info['chunks']:,}",
                f"{info['first']:.1f}",
                f"{p50 / 1000:.1f}",
                f"{max(delays):.1f}",
            ]
        )
        part_rows.append([name, *(f"{ms(x)[0]:.0f}" for x in parts)])
        print(rows[-1], part_rows[-1], flush=True)
        report(args, rows, part_rows)  # after each set: a long one may be stopped


def report(args, rows: list, part_rows: list) -> None:
    body = (
        f"`python bench/freshness.py --sets {' '.join(r[0] for r in rows)} --every {args.every:g}"
        f" --trials {args.trials}` — docs in a git repository on this machine"
        " (`FIELDGUIDE_DOCS_GIT`), `FIELDGUIDE_REFRESH_EVERY="
        f"{args.every:g}s`, offline, local model; {args.trials} commits per set, each at a random"
        " moment of the period; the question asked every 0.25 s until an answer cites the new"
        f" doc. Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on a shared machine (1-minute load"
        f" average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end: other work ran"
        " alongside, so the work figures are high).\n\n"
        "**Commit → answer** (seconds):\n\n"
        + table(
            ["docs", "files", "chunks", "first pull + full index (s)", "p50", "max"],
            rows,
        )
        + "\n\n**One refresh, by parts** (p50, ms; one new doc):\n\n"
        + table(["docs", "pull", "index run", "engine load", "first answer"], part_rows)
        + "\n\nThe delay is at most one period plus the work of one refresh (pull + index run +"
        " load), on average half a period plus it: with `FIELDGUIDE_REFRESH_EVERY=15m`, a doc is"
        " answered within ~15 minutes of its commit, ~7.5 on average. A fleet adds the publish and"
        " each replica's download + switch (fleet section: a few seconds)."
    )
    write_section("freshness", "## Freshness: a doc's commit to the bot's answer\n\n" + body)


if __name__ == "__main__":
    main()
