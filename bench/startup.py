"""Startup: time and peak memory of a fresh process that opens the index and answers one question
offline, at 26k chunks (openshift-4.15), 200k and 1M chunks (synthetic: bench/synthetic.py), with
this tree's code ("after") and, with --before DIR, another tree's code on the same files ("before",
e.g. the main branch before the memory-mapped replica).

    python bench/startup.py [--db OPENSHIFT.db] [--before /work/main] [--sizes 26k 200k 1m]

Each (code, index) pair runs twice, caches removed first: the first run builds what that code
caches per index generation (the search arrays file; the old code's BM25 postings in SQLite), the
second is a restarted replica, the figure that matters. The old code's first run at 1M would hold
every chunk's tokens in memory to build its postings, so its cache is seeded with the same postings
instead.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
from harness import ROOT, WORK, eval_db, table, write_section
from synthetic import make_synthetic

from index.embedders import make_embedder
from index.mapped import prepare

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
sys.path.insert(0, %(root)r)
from bot.settings import Settings
from bot.app import FieldGuide
import index.search
assert index.search.__file__.startswith(%(root)r), index.search.__file__
t1 = time.perf_counter()
p = FieldGuide(Settings.load(environ={}).at(%(db)r)).pipeline
p.engine.embedder.embed_query("load the model")
t2 = time.perf_counter()
p.engine.loaded()
t3 = time.perf_counter()
ans = p.answer("How do I add a certificate authority to the cluster proxy?")
t4 = time.perf_counter()
status = dict(l.split(":", 1) for l in open("/proc/self/status") if l.startswith("Rss"))
mb = lambda k: int(status[k].split()[0]) / 1024
print(json.dumps({"anon_mb": mb("RssAnon"), "file_mb": mb("RssFile"),
                  "import_s": t1 - t0, "model_s": t2 - t1, "open_index_s": t3 - t2,
                  "first_answer_s": t4 - t3, "decision": ans.decision,
                  "sources": [s.doc for s in ans.sources],
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
SIZES = {"26k": 0, "200k": 200_000, "1m": 1_000_000}
SEED_FROM = 1_000_000  # the old code would build its postings from every chunk's tokens in memory
MEMORY_LIMIT = 16 << 30  # address space for a "before" run: fail rather than push others out


def clear_caches(db: Path) -> None:
    """Remove what either code caches per generation, so that a first run builds it."""
    for path in db.parent.glob(f"{db.name}.gen-*.arrays"):
        path.unlink()
    con = sqlite3.connect(db)
    with contextlib.suppress(sqlite3.OperationalError):  # no such table
        con.execute("DELETE FROM bm25_cache")
        con.commit()
    con.close()


def seed_old_bm25_cache(db: Path) -> None:
    """Store the index's postings the way the old code caches them (bm25_cache, npz of vocab and
    arrays), built by the streaming builder: any consistent term numbering scores the same."""
    con = sqlite3.connect(db)
    try:
        con.execute("CREATE TABLE IF NOT EXISTS bm25_cache (key TEXT PRIMARY KEY, data BLOB)")
        (gen,) = con.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        key = f"{gen}/2"  # the old code's TOKENIZER_VERSION
        _, a = prepare(db)
        buf = io.BytesIO()
        words = b"\n".join(
            a["vocab_blob"][a["vocab_starts"][i] : a["vocab_starts"][i + 1]].tobytes()
            for i in range(len(a["vocab_starts"]) - 1)
        )
        vocab = np.frombuffer(words, dtype=np.uint8)
        np.savez(
            buf,
            vocab=vocab,
            size=a["bm25_size"],
            postings_docs=a["postings_docs"],
            postings_weights=a["postings_weights"],
            offsets=a["offsets"],
            idf=a["idf"],
        )
        con.execute("INSERT INTO bm25_cache VALUES (?, ?)", [key, buf.getvalue()])
        con.commit()
    finally:
        con.close()


def run(code: Path, db: Path, limit: int | None = None) -> dict:
    def cap() -> None:
        if limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    out = subprocess.run(
        [sys.executable, "-c", CHILD % {"root": str(code), "db": str(db)}],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        cwd=WORK,
    )
    if out.returncode:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {out.returncode}: {tail[:120]}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--db", type=Path, help="the openshift-4.15 index (default: built in bench/)")
    p.add_argument("--before", type=Path, help="a source tree with the code to compare against")
    p.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    p.add_argument("--repeat", type=int, default=3, help="restarted runs of each (median shown)")
    args = p.parse_args()

    embedder = make_embedder()
    db26 = (args.db or eval_db("openshift-4.15", embedder)).resolve()
    codes = [("after", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    rows = []
    arrays: dict[str, int] = {}
    load = [os.getloadavg()[0]]
    for size in args.sizes:
        db = db26 if not SIZES[size] else WORK / f"openshift-x{size}.db"
        make_synthetic(db26, db, SIZES[size]) if SIZES[size] else None
        clear_caches(db)
        first: dict[str, dict] = {}
        again: dict[str, list[dict]] = {}
        for label, code in codes:
            if label == "before" and SIZES[size] >= SEED_FROM:
                seed_old_bm25_cache(db)
            first[label] = run(code, db, MEMORY_LIMIT if label == "before" else None)
            if label == "after":
                arrays[size] = sum(f.stat().st_size for f in db.parent.glob(f"{db.name}.gen-*"))
        for _ in range(args.repeat):  # alternated, so that both see the same load
            for label, code in codes:
                r = run(code, db, MEMORY_LIMIT if label == "before" else None)
                again.setdefault(label, []).append(r)
                load.append(os.getloadavg()[0])
        for label, _ in codes:
            print(size, label, "first:", first[label], "again:", again[label], flush=True)
            runs = [r for r in again[label] if "error" not in r]
            if not runs:
                rows.append([size, label, again[label][0]["error"], "", "", "", "", ""])
                continue
            med = {
                k: float(np.median([r[k] for r in runs]))
                for k in runs[0]
                if k.endswith(("_s", "_mb"))
            }
            seeded = label == "before" and SIZES[size] >= SEED_FROM
            built = first[label]
            rows.append(
                [
                    size,
                    label,
                    f"{built['open_index_s']:.2f}" + (" (postings seeded)" if seeded else "")
                    if "open_index_s" in built
                    else built["error"],
                    med["open_index_s"],
                    med["first_answer_s"],
                    f"{med['peak_rss_mb']:.0f}",
                    "-".join(f"{agg(r['peak_rss_mb'] for r in runs):.0f}" for agg in (min, max)),
                    f"{med['anon_mb']:.0f} / {med['file_mb']:.0f}",
                ]
            )
    headers = [
        "chunks",
        "code",
        "first open s (builds its cache)",
        "open index s",
        "first answer s",
        "peak RSS MB",
        "peak RSS range MB",
        "RSS at exit: private / file-backed MB",
    ]
    files = ", ".join(
        f"{size} {os.path.getsize(db) / 1e9:.2f} GB"
        for size in args.sizes
        if (db := db26 if not SIZES[size] else WORK / f"openshift-x{size}.db").exists()
    )
    files += "; arrays files: " + ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in arrays.items())
    body = f"""## Startup

`python bench/startup.py --before DIR` — a fresh process opens the index and answers one question
offline ({embedder.name}): seconds, and the process's peak resident memory (model included).
"before" (the code before the memory-mapped replica): every chunk record and the embedding matrix
read into memory, BM25 postings unpickled from SQLite. "after": the generation's arrays
memory-mapped, chunk records read from SQLite for the hits used.

The first open builds the per-generation cache (the arrays file; the old code's postings in SQLite,
except at 1M where they are seeded: building them the old way holds every chunk's tokens in
memory). The other columns are restarted replicas, the figure that matters: the median of
{args.repeat} runs, before and after alternated. RSS counts the pages of a memory-mapped file that
the process has touched (file-backed: shared page cache, which the kernel may reclaim); the last
column splits the RSS at exit into private memory and those pages.

200k and 1M repeat the openshift corpus with varied text and random unit vectors
(bench/synthetic.py). SQLite files: {files}. Load average during the runs: {min(load):.1f} to
{max(load):.1f} on {os.cpu_count()} cores (times stretch with it; memory does not).

{table(headers, rows)}
"""
    write_section("startup", body)


if __name__ == "__main__":
    main()
