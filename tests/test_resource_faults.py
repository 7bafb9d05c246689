"""Hostile input and faults: memory bounded by what the docs say, disk full, read-only files."""

import ctypes
import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from index.embedders import VoyageEmbedder
from index.indexer import index_folder
from tests.conftest import ROOT, write_docs
from tests.standins.voyage import voyage_embeddings

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
    embedder = VoyageEmbedder(api_key="k", model="voyage-4", base_url=f"{stub.url}/v1")
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


def _as_plain_user() -> None:
    """Root writes to read-only files: a child run as root drops the capabilities that let it
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) from its bounding set, so the command it runs obeys
    file modes like any user's."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def fieldguide(argv: list[str], cwd: Path, env: dict, file_limit: int | None = None):
    """`fieldguide ARGV` in a child process that obeys file modes; `file_limit`: no file
    may grow past this many bytes (RLIMIT_FSIZE, with SIGXFSZ ignored: writes fail as on a full
    disk)."""

    def limit() -> None:
        _as_plain_user()
        if file_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *argv],
        cwd=cwd,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit,
    )


def voyage_index(stub, db: Path, docs: Path) -> dict:
    """Index `docs` into `db` with the Voyage stub; the environment a child needs to use it."""
    stub.route("/v1/embeddings", voyage_embeddings(8))
    embedder = VoyageEmbedder(api_key="k", model="voyage-4", base_url=f"{stub.url}/v1")
    index_folder(db, docs, embedder)
    return {"VOYAGE_API_KEY": "k", "VOYAGE_BASE_URL": f"{stub.url}/v1"}


def index_state(db: Path) -> tuple:
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM docs), (SELECT count(*) FROM chunks),"
            " (SELECT value FROM meta WHERE key = 'generation')"
        ).fetchone()


DOCS: dict[str, str | bytes] = {
    "retries.md": "---\nintent: webhooks\n---\n# Retries\n\nA failed delivery is retried 8 times.",
    "keys.md": "---\nintent: auth\n---\n# Keys\n\nAPI keys start with tw_live_.\n",
}


def test_new_index_files_are_private(tmp_path, stub):
    db = tmp_path / "new" / "i.db"
    voyage_index(stub, db, write_docs(tmp_path / "docs", DOCS))
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    conn = sqlite3.connect(db)  # the WAL and its shared memory follow the file's mode
    conn.execute("INSERT INTO meta VALUES ('x', 'y')")
    conn.commit()
    for suffix in ("-wal", "-shm"):
        assert stat.S_IMODE(Path(f"{db}{suffix}").stat().st_mode) == 0o600
    conn.close()


def test_a_full_disk_keeps_the_index_and_says_so(tmp_path, stub):
    docs = write_docs(tmp_path / "docs", DOCS)
    db = tmp_path / "i.db"
    env = voyage_index(stub, db, docs)
    before = index_state(db)
    (docs / "big.md").write_text("# Big\n\n" + "A long paragraph about webhooks. " * 20_000)
    run = fieldguide(["index", "docs", "--db", "i.db", "--quiet"], tmp_path, env, 64 * 1024)
    assert run.returncode == 2
    assert "the index is unchanged" in run.stderr and "Traceback" not in run.stderr
    # SQLite reports a write cut short by the size limit as a full disk, one refused outright
    # (EFBIG) as a write error: either message says what happened
    assert "disk is full" in run.stderr or "a full disk" in run.stderr
    assert "remove" not in run.stderr and "not an index" not in run.stderr
    assert index_state(db) == before
    ask = fieldguide(["search", "how often is a delivery retried", "--db", "i.db"], tmp_path, env)
    assert ask.returncode == 0 and "retries.md" in ask.stdout


def test_a_read_only_index_answers_and_is_not_changed(tmp_path, stub):
    docs = write_docs(tmp_path / "docs", DOCS)
    db = tmp_path / "i.db"
    env = voyage_index(stub, db, docs)
    db.chmod(0o444)
    probe = subprocess.run(
        [sys.executable, "-c", f"open({str(db)!r}, 'ab')"], preexec_fn=_as_plain_user, check=False
    )
    if probe.returncode == 0:
        pytest.skip("this user writes to read-only files (root without a way to drop that)")
    before = index_state(db)
    (docs / "keys.md").write_text("# Keys\n\nAPI keys start with tw_test_.\n")
    run = fieldguide(["index", "docs", "--db", "i.db", "--quiet"], tmp_path, env)
    assert run.returncode == 2, run.stderr
    assert "i.db cannot be written (the file is read-only): the index is unchanged" in run.stderr
    assert index_state(db) == before

    question = ["How many times is a failed delivery retried?", "--db", "i.db"]
    ask = fieldguide(["ask", *question], tmp_path, env)
    assert ask.returncode == 0, ask.stderr
    assert "Sources:" in ask.stdout
    assert ask.stderr.count("the audit trail is not recorded") == 1, ask.stderr
    search = fieldguide(["search", *question], tmp_path, env)
    assert search.returncode == 0 and "retries.md" in search.stdout

    tmp_path.chmod(0o555)  # the folder too: SQLite cannot make the WAL's shared memory
    try:
        ask = fieldguide(["ask", *question], tmp_path, env)
    finally:
        tmp_path.chmod(0o755)
    assert ask.returncode == 0 and "Sources:" in ask.stdout, ask.stderr
    assert index_state(db) == before


def test_old_answers_are_pruned_on_write_at_most_once_an_hour(tmp_path, monkeypatch):
    from bot.state import sqlite as state_module
    from bot.state.sqlite import SqliteState
    from index.store import open_db
    from router.answer import Answer

    db = open_db(tmp_path / "i.db")
    st = SqliteState(db, retention_days=90)

    def old_answer(days: int) -> int:
        created = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")
        row = db.execute(
            "INSERT INTO answers (created, question) VALUES (?, 'old') RETURNING id", [created]
        ).fetchone()
        db.execute("INSERT INTO feedback VALUES (?, 'U1', 'bad', ?)", [row[0], created])
        db.conn.commit()
        return row[0]

    old_answer(91)
    recent = old_answer(89)
    new = st.record_answer(Answer("q?", "q?", "ABSTAIN", "no"), {})
    ids = {r["id"] for r in st.list_answers(limit=10)}
    assert ids == {recent, new}
    assert db.execute("SELECT answer_id FROM feedback").fetchall() == [(recent,)]

    again = old_answer(100)  # within the hour: not pruned yet (no DELETE on every answer)
    st.record_answer(Answer("q?", "q?", "ABSTAIN", "no"), {})
    assert again in {r["id"] for r in st.list_answers(limit=10)}
    monkeypatch.setattr(state_module, "PRUNE_EVERY_SECONDS", 0)
    st.record_answer(Answer("q?", "q?", "ABSTAIN", "no"), {})
    assert again not in {r["id"] for r in st.list_answers(limit=10)}

    keep = SqliteState(db, retention_days=0)  # 0 keeps everything
    very_old = old_answer(5000)
    keep.record_answer(Answer("q?", "q?", "ABSTAIN", "no"), {})
    assert very_old in {r["id"] for r in keep.list_answers(limit=10)}


def test_the_retention_setting_reaches_the_state(monkeypatch, examples_db):
    from bot.app import FieldGuide
    from bot.state.sqlite import SqliteState

    monkeypatch.setenv("FIELDGUIDE_AUDIT_RETENTION_DAYS", "7")
    with FieldGuide.open(db=examples_db) as guide:
        assert isinstance(guide.state, SqliteState) and guide.state.retention_days == 7


def test_intents_lines_are_not_padded_to_a_huge_name(tmp_path, stub, capsys):
    from bot.cli import main

    db = tmp_path / "i.db"
    voyage_index(stub, db, write_docs(tmp_path / "docs", DOCS))
    with sqlite3.connect(db) as conn:  # as an index written before names were checked
        conn.execute("UPDATE intents SET name = ? WHERE name = 'auth'", ["x" * 100_000])
    assert main(["intents", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in out if "x" * 100 not in line) < 80
