"""Index generations in a long-lived process: what the question's path derives from a
generation (its docs' language, questions' languages, the docs' words, a scope's part) lives on
that generation's Corpus (router/corpus.py, held by engine.Loaded) and goes with it; a generation
is published with its search arrays already written, so the first question after a reindex maps
them and builds nothing."""

import gc
import json
import os
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

import pytest

from index.indexer import IndexError_, index_folder
from index.mapped import arrays_path
from index.publish import publish, sync
from router.engine import Engine, Scope
from router.pipeline import Pipeline
from tests.conftest import ROOT, write_docs

RETRIES = "# Webhook retries\n\nA failed webhook is retried 5 times.\n"
DOCS: dict[str, str | bytes] = {
    "auth/keys.md": "# API keys\n\nRotate an API key from the dashboard every 90 days.\n",
    "hooks/retries.md": RETRIES,
}
KEYS = Scope("#keys", folders=("auth/",))
QUESTIONS = (
    "How often do I rotate an API key?",
    "how many times is a failed webhok retried",  # a typo: the docs' words are read
    "Wie oft wird ein Webhook wiederholt?",  # another language: the docs' language is read
)


def test_no_old_generation_is_alive_after_20_reindexes(tmp_path, local_embedder):
    docs = write_docs(tmp_path / "docs", DOCS)
    db = tmp_path / "index.db"
    index_folder(db, docs, local_embedder)
    pipeline = Pipeline(Engine(str(db), local_embedder))
    seen: list[weakref.ref] = []
    for n in range(20):
        loaded = pipeline.engine.loaded(wait=True)
        for q in QUESTIONS:
            pipeline.answer(q)
            pipeline.answer(q, scope=KEYS)
        # the generation, and what questions derived from it: its docs' words, a scope's docs
        scoped = loaded.scoped[KEYS]
        derived = (loaded.searcher, loaded.corpus, loaded.corpus.words, scoped, scoped.words)
        seen += [weakref.ref(d) for d in derived]
        del loaded, scoped, derived
        write_docs(docs, {"hooks/retries.md": RETRIES + f"\nRun {n}.\n"})
        index_folder(db, docs, local_embedder)
    now = pipeline.engine.loaded(wait=True)
    current = {id(now.searcher), id(now.corpus), id(now.corpus.words)}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        gc.collect()
        alive = [r for r in seen if r() is not None and id(r()) not in current]
        if not alive:
            break
        time.sleep(0.5)
    assert alive == []


# A reader in another process, watching the index as fast as it can: for each generation it sees,
# whether that generation's search arrays were there, whole and its own, when it first saw it.
WATCH = """
import json, sqlite3, sys, threading
sys.path.insert(0, sys.argv[2])
from index.mapped import arrays_path, read_arrays
db, seen, stop = sys.argv[1], {}, threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
query = "SELECT value FROM meta WHERE key IN ('generation', 'generation_id') ORDER BY key"
conn = None
print("watching", flush=True)
while True:
    last = stop.is_set()  # one more look once the block has ended
    try:
        conn = conn or sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        gen, gen_id = (v for (v,) in conn.execute(query))
    except (sqlite3.Error, ValueError):  # no index yet
        conn = None
        if last:
            break
        continue
    if gen not in seen:
        try:
            head = read_arrays(arrays_path(db, int(gen)))[0]
            seen[gen] = [head["generation"], head["generation_id"]] == [int(gen), gen_id]
        except OSError:
            seen[gen] = False
    if last:
        break
print(json.dumps(seen))
"""


class Watcher:
    """WATCH over the index at `db` while the block runs; `seen`: {generation: arrays there}."""

    def __init__(self, db: Path):
        self.db = db
        self.seen: dict[int, bool] = {}

    def __enter__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WATCH, str(self.db), str(ROOT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "watching\n"
        return self

    def __exit__(self, *_):
        out = self.proc.communicate("", timeout=30)[0]
        self.seen = {int(g): ok for g, ok in json.loads(out).items()}


def test_a_generation_is_published_with_its_arrays_already_written(tmp_path, local_embedder):
    docs = write_docs(tmp_path / "docs", DOCS)
    db = tmp_path / "index.db"
    with Watcher(db) as watcher:
        index_folder(db, docs, local_embedder)
        for n in range(5):
            write_docs(docs, {f"more/page{n}.md": f"# Page {n}\n\nSection {n} of the guide.\n"})
            index_folder(db, docs, local_embedder)
        (docs / "more" / "page0.md").unlink()
        index_folder(db, docs, local_embedder)
    assert watcher.seen == dict.fromkeys(range(1, 8), True)


def test_the_first_question_after_a_reindex_maps_its_arrays(tmp_path, local_embedder):
    docs = write_docs(tmp_path / "docs", DOCS)
    db = tmp_path / "index.db"
    index_folder(db, docs, local_embedder)
    pipeline = Pipeline(Engine(str(db), local_embedder))
    pipeline.answer(QUESTIONS[0])
    write_docs(docs, {"hooks/retries.md": RETRIES + "\nRetries stop after a day.\n"})
    index_folder(db, docs, local_embedder)
    called: list[str] = []  # what this thread calls in index/mapped.py (the profiler's view)

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.endswith(
            os.path.join("index", "mapped.py")
        ):
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        answer = pipeline.answer("How long do webhook retries go on?")
    finally:
        sys.setprofile(None)
    assert pipeline.engine.loaded().generation == 2  # the question itself loaded the new one
    assert "read_arrays" in called and "build" not in called
    assert "a day" in answer.text


def test_a_full_disk_writing_the_arrays_keeps_the_published_generation(tmp_path, local_embedder):
    if not os.access("/dev/full", os.W_OK):
        pytest.skip("this system has no full device to stand for a full disk")
    docs = write_docs(tmp_path / "docs", DOCS)
    db = tmp_path / "index.db"
    index_folder(db, docs, local_embedder)
    published = arrays_path(db, 1).read_bytes()
    pipeline = Pipeline(Engine(str(db), local_embedder))
    write_docs(docs, {"hooks/retries.md": RETRIES + "\nRetries stop after a day.\n"})
    # the file the index run writes the next generation's arrays to first (mapped.write_arrays)
    # is on a full disk: every write to /dev/full fails with ENOSPC
    staged = arrays_path(db, 2)
    tmp = staged.with_name(f"{staged.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.symlink_to("/dev/full")
    with pytest.raises(IndexError_, match="No space left on device.*the index is unchanged"):
        index_folder(db, docs, local_embedder)
    assert not tmp.is_symlink() and not staged.exists()
    assert arrays_path(db, 1).read_bytes() == published
    assert pipeline.engine.loaded().generation == 1
    assert "a day" not in pipeline.answer("How long do webhook retries go on?").text
    index_folder(db, docs, local_embedder)  # room again: the next run publishes
    assert pipeline.engine.loaded().generation == 2 and not arrays_path(db, 1).exists()


def test_a_replica_installs_a_published_generation_with_its_arrays(
    tmp_path, pg_url, local_embedder
):
    docs = write_docs(tmp_path / "docs", DOCS)
    builder, replica = tmp_path / "builder.db", tmp_path / "replica" / "index.db"
    index_folder(builder, docs, local_embedder)
    publish(pg_url, builder)
    import psycopg

    with psycopg.connect(pg_url) as conn:
        sync(conn, replica)  # the first: no live file yet
        with Watcher(replica) as watcher:
            write_docs(docs, {"hooks/retries.md": RETRIES + "\nRetries stop after a day.\n"})
            index_folder(builder, docs, local_embedder)
            publish(pg_url, builder)
            sync(conn, replica)
    assert watcher.seen == {1: True, 2: True}
    assert sorted(p.name for p in replica.parent.glob("*.arrays")) == ["index.db.gen-2.arrays"]
