"""Index generations in one long-lived process (RESULTS.md section generations): resident memory
after each of 20 reindexes of the example docs (a doc changed each time, so each commits a new
generation), with a question after each that reads what the question's path derives from a
generation (a typo: the docs' words; another language: the docs' language), and how many old
generations' Searchers are still alive (weak references). Then the first question after a reindex
of ~30,000 chunks (`first_question`): asked the moment the new generation is committed, while the
index run is still on its thread, against the same question's normal time.

`python bench/generations.py` (`--before DIR`: the same in another checkout, e.g. one made with
`git worktree add /tmp/before <commit>`, reported beside this one; `--no-write`: print only).
The 30,000 chunks are the openshift-4.15 docs and a copy of every 8th of them; their embeddings are
taken from the openshift-4.15 eval index (built once where `fieldguide eval` keeps it), so no
checkout embeds more than the changed doc.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

REINDEXES = 20
QUESTIONS = (
    "How many times is a failed webhook retried?",
    "how do I rotat an API key",
    "Wie oft wird ein fehlgeschlagener Webhook wiederholt?",
)


def rss_mb() -> float:
    """This process's resident memory now (Linux /proc), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(root: Path) -> dict:
    sys.path.insert(0, str(root))
    from index.embedders import make_embedder
    from index.indexer import index_folder
    from router.engine import Engine
    from router.pipeline import Pipeline

    work = Path(tempfile.mkdtemp(prefix="generations-"))
    docs = work / "docs"
    shutil.copytree(root / "examples" / "docs", docs)
    changing = sorted(docs.rglob("*.md"))[0]
    db = str(work / "index.db")
    embedder = make_embedder()
    index_folder(db, docs, embedder)
    pipeline = Pipeline(Engine(db, embedder))
    seen: list = []
    rss: list[float] = []
    for n in range(REINDEXES):
        seen.append(weakref.ref(pipeline.engine.loaded(wait=True).searcher))
        for q in QUESTIONS:
            pipeline.answer(q)
        with changing.open("a", encoding="utf-8") as f:
            f.write(f"\n\nA line added by reindex {n + 1}.\n")
        index_folder(db, docs, embedder)
        gc.collect()
        rss.append(rss_mb())
    current = pipeline.engine.loaded(wait=True).searcher
    gc.collect()
    alive = sum(1 for r in seen if r() is not None and r() is not current)
    shutil.rmtree(work, ignore_errors=True)
    return {"rss": rss, "alive": alive}


# the first question after a large reindex: the openshift docs and a copy of every COPY_EVERY-th
FIRST_QUESTION = "How do I add a certificate authority to the cluster proxy?"
COPY_EVERY = 8
NORMAL_RUNS = 5


def first_question(root: Path) -> dict:
    """In one process on ~30,000 chunks: the question's normal time (median of NORMAL_RUNS, after
    a warm-up), then a reindex with one doc changed on a thread of its own, the same question
    asked as soon as the new generation is committed (seen from a connection of its own), and
    how long after that commit the index run returned."""
    sys.path.insert(0, str(root))
    from index.embedders import make_embedder
    from index.indexer import index_folder
    from index.store import open_db
    from router.engine import Engine
    from router.pipeline import Pipeline

    corpus, seed = (Path(p) for p in json.loads(os.environ["GENERATIONS_FIRST"]))
    work = Path(tempfile.mkdtemp(prefix="first-question-"))
    docs = work / "docs"
    shutil.copytree(corpus, docs)
    for path in sorted(corpus.rglob("*.md"))[::COPY_EVERY]:
        copy = docs / "copies" / path.relative_to(corpus)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
    db = work / "index.db"
    open_db(db).conn.close()
    con = sqlite3.connect(db)  # the vectors, as an index of these docs already holds them
    con.execute("ATTACH DATABASE ? AS seed", [str(seed)])
    con.execute(
        "INSERT OR IGNORE INTO embeddings SELECT text_hash, model, vector FROM seed.embeddings"
    )
    con.commit()
    con.execute("DETACH DATABASE seed")
    embedder = make_embedder()
    index_folder(db, docs, embedder)
    (chunks,) = con.execute("SELECT count(*) FROM chunks").fetchone()
    pipeline = Pipeline(Engine(str(db), embedder))
    pipeline.answer(FIRST_QUESTION)  # warm-up: the model, the index, the decision files

    def timed() -> float:
        t0 = time.perf_counter()
        pipeline.answer(FIRST_QUESTION)
        return time.perf_counter() - t0

    normal = [timed() for _ in range(NORMAL_RUNS)]
    changing = sorted(docs.rglob("*.md"))[0]
    with changing.open("a", encoding="utf-8") as f:
        f.write("\n\nA paragraph added before the reindex.\n")
    generation = "SELECT value FROM meta WHERE key = 'generation'"
    (before,) = con.execute(generation).fetchone()
    ended: list[float] = []

    def reindex() -> None:
        index_folder(db, docs, embedder)
        ended.append(time.perf_counter())

    run = threading.Thread(target=reindex)
    started = time.perf_counter()
    run.start()
    while con.execute(generation).fetchone()[0] == before:
        time.sleep(0.001)
    committed = time.perf_counter()
    first = timed()
    run.join()
    after = [timed() for _ in range(3)]
    con.close()
    shutil.rmtree(work, ignore_errors=True)
    return {
        "chunks": chunks,
        "normal": statistics.median(normal),
        "first": first,
        "after": statistics.median(after),
        "reindex_to_commit": committed - started,
        "returned_after_commit": max(0.0, ended[0] - committed),  # seen 1 ms late at most
    }


def commit_of(root: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return out.stdout.strip() or str(root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", type=Path, help="print measure() of this checkout as JSON")
    parser.add_argument("--first", type=Path, help="print first_question() of this checkout")
    parser.add_argument("--before", type=Path)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure.resolve())))
        return
    if args.first:
        print(json.dumps(first_question(args.first.resolve())))
        return
    # only now: harness puts this checkout first on sys.path
    from harness import SHARED, eval_db, in_checkout, table, write_section

    from index.embedders import make_embedder

    seed = eval_db("openshift-4.15", make_embedder())
    os.environ["GENERATIONS_FIRST"] = json.dumps(
        [str(SHARED / "openshift-4.15" / "docs"), str(seed)]
    )

    here = Path(__file__).resolve().parents[1]
    roots = {"before": args.before, "now": here} if args.before else {"now": here}
    rows = []
    for name, root in roots.items():
        m = in_checkout(__file__, "--measure", root.resolve())
        r = m["rss"]
        rows.append([name, round(r[2]), round(r[9]), round(r[-1]), round(r[-1] - r[2]), m["alive"]])
        print(*rows[-1], sep="\t")
    first = []
    for name, root in roots.items():
        f = in_checkout(__file__, "--first", root.resolve())
        first.append(
            [
                name,
                f"{f['chunks']:,}",
                f["normal"],
                f["first"],
                f["after"],
                f["reindex_to_commit"],
                f["returned_after_commit"],
            ]
        )
        print(*first[-1], sep="\t")
    before = f" before: commit {commit_of(args.before)} (`--before`)." if args.before else ""
    if not args.no_write:
        body = (
            "## Index generations in one process (`bench/generations.py`)\n\n"
            f"{REINDEXES} reindexes of the example docs in one process (a doc changed each time),"
            " three questions after each (plain, a typo, German); resident memory in MB after"
            " the 3rd, 10th and 20th, and the old generations' Searchers still alive at the end"
            f" (weak references, after gc).{before}\n\n"
            + table(
                ["checkout", "RSS 3rd", "RSS 10th", "RSS 20th", "20th − 3rd", "old alive"], rows
            )
            + "\n\nThe first question after a reindex of the openshift-4.15 docs and a copy"
            f" of every {COPY_EVERY}th (one doc changed), asked in the bot's process the moment"
            " the new generation is committed, while the index run is still on its thread; its"
            f" normal time is the median of {NORMAL_RUNS} before the reindex, 'after' of 3 once"
            " the run has returned. Seconds, offline (no Claude). The first question loads the new"
            " generation (its search arrays mapped, the docs' words read); the spelling dictionary"
            " is built by the first question with a word the docs don't know (built on a thread"
            " beside it, it took the first question to 0.64 s).\n\n"
            + table(
                [
                    "checkout",
                    "chunks",
                    "normal",
                    "first after commit",
                    "after",
                    "reindex start → commit",
                    "run returned after commit",
                ],
                first,
            )
        )
        write_section("generations", body)


if __name__ == "__main__":
    main()
