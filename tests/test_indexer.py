import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from index.embedders import EmbeddingError, VoyageEmbedder
from index.indexer import IndexError_, index_folder
from index.store import ModelMismatch, generation, load_chunks, open_db
from tests.conftest import ROOT, write_docs
from tests.standins.voyage import voyage_embeddings
from tests.test_teams import ALPHA_DEPLOY, ALPHA_KEYS

DOCS = {
    "auth/login.md": (
        "---\ntitle: Login\nintent: authentication\n---\n# Login\n\nUse tide login.\n\n"
        "## Tokens\n\nTokens expire after 24 hours.\n"
    ),
    "api/limits.md": (
        "---\ntitle: Rate limits\nintent: api\nrelated_intents: [billing]\n---\n"
        "# Rate limits\n\nTeam plans get 100 req/s.\n\n"
        "## Headers\n\nRetry-After says when to retry.\n"
    ),
    "billing.md": "---\nintent: billing\n---\n# Plans\n\nTeam costs $49 a month.\n",
    "intents.yaml": (
        "api:\n  description: The REST API\n  examples:\n    - How fast can I call the API?\n"
    ),
}


def rows(db_path, sql):
    db = open_db(db_path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.conn.close()


def test_incremental_runs(tmp_path, local_embedder):
    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "index.db"
    first = index_folder(db, docs, local_embedder)
    assert (len(first.added), first.chunks, first.embedded) == (3, 5, 5)

    second = index_folder(db, docs, local_embedder)
    assert (len(second.unchanged), second.embedded, second.chunks) == (3, 0, 5)
    assert generation(open_db(db)) == 1  # nothing changed: readers need not reload

    (docs / "api/limits.md").write_text(DOCS["api/limits.md"].replace("100 req/s", "150 req/s"))
    third = index_folder(db, docs, local_embedder)
    assert third.changed == ["api/limits.md"] and third.embedded == 1  # only the edited section

    (docs / "billing.md").unlink()
    fourth = index_folder(db, docs, local_embedder)
    assert fourth.removed == ["billing.md"] and fourth.embedded == 0
    assert rows(db, "SELECT count(*) FROM docs WHERE path = 'billing.md'")[0][0] == 0
    assert rows(db, "SELECT count(*) FROM chunks WHERE doc = 'billing.md'")[0][0] == 0
    intents = dict(rows(db, "SELECT name, docs FROM intents"))
    assert intents == {"api": 1, "authentication": 1}
    assert rows(db, "SELECT description FROM intents WHERE name = 'api'")[0][0] == "The REST API"

    records, vectors = load_chunks(open_db(db), local_embedder.name)
    assert vectors is not None and vectors.shape == (4, 384) and vectors.dtype.name == "float32"
    assert abs(float((vectors**2).sum(axis=1).min()) - 1) < 1e-4


def test_bad_files_are_skipped_and_the_rest_indexed(tmp_path, local_embedder):
    docs = write_docs(
        tmp_path / "docs",
        {
            **DOCS,
            "broken.md": "---\ntitle: [oops\n---\n# Broken\ntext\n",
            "empty.md": "",
            "image.md": b"\x89PNG\r\n\x1a\n\x00\x00",
            "latin1.markdown": b"# Caf\xe9\n",
            "notes.txt": "ignored: not markdown",
        },
    )
    summary = index_folder(tmp_path / "i.db", docs, local_embedder)
    assert len(summary.added) == 3
    reasons = {s["path"]: s["reason"] for s in summary.skipped}
    assert set(reasons) == {"broken.md", "empty.md", "image.md", "latin1.markdown"}
    assert reasons["broken.md"].startswith("malformed front matter")


def test_a_file_that_turns_bad_keeps_its_last_good_version(tmp_path, local_embedder):
    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "i.db"
    index_folder(db, docs, local_embedder)
    (docs / "billing.md").write_text("---\nintent: [\n---\n# Plans\n")
    summary = index_folder(db, docs, local_embedder)
    assert summary.skipped[0]["path"] == "billing.md" and not summary.removed
    assert rows(db, "SELECT count(*) FROM chunks WHERE doc = 'billing.md'")[0][0] == 1


def test_missing_or_empty_folder_is_a_clear_error(tmp_path, local_embedder):
    with pytest.raises(IndexError_, match="Docs folder not found"):
        index_folder(tmp_path / "i.db", tmp_path / "nope", local_embedder)
    write_docs(tmp_path / "empty", {"readme.txt": "x"})
    with pytest.raises(IndexError_, match="No markdown files"):
        index_folder(tmp_path / "i.db", tmp_path / "empty", local_embedder)


def test_querying_with_another_model_says_to_reindex(tmp_path, local_embedder):
    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "i.db"
    index_folder(db, docs, local_embedder)
    with pytest.raises(ModelMismatch, match="Reindex"):
        load_chunks(open_db(db), "voyage:voyage-4")


def test_switching_model_reembeds_everything(tmp_path, local_embedder, stub):
    stub.route("/v1/embeddings", voyage_embeddings())
    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "i.db"
    index_folder(db, docs, local_embedder)
    voyage = VoyageEmbedder("test-key", base_url=stub.url + "/v1")
    summary = index_folder(db, docs, voyage)
    assert summary.embedded == 5 and len(summary.unchanged) == 3
    records, vectors = load_chunks(open_db(db), voyage.name)
    assert vectors is not None and vectors.shape == (5, 8)


def test_failed_run_leaves_previous_index_and_keeps_finished_embeddings(tmp_path, stub):
    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "i.db"
    voyage = VoyageEmbedder("test-key", base_url=stub.url + "/v1", max_retries=1)
    ok = voyage_embeddings()
    stub.route("/v1/embeddings", ok)
    index_folder(db, docs, voyage)
    before = rows(db, "SELECT id FROM chunks ORDER BY id")
    for name in ("auth/login.md", "api/limits.md"):
        (docs / name).write_text(DOCS[name] + "\n## New\n\nA new section in " + name + ".\n")
    answers = iter([ok, lambda r: (500, {"detail": "down"}), lambda r: (503, {"detail": "down"})])
    stub.route(
        "/v1/embeddings", lambda r: next(answers)(r)
    )  # the first text embeds, then Voyage is down
    with pytest.raises(EmbeddingError, match="after 2 tries"):
        index_folder(db, docs, voyage, embed_batch=1)
    assert rows(db, "SELECT id FROM chunks ORDER BY id") == before
    assert rows(db, "SELECT status FROM runs ORDER BY id DESC LIMIT 1")[0][0] == "failed"

    stub.route("/v1/embeddings", ok)
    summary = index_folder(db, docs, voyage, embed_batch=1)
    assert summary.embedded == 1  # the text embedded before the failure was kept
    assert len(summary.changed) == 2 and summary.chunks == 7


def test_run_killed_midway_leaves_previous_index_readable(tmp_path, local_embedder, stub):
    docs, db = write_docs(tmp_path / "docs", dict(DOCS)), tmp_path / "i.db"
    stub.route("/v1/embeddings", voyage_embeddings())
    env = {
        **os.environ,
        "VOYAGE_API_KEY": "test-key",
        "VOYAGE_BASE_URL": stub.url + "/v1",
        "PYTHONPATH": str(ROOT),
    }
    cmd = [sys.executable, "-m", "bot.cli", "index", str(docs), "--db", str(db), "--json"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["added"] == 3

    (docs / "billing.md").write_text(DOCS["billing.md"] + "\n## Refunds\n\nRefunds take 5 days.\n")
    release = threading.Event()
    stub.route("/v1/embeddings", lambda r: (release.wait(20), (200, {"data": [], "usage": {}}))[1])
    proc = subprocess.Popen(
        cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    stub.wait_for("/v1/embeddings", count=2, timeout=30)  # the second run is now embedding
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    release.set()
    records, vectors = load_chunks(open_db(db), "voyage:voyage-4")
    assert len(records) == 5 and not any("Refunds" in r["text"] for r in records)
    assert generation(open_db(db)) == 1


# -- 9. a size cap on docs -------------------------------------------------------------------------


def test_a_doc_over_the_size_cap_is_skipped_with_its_reason(tmp_path, monkeypatch, capsys):
    import time

    from bot.cli import main

    docs = write_docs(
        tmp_path / "docs", {"alpha/keys.md": ALPHA_KEYS, "alpha/deploys.md": ALPHA_DEPLOY}
    )
    paragraph = "The rotation job writes the new key to the vault and retires the old one.\n\n"
    with open(docs / "alpha" / "huge.md", "w") as f:
        f.write("# Huge\n\n")
        for _ in range(30 * 1024 * 1024 // len(paragraph)):  # 30 MB
            f.write(paragraph)
    db = str(tmp_path / "index.db")
    started = time.monotonic()
    assert main(["index", str(docs), "--db", db, "--json"]) == 0
    took = time.monotonic() - started
    summary = json.loads(capsys.readouterr().out)
    [skipped] = summary["skipped"]
    assert skipped["path"] == "alpha/huge.md"
    assert "30.0 MB" in skipped["reason"] and "FIELDGUIDE_MAX_DOC_MB" in skipped["reason"]
    assert summary["added"] == 2 and took < 30
    # the cap is a setting: lowered under the small docs' size, they are skipped too, and kept
    between = (len(ALPHA_DEPLOY) + len(ALPHA_KEYS)) / 2 / 1024 / 1024
    monkeypatch.setenv("FIELDGUIDE_MAX_DOC_MB", f"{between:.7f}")
    (docs / "alpha" / "keys.md").write_text(ALPHA_KEYS + "\nChanged.\n")
    assert main(["index", str(docs), "--db", db, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {s["path"] for s in summary["skipped"]} == {"alpha/huge.md", "alpha/keys.md"}
    assert summary["removed"] == 0 and summary["chunks"] > 0  # its last good version stays
    # doctor says so too, without reading it
    main(["doctor", "--db", db, "--docs", str(docs)])
    assert "would be skipped: alpha/huge.md: 30.0 MB, over the" in capsys.readouterr().out
