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
from index.store import open_db
from router.answer import Answer
from tests.conftest import EXAMPLES, ROOT

STRESS_SECONDS = 20.0


def test_writers_readers_and_an_index_run_lose_nothing(examples_db, tmp_path):  # noqa: C901
    """3 writer threads (record_answer, claim_event), 3 readers (get_answer, list_answers) and
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
            if not state.claim_event(key):
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
