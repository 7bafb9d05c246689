"""bot/api.py called as a library: real docs, a real SQLite index, the local model, no keys; each
function returns its result and prints nothing."""

import json

import pytest

from bot import api
from bot.settings import Settings
from index.indexer import RunSummary, SourceMismatch
from index.search import Hit
from router.answer import ABSTAIN, ANSWER, PARTIAL, Answer
from router.policy import RouteDecision
from tests.conftest import write_docs

DOCS: dict[str, str | bytes] = {
    "webhooks/retries.md": "---\nintent: webhooks\n---\n# Webhook retries\n\n"
    "A failed webhook delivery is retried 8 times over 24 hours, with exponential backoff.\n",
    "billing/invoices.md": "---\nintent: billing\n---\n# Invoices\n\n"
    "Invoices are issued on the first day of each month and can be downloaded as PDF.\n",
    "auth/keys.md": "---\nintent: auth\n---\n# Rotating API keys\n\n"
    "An API key is rotated from the dashboard; the old key keeps working for 48 hours.\n",
}
QUESTIONS = [
    ("q1", "How many times is a failed webhook retried?", "webhooks", "webhooks/retries.md"),
    ("q2", "When are invoices issued?", "billing", "billing/invoices.md"),
    ("q3", "How long does an old API key keep working after rotation?", "auth", "auth/keys.md"),
]


@pytest.fixture
def eval_set(tmp_path):
    """A small eval set in the shared/eval format: docs/, questions.jsonl, offtopic.jsonl."""
    root = tmp_path / "tiny"
    write_docs(root / "docs", DOCS)
    lines = [
        {"id": i, "question": q, "intents": [intent], "gold": [{"doc": doc}], "answer": ""}
        for i, q, intent, doc in QUESTIONS
    ]
    (root / "questions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    off = {"id": "o1", "question": "What is a good recipe for sourdough bread?", "intents": []}
    (root / "offtopic.jsonl").write_text(json.dumps(off) + "\n")
    return root


def test_index_search_and_intents_return_values_and_print_nothing(eval_set, tmp_path, capsys):
    settings = Settings()
    db = tmp_path / "tiny.db"
    stages: list[tuple[str, int]] = []
    steps: list[int] = []

    def progress(stage: str, total: int):
        stages.append((stage, total))
        return steps.append

    done = api.index(eval_set / "docs", db, settings=settings, progress=progress)
    assert isinstance(done.summary, RunSummary) and done.published is None
    assert sorted(done.summary.added) == sorted(DOCS) and done.summary.chunks == 3
    assert stages == [("Embedding", 3)] and sum(steps) == 3
    assert done.to_json()["source"] == done.source.identity and done.to_json()["added"] == 3
    again = api.index(eval_set / "docs", db, settings=settings)  # incremental: nothing to embed
    assert again.summary.embedded == 0 and len(again.summary.unchanged) == 3

    assert {i["name"]: i["docs"] for i in api.intents(db, settings=settings)} == {
        "auth": 1,
        "billing": 1,
        "webhooks": 1,
    }
    found = api.search("How often is a failed webhook retried?", db, k=2, settings=settings)
    assert isinstance(found, RouteDecision) and len(found.hits) == 2
    assert isinstance(found.hits[0], Hit) and found.hits[0].chunk["doc"] == "webhooks/retries.md"
    assert found.to_dict()["intents"][0]["intent"] == "webhooks"
    with pytest.raises(ValueError, match="the question is empty"):
        api.search("   ", db, settings=settings)
    assert capsys.readouterr() == ("", "")


def test_index_refuses_another_source_unless_replace(eval_set, tmp_path, capsys):
    db = tmp_path / "tiny.db"
    api.index(eval_set / "docs", db, settings=Settings())
    other = write_docs(tmp_path / "other", {"a.md": "# A\n\nAlpha.\n"})
    with pytest.raises(SourceMismatch):
        api.index(other, db, settings=Settings())
    done = api.index(other, db, replace=True, settings=Settings())
    assert done.summary.added == ["a.md"] and len(done.summary.removed) == 3
    assert capsys.readouterr() == ("", "")


def test_ask_answers_offline_and_records_it(examples_db, monkeypatch, capsys):
    monkeypatch.setenv("FIELDGUIDE_DB", examples_db)  # the default settings: the environment's
    ans = api.ask("How many times is a failed webhook retried, and over how long?")
    assert isinstance(ans, Answer) and ans.decision != ABSTAIN and ans.trace.offline
    assert "8 attempts" in ans.text and ans.sources and all(c.verified for c in ans.citations)
    off = api.ask("What is a good recipe for sourdough bread?", examples_db)
    assert off.decision == ABSTAIN and not off.sources
    rows = api.audit(examples_db, since="1h")
    assert [r["decision"] for r in rows] == [ABSTAIN, ans.decision]
    assert api.audit(examples_db, decision=ans.decision)[0]["id"] == ans.audit_id
    assert api.audit_stats(examples_db)["questions"] == 2
    assert capsys.readouterr() == ("", "")


def test_evaluate_scores_retrieval_and_answers(eval_set, tmp_path, capsys):
    settings = Settings()
    db = tmp_path / "tiny.db"
    stages: list[str] = []

    def progress(stage: str, total: int):
        stages.append(stage)
        return lambda n: None

    figures = api.evaluate(
        eval_set, db, modes=["hybrid", "routed"], settings=settings, progress=progress
    )
    assert figures["set"] == "tiny" and figures["questions"] == 3
    assert set(figures["modes"]) == {"hybrid", "routed"} and figures["router"] == "offline"
    assert figures["modes"]["hybrid"]["hit@5"] == 1.0
    assert stages == ["Embedding", f"Index {db}: 3 chunks (3 texts embedded now)", "Scoring"]

    result = api.evaluate(eval_set, db, answers=True, limit=2, seed=1, settings=settings)
    summary = result["summary"]
    assert summary["set"] == "tiny" and summary["sampled"] and summary["offline"]
    assert len(result["answers"]) == 2 and len(result["offtopic"]) == 1
    assert {a["decision"] for a in result["answers"]} <= {ANSWER, PARTIAL, ABSTAIN}
    assert api.audit(db) == []  # an eval run's questions are not recorded

    with pytest.raises(ValueError, match="needs docs/ and questions.jsonl"):
        api.evaluate(tmp_path / "nothing", settings=settings)
    with pytest.raises(ValueError, match="needs VOYAGE_API_KEY"):
        api.evaluate(eval_set, db, modes=["reranked"], settings=settings)
    assert capsys.readouterr() == ("", "")
