"""Opening an index through its memory-mapped arrays gives the same results as the whole index in
memory; the arrays file follows the index's generations; chunk texts are read for the hits used."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from index.indexer import index_folder
from index.mapped import arrays_path, open_searcher, read_arrays
from index.search import IndexChanged, Searcher
from index.store import generation, load_chunks, open_db
from router.classify import OfflineClassifier
from router.engine import Engine
from router.policy import Router
from tests.conftest import ROOT, write_docs

QUESTIONS = [
    json.loads(line)["question"]
    for line in (ROOT / "examples" / "questions.jsonl").read_text().splitlines()
][:20]

DOCS = {
    "auth/login.md": (
        "---\ntitle: Login\nintent: authentication\n---\n# Login\n\nUse tide login.\n\n"
        "## Tokens\n\nTokens expire after 24 hours.\n"
    ),
    "billing.md": "---\nintent: billing\n---\n# Plans\n\nTeam costs $49 a month.\n",
}


def same(a, b) -> None:
    assert [(h.row, h.bm25, h.vector, h.score, h.intent) for h in a] == [
        (h.row, h.bm25, h.vector, h.score, h.intent) for h in b
    ]
    assert [h.chunk for h in a] == [h.chunk for h in b]


def test_mapped_search_gives_the_in_memory_results(examples_db, local_embedder):
    db = open_db(examples_db)
    records, vectors = load_chunks(db, local_embedder.name)
    db.conn.close()
    before = Searcher(records, vectors)  # every record and vector in memory, as replicas held it
    _, after = open_searcher(examples_db, local_embedder.name)
    assert isinstance(after.vectors, np.ndarray) and not after.vectors.flags.owndata  # mapped
    assert after.intent_names == sorted(before.intent_rows)
    routers = [Router(s, OfflineClassifier(s)) for s in (before, after)]
    for q in QUESTIONS:
        vec = local_embedder.embed_query(q)
        for mode in ("hybrid", "bm25", "vector", "rrf"):
            same(before.search(q, vec, mode=mode), after.search(q, vec, mode=mode))
        same(
            before.search(q, vec, intents=["webhooks", "api"]),
            after.search(q, vec, intents=["webhooks", "api"]),
        )
        same(before.search(q, None), after.search(q, None))
        one, two = (r.route(q, vec) for r in routers)
        assert (one.ranked, one.searched, one.reason) == (two.ranked, two.searched, two.reason)
        same(one.hits, two.hits)


def test_the_hits_of_a_result_are_read_together(examples_db, local_embedder):
    _, s = open_searcher(examples_db, local_embedder.name)
    hits = s.search("webhook signature", local_embedder.embed_query("webhook signature"))
    assert all(h._chunk is None for h in hits)  # nothing read by the search itself
    assert hits[0].chunk["intent"] == hits[0].intent
    assert all(h._chunk is not None for h in hits)  # one query read them all


def test_the_arrays_file_follows_the_generations(tmp_path, local_embedder):
    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "index.db"
    index_folder(db, docs, local_embedder)  # the run writes its generation's arrays
    first = arrays_path(db, 1)
    assert first.is_file() and read_arrays(first)[0]["generation"] == 1
    stamp = first.stat().st_mtime_ns
    engine = Engine(str(db), local_embedder)
    assert engine.route("token expiry").hits[0].chunk["doc"] == "auth/login.md"
    assert first.stat().st_mtime_ns == stamp  # mapped, not rebuilt

    (docs / "billing.md").write_text("---\nintent: billing\n---\n# Plans\n\nRefunds in 5 days.\n")
    index_folder(db, docs, local_embedder)
    assert arrays_path(db, 2).is_file() and not first.exists()  # old generations removed
    hit = engine.route("refunds days").hits[0]  # the running engine switches generation
    assert engine.loaded().generation == 2 and "Refunds" in hit.chunk["text"]


def test_an_engine_holds_numpys_blas_to_one_thread(examples_db, local_embedder):
    """A question's products run on one BLAS thread, not on a pool idle since the last question
    (router/engine.py one_blas_thread)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(limits=2, user_api="blas")
    Engine(str(examples_db), local_embedder)
    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas)


def test_another_index_with_the_same_generation_number_is_not_confused(tmp_path, local_embedder):
    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "index.db"
    index_folder(db, docs, local_embedder)
    kept = tmp_path / "kept.arrays"
    shutil.copy(arrays_path(db, 1), kept)
    for p in tmp_path.glob("index.db*"):
        p.unlink()
    other = write_docs(tmp_path / "other", {"ops.md": "---\nintent: ops\n---\n# Deploy\n\nShip.\n"})
    index_folder(db, other, local_embedder)
    shutil.copy(kept, arrays_path(db, 1))  # a stale file from the deleted index, same number
    assert generation(open_db(db)) == 1
    _, s = open_searcher(db, local_embedder.name)
    assert s.intent_names == ["ops"] and s.size == 1


def test_a_chunk_removed_after_the_search_is_a_clear_error(tmp_path, local_embedder):
    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "index.db"
    index_folder(db, docs, local_embedder)
    _, s = open_searcher(db, local_embedder.name)
    hits = s.search("team plan costs", None)
    (docs / "billing.md").unlink()
    index_folder(db, docs, local_embedder)
    with pytest.raises(IndexChanged, match="ask again"):
        [h.chunk for h in hits]


def test_an_offline_bot_does_not_load_the_anthropic_sdk():
    code = "import sys, bot.wiring, router.pipeline; print('anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr


def test_the_arrays_written_before_the_commit_are_the_committed_index(tmp_path, local_embedder):
    """The index run builds a generation's arrays from the committed index with its new docs in
    temporary tables, before committing: they are what the committed index holds, row for row."""
    from index.mapped import build

    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "index.db"
    write_docs(docs, {"ops/deploy.md": "---\nintent: ops\n---\n# Deploy\n\n## Ship\n\nShip it.\n"})
    index_folder(db, docs, local_embedder)
    (docs / "billing.md").write_text("---\nintent: billing\n---\n# Plans\n\nRefunds in 5 days.\n")
    (docs / "ops" / "deploy.md").unlink()
    write_docs(docs, {"auth/sso.md": "---\nintent: authentication\n---\n# SSO\n\nUse Okta.\n"})
    write_docs(docs, {"intents.yaml": "billing:\n  description: Plans and refunds\n"})
    index_folder(db, docs, local_embedder)
    conn = open_db(db).conn
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    head, built = build(conn, meta)
    written_head, written = read_arrays(arrays_path(db, int(meta["generation"])))
    assert written_head | {"arrays": None} == head | {"arrays": None} and head["generation"] == 2
    assert written.keys() == built.keys()
    for name, array in built.items():
        assert np.array_equal(written[name], array), name
    assert head["intent_names"] == ["authentication", "billing"] and len(written["ids"]) == 4
