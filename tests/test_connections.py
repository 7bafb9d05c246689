"""The index file under load, as `serve` puts it: Slack's worker threads recording answers and
claiming events, others reading the audit trail, and an index run committing beside them, each
thread on its own connection (index.store.PerThread) with SQLite's own locks between them."""

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bot.state.sqlite import SqliteState
from index.indexer import index_folder
from index.store import open_db
from router.answer import Answer
from tests.conftest import EXAMPLES, ROOT, write_docs
from tests.test_teams import ALPHA_DEPLOY

STRESS_SECONDS = 20.0


def test_writers_readers_and_an_index_run_lose_nothing(examples_db, tmp_path):  # noqa: C901
    """3 writer threads (record_answer, take_event), 3 readers (get_answer, list_answers) and
    `fieldguide index` run again and again as a subprocess, for 20 s: no call raises, no read
    comes back empty, every id a writer was given is a row another connection sees, and every
    index run succeeds."""
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    changing = sorted(docs.rglob("*.md"))[0]
    state = SqliteState(open_db(examples_db, create=False))
    stop = time.monotonic() + STRESS_SECONDS
    errors: list[str] = []
    recorded: list[int] = []
    claimed: list[str] = []
    empty_reads = [0]
    reads = [0]

    def guarded(work):
        def run():
            try:
                work()
            except Exception as e:  # noqa: BLE001  # every failure is a finding: collected, asserted below
                errors.append(f"{threading.current_thread().name}: {type(e).__name__}: {e}")

        return run

    def writer(n: int):
        i = 0
        while time.monotonic() < stop:
            i += 1
            ans = Answer(f"question {n}-{i}", f"question {n}-{i}", "ANSWER", "text")
            pk = state.record_answer(ans, {"channel": "C1", "user": f"U{n}"})
            if pk is None:
                errors.append(f"writer {n}: record_answer returned no id")
            else:
                recorded.append(pk)
            key = f"event-{n}-{i}"
            if not state.take_event(key):
                errors.append(f"writer {n}: a first claim of {key} was refused")
            claimed.append(key)

    def reader(n: int):
        while time.monotonic() < stop:
            if recorded:
                pk = recorded[-1]
                if state.get_answer(pk) is None:
                    errors.append(f"reader {n}: answer {pk} not found")
                rows = state.list_answers(limit=5)
                reads[0] += 1
                if not rows:
                    empty_reads[0] += 1
            time.sleep(0.001)

    env = os.environ | {"PYTHONPATH": str(ROOT)}
    runs: list[subprocess.CompletedProcess] = []

    def index_runs():
        n = 0
        while time.monotonic() < stop:
            n += 1
            with changing.open("a", encoding="utf-8") as f:
                f.write(f"\n\nA line added by index run {n}.\n")
            argv = [sys.executable, "-m", "bot.cli", "index", str(docs), "--db", examples_db]
            argv += ["--replace"] if n == 1 else []  # the copy's docs take the examples' place
            runs.append(subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120))

    threads = [
        threading.Thread(target=guarded(lambda n=n: writer(n)), name=f"w{n}") for n in range(3)
    ]
    threads += [
        threading.Thread(target=guarded(lambda n=n: reader(n)), name=f"r{n}") for n in range(3)
    ]
    threads.append(threading.Thread(target=guarded(index_runs), name="index"))
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not [t.name for t in threads if t.is_alive()]
    assert errors == []
    assert runs and [r.stderr for r in runs if r.returncode != 0] == []
    assert empty_reads[0] == 0 and reads[0] > 0
    # what the writers were told is stored, as a connection of its own sees it
    fresh = open_db(examples_db, create=False)
    stored = {pk for (pk,) in fresh.execute("SELECT id FROM answers")}
    assert recorded and set(recorded) <= stored and len(set(recorded)) == len(recorded)
    keys = {k for (k,) in fresh.execute("SELECT key FROM slack_events")}
    assert set(claimed) <= keys
    fresh.close()
    state.db.close()
    assert Path(examples_db).is_file()


# -- 5. questions during reindexes (SQLite) --------------------------------------------------------


def test_questions_during_reindexes_are_all_answered_and_recorded(tmp_path, local_embedder):
    """A reindex committing every half second (twice the attack's /docs-reindex rate, and a doc
    rewritten before each, so the chunks a question found leave the index) while three threads
    ask about that doc: every question gets its answer, none raises, and every answer has its
    audit row."""
    import threading
    import time

    from bot.app import FieldGuide
    from bot.settings import Settings
    from index.store import open_db

    def rotation(n: int) -> str:
        return (
            f"---\nintent: ops\n---\n# Key rotation\n\nRotate the signing key every {n} days with"
            f" the rotation job (revision {n}). The job retires the old key after one day.\n"
        )

    docs = write_docs(
        tmp_path / "docs", {"ops/rotation.md": rotation(0), "ops/deploy.md": ALPHA_DEPLOY}
    )
    db = str(tmp_path / "index.db")
    index_folder(db, docs, local_embedder)
    guide = FieldGuide(Settings(db=db), embedder=local_embedder)
    guide.ask("warm up")
    stop = threading.Event()
    errors: list[str] = []
    answered: list[int | None] = []
    reindexes = 0

    def reindex() -> None:
        nonlocal reindexes
        n = 1
        while not stop.is_set():
            (docs / "ops" / "rotation.md").write_text(rotation(n))
            try:
                index_folder(db, docs, local_embedder)
                reindexes += 1
            except Exception as e:  # noqa: BLE001 - counted: the test says which
                errors.append(f"reindex: {type(e).__name__}: {e}")
            n += 1
            stop.wait(0.5)

    def ask() -> None:
        while not stop.is_set():
            try:
                ans = guide.ask("How often is the signing key rotated?")
                answered.append(ans.audit_id)
            except Exception as e:  # noqa: BLE001
                errors.append(f"question: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=reindex)] + [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(8)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert reindexes >= 5 and len(answered) >= 20, (reindexes, len(answered))
    assert errors == [], sorted({e[:40] for e in errors})
    assert None not in answered  # every answer recorded
    with open_db(db).conn as conn:
        (rows,) = conn.execute("SELECT count(*) FROM answers").fetchone()
    assert rows == len(answered) + 1  # and the warm-up


def test_audit_rows_wait_for_another_writer_instead_of_being_lost(examples_db):
    """Another connection committing write after write (an index run's) while answers are
    recorded: each audit write waits its turn; none is lost to "database is locked"."""
    import threading
    import time

    from bot.state.sqlite import SqliteState
    from index.store import open_db
    from router.answer import Answer

    state = SqliteState(open_db(examples_db))
    stop = threading.Event()

    def writer() -> None:
        conn = open_db(examples_db).conn
        n = 0
        while not stop.is_set():
            with conn:
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('busy', ?)", [str(n)])
                time.sleep(0.002)
            time.sleep(0.003)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        ids = [state.record_answer(Answer(f"q{i}", "q", "ANSWER", "…"), {}) for i in range(100)]
    finally:
        stop.set()
        thread.join()
    assert None not in ids and len(set(ids)) == 100
