"""Hostile input and faults: memory bounded by what the docs say, disk full, read-only files."""

import os
import sqlite3
import subprocess
import sys

from index.embedders import VoyageEmbedder
from index.indexer import index_folder
from tests.conftest import ROOT, write_docs
from tests.stubs import voyage_embeddings

LONG_INTENT = "i" * 64  # the longest valid name


def many_chunk_docs(root, intent: str, docs: int = 100, sections: int = 30):
    """`docs` x `sections` chunks (one per section), every doc in `intent` but one."""
    files: dict[str, str | bytes] = {
        "other.md": "---\nintent: other\n---\n# Other\n\nSomething else.\n"
    }
    for d in range(docs):
        body = "".join(
            f"## Section {s}\n\nWidget {d} part {s} is tuned by setting knob {d * 100 + s}.\n\n"
            for s in range(sections)
        )
        files[f"doc{d:03}.md"] = f"---\nintent: {intent}\n---\n# Doc {d}\n\n{body}"
    return write_docs(root, files)


def peak_rss_mb(argv: list[str], env: dict) -> tuple[int, str]:
    """Run a command in a child process; (its peak RSS in MB, its stdout). The child runs under
    a small Python wrapper so that RUSAGE_CHILDREN sees only that command."""
    wrapper = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]);"
        " print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024,"
        " r.returncode, file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapper, *argv], env=env, capture_output=True, text=True, timeout=60
    )
    mb, code = out.stderr.split()[-2:]
    assert code == "0", out.stderr
    return int(mb), out.stdout


def test_a_long_intent_costs_no_memory_per_chunk(tmp_path, stub):
    stub.route("/v1/embeddings", voyage_embeddings(8))
    docs = many_chunk_docs(tmp_path / "docs", LONG_INTENT)
    db = tmp_path / "i.db"
    embedder = VoyageEmbedder(api_key="k", model="voyage-3.5", base_url=f"{stub.url}/v1")
    summary = index_folder(db, docs, embedder, embed_batch=1000)
    assert summary.chunks >= 3000
    env = {
        **os.environ,
        "VOYAGE_API_KEY": "k",
        "VOYAGE_BASE_URL": f"{stub.url}/v1",
        "PYTHONPATH": str(ROOT),
    }
    argv = [sys.executable, "-m", "bot.cli", "search", "knob 4207", "--db", str(db), "--k", "3"]
    mb, out = peak_rss_mb(argv, env)
    assert "doc042.md" in out
    assert mb < 400, f"peak RSS {mb} MB"

    # an index written before names were checked, holding a 100,000-character intent, loads in
    # as little: one copy of the name, an integer id per chunk
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE docs SET intent = ? WHERE path != 'other.md'", ["x" * 100_000])
    mb_old, out = peak_rss_mb(argv, env)
    assert "doc042.md" in out
    assert mb_old < mb + 50, f"peak RSS {mb_old} MB against {mb} MB"
