"""What the third attack found (issue 35), each row held by a test that failed before its fix:
a scoped question reading only its scope's words, owners from the deployment, credentials in git
URLs, deceptive links, questions during reindexes, calibration's inputs, /healthz, a size cap on
docs, failing pulls shown as failing, hand-offs by the asker only, malformed signed bodies."""

from __future__ import annotations

import json

import pytest

from index.indexer import index_folder
from router.engine import Engine, Scope
from router.pipeline import Pipeline
from tests.conftest import write_docs

# -- 1. a scoped question reads its scope's words only ------------------------------------------

ALPHA_KEYS = (
    "---\nintent: alpha\n---\n# Signing keys\n\n"
    "Rotate the signing key every ninety days with the key rotation job. The rotation job"
    " writes the new key to the vault and retires the old key after one day.\n"
)
ALPHA_DEPLOY = (
    "---\nintent: alpha\n---\n# Deploys\n\n"
    "Deploys run from the release branch. A deploy waits for the health checks to pass.\n"
)
ALPHA_HANDOVER = (  # a doc of alpha's folder that joins bravo's intent
    "---\nintent: bravo\n---\n# Handover to bravo\n\nAlpha hands incidents to bravo on call.\n"
)
BRAVO_VAULT = (
    "---\nintent: bravo\n---\n# Vault access\n\n"
    "The zephyrquill passphrase opens the bravo vault. Rotate the zephyrquill key with the"
    " bravo key rotation job.\n"
)


@pytest.fixture(scope="module")
def two_teams(tmp_path_factory, local_embedder) -> str:
    root = tmp_path_factory.mktemp("teams")
    docs = write_docs(
        root / "docs",
        {
            "alpha/keys.md": ALPHA_KEYS,
            "alpha/deploys.md": ALPHA_DEPLOY,
            "alpha/handover.md": ALPHA_HANDOVER,
            "bravo/vault.md": BRAVO_VAULT,
        },
    )
    db = str(root / "index.db")
    index_folder(db, docs, local_embedder)
    return db


def test_a_scoped_question_reads_only_its_scopes_words(two_teams, local_embedder):
    pipeline = Pipeline(Engine(two_teams, local_embedder))
    alpha = Scope("#alpha", folders=("alpha/",))
    # unscoped, the typo is read as the other team's word: the whole index knows it
    everywhere = pipeline.answer("how do I rotate the zephyrqill key")
    assert 'read "zephyrqill" as "zephyrquill"' in everywhere.trace.notes
    # scoped to alpha, nothing of bravo's vocabulary shows: no correction to it, and bravo's word
    # is as unknown to the refusal as a word no doc holds
    typo = pipeline.answer("how do I rotate the zephyrqill key", scope=alpha)
    assert "zephyrquill" not in json.dumps(typo.to_json() | {"notes": typo.trace.notes})
    theirs = pipeline.answer("how do I rotate the zephyrquill key", scope=alpha)
    nobodys = pipeline.answer("how do I rotate the qorvanthex key", scope=alpha)
    assert theirs.decision == nobodys.decision == "ABSTAIN"
    assert "zephyrquill" in theirs.trace.evidence["unknown_words"]
    assert theirs.text == nobodys.text.replace("qorvanthex", "zephyrquill")
    assert all(h["doc"].startswith("alpha/") for h in theirs.trace.hits)


def test_claude_routes_a_scoped_question_on_its_scopes_headings_only(two_teams, local_embedder):
    import anthropic

    from bot.testing.stubs import FakeClaude, StubServer

    stub = StubServer()
    try:
        fake = FakeClaude(intents=[{"intent": "bravo", "confidence": 0.9}])
        stub.route("/v1/messages", fake)
        client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
        models = {"condense": "m", "extract": "m", "answer": "m", "check": "m"}
        pipeline = Pipeline(Engine(two_teams, local_embedder, client, "m"), client, models)
        pipeline.answer("Who takes incidents on call?", scope=Scope("#alpha", folders=("alpha/",)))
        [classify] = fake.calls("classify")
        taxonomy = json.dumps(classify)
        assert "Handover to bravo" in taxonomy  # bravo's doc inside alpha's folder
        assert "Vault access" not in taxonomy  # bravo's own docs: outside the scope
    finally:
        stub.close()
