"""Indexing throughput: a full index of openshift-4.15 (1,610 files) beside the raw embedder's
throughput on the same texts, then a no-change reindex and a one-file change.

    python bench/indexing.py [--files N]   # N: index only the first N files (quicker, less exact)
"""

from __future__ import annotations

import argparse
import shutil
import time

from harness import SHARED, WORK, table, write_section

from index.embedders import make_embedder
from index.indexer import index_folder
from index.store import open_db


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--files", type=int, default=0)
    args = p.parse_args()
    src = SHARED / "openshift-4.15" / "docs"
    docs = WORK / "indexing-docs"
    shutil.rmtree(docs, ignore_errors=True)
    files = sorted(src.rglob("*.md"))[: args.files or None]
    for f in files:
        (docs / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, docs / f.relative_to(src))
    db = WORK / "indexing.db"
    for suffix in ("", "-wal", "-shm"):
        (db.parent / (db.name + suffix)).unlink(missing_ok=True)

    embedder = make_embedder()
    embedder.embed_query("load the model first: its load time is not indexing")
    full = index_folder(db, docs, embedder)
    texts = [t for (t,) in open_db(db).execute("SELECT DISTINCT search_text FROM chunks")]
    t = time.perf_counter()
    embedder.embed_documents(texts)
    raw_s = time.perf_counter() - t
    again = index_folder(db, docs, embedder)
    victim = docs / files[len(files) // 2].relative_to(src)
    victim.write_text(
        victim.read_text() + "\n\n## Added by the benchmark\n\nOne new paragraph to embed.\n"
    )
    one = index_folder(db, docs, embedder)
    size_mb = sum(f.stat().st_size for f in db.parent.glob(db.name + "*")) / 1e6

    pipeline_rate, raw_rate = full.embedded / full.seconds, len(texts) / raw_s
    rows = [
        [
            "full index",
            f"{len(files)}",
            f"{full.chunks:,}",
            f"{full.embedded:,}",
            f"{full.seconds:.1f}",
            f"{full.chunks / full.seconds:.1f} chunks/s ({pipeline_rate:.1f} texts/s)",
        ],
        [
            "raw embedder, same texts",
            "",
            "",
            f"{len(texts):,}",
            f"{raw_s:.1f}",
            f"{raw_rate:.1f} texts/s",
        ],
        [
            "no-change reindex",
            f"{len(files)}",
            f"{again.chunks:,}",
            f"{again.embedded}",
            f"{again.seconds:.2f}",
            "",
        ],
        ["one file changed", "1", f"{one.chunks:,}", f"{one.embedded}", f"{one.seconds:.2f}", ""],
    ]
    files_arg = " --files " + str(args.files) if args.files else ""
    body = f"""## Indexing

`python bench/indexing.py{files_arg}` — openshift-4.15 docs, {embedder.name}.
The full index runs at **{100 * pipeline_rate / raw_rate:.0f}%** of the raw embedder's throughput on
the same texts.
Index file (with WAL) after the runs: {size_mb:.0f} MB.

{table(["run", "files", "chunks", "texts embedded", "seconds", "throughput"], rows)}
"""
    print(body)
    write_section("indexing", body)


if __name__ == "__main__":
    main()
