"""Index generations in one long-lived process (RESULTS.md section generations): resident memory
after each of 20 reindexes of the example docs (a doc changed each time, so each commits a new
generation), with a question after each that reads what the question's path derives from a
generation (a typo: the docs' words; another language: the docs' language), and how many old
generations' Searchers are still alive (weak references).

`python bench/generations.py` (`--before DIR`: the same in another checkout, e.g. one made with
`git worktree add /tmp/before <commit>`, reported beside this one; `--no-write`: print only).
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import shutil
import sys
import tempfile
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", type=Path, help="print measure() of this checkout as JSON")
    parser.add_argument("--before", type=Path)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure.resolve())))
        return
    # only now: harness puts this checkout first on sys.path
    from harness import in_checkout, table, write_section

    here = Path(__file__).resolve().parents[1]
    roots = {"before": args.before, "now": here} if args.before else {"now": here}
    rows = []
    for name, root in roots.items():
        m = in_checkout(__file__, "--measure", root.resolve())
        r = m["rss"]
        rows.append([name, round(r[2]), round(r[9]), round(r[-1]), round(r[-1] - r[2]), m["alive"]])
        print(*rows[-1], sep="\t")
    if not args.no_write:
        body = (
            "## Index generations in one process (`bench/generations.py`)\n\n"
            f"{REINDEXES} reindexes of the example docs in one process (a doc changed each time),"
            " three questions after each (plain, a typo, German); resident memory in MB after"
            " the 3rd, 10th and 20th, and the old generations' Searchers still alive at the end"
            " (weak references, after gc).\n\n"
            + table(
                ["checkout", "RSS 3rd", "RSS 10th", "RSS 20th", "20th − 3rd", "old alive"], rows
            )
        )
        write_section("generations", body)


if __name__ == "__main__":
    main()
