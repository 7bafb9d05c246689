"""Index generations in a long-lived process: what the question's path derives from a
generation (its docs' language, questions' languages, the docs' words) lives on that generation's
Searcher (Searcher.memo) and goes with it."""

import gc
import time
import weakref

from index.indexer import index_folder
from router.engine import Engine
from router.pipeline import Pipeline
from tests.conftest import write_docs

RETRIES = "# Webhook retries\n\nA failed webhook is retried 5 times.\n"
DOCS: dict[str, str | bytes] = {
    "auth/keys.md": "# API keys\n\nRotate an API key from the dashboard every 90 days.\n",
    "hooks/retries.md": RETRIES,
}
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
        seen.append(weakref.ref(loaded.searcher))
        for q in QUESTIONS:
            pipeline.answer(q)
        del loaded
        write_docs(docs, {"hooks/retries.md": RETRIES + f"\nRun {n}.\n"})
        index_folder(db, docs, local_embedder)
    current = pipeline.engine.loaded(wait=True).searcher
    deadline = time.monotonic() + 60  # a new generation's words are built on a thread of its own
    while time.monotonic() < deadline:
        gc.collect()
        alive = [r for r in seen if r() is not None and r() is not current]
        if not alive:
            break
        time.sleep(0.5)
    assert alive == []
