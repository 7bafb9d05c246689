import html

import anthropic
import yaml

from bot.cli import main
from index.search import Searcher
from index.store import load_chunks, open_db
from router.classify import ClaudeClassifier, OfflineClassifier
from router.describe import intent_headings
from tests.standins.claude import structured_kind, structured_message
from tests.standins.server import Request


def describe_answers(req: Request):
    """Messages API answers for this file's structured outputs only: a description naming the
    intent it was asked about (read back from the user turn), or a routing choice."""
    data: dict
    if structured_kind(req.json) == "describe":
        sent = req.json["messages"][0]["content"]
        intent = sent.split("<intent>", 1)[1].split("</intent>", 1)[0]
        data = {"description": f"All about {intent}.", "examples": [f"How does {intent} work?"]}
    else:
        data = {"intents": [{"intent": "webhooks", "confidence": 0.8}]}
    return 200, structured_message(data)


def test_headings_name_each_intents_biggest_docs(examples_db):
    records, _ = load_chunks(open_db(examples_db, create=False), None)
    headings = intent_headings(records, n=3)
    assert set(headings) == {r["intent"] for r in records}
    for intent, found in headings.items():
        titles = {r["title"] for r in records if r["intent"] == intent}
        assert 1 <= len(found) <= 3 and found[0] in titles


def test_describe_offline_drafts_from_headings_and_keeps_written_descriptions(
    examples_db, tmp_path, capsys, local_embedder
):
    from index.indexer import index_folder
    from index.store import load_intents
    from tests.conftest import write_docs

    # a docs folder without intents.yaml: every intent is drafted
    docs = write_docs(
        tmp_path / "docs",
        {
            "a.md": "---\ntitle: Rotating keys\nintent: auth\n---\n# Rotating keys\n\nRoll them.\n",
            "b.md": "---\ntitle: Refunds\nintent: billing\n---\n# Refunds\n\nAsk support.\n",
        },
    )
    db = str(tmp_path / "plain.db")
    index_folder(db, docs, local_embedder)
    assert main(["intents", "--describe", "--db", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# intents.yaml drafted by `fieldguide intents --describe` (offline")
    assert yaml.safe_load(out) == {
        "auth": {"description": "Docs on Rotating keys.", "examples": []},
        "billing": {"description": "Docs on Refunds.", "examples": []},
    }
    # the example docs have an intents.yaml: its descriptions and examples stay as written
    assert main(["intents", "--describe", "--db", examples_db]) == 0
    drafted = yaml.safe_load(capsys.readouterr().out)
    for i in load_intents(open_db(examples_db, create=False)):
        if i["description"]:
            assert drafted[i["name"]] == {
                "description": i["description"],
                "examples": i["examples"],
            }


def test_describe_with_claude(stub, tmp_path, capsys, monkeypatch, local_embedder):
    from index.indexer import index_folder
    from tests.conftest import write_docs

    docs = write_docs(
        tmp_path / "docs",
        {"a.md": "---\ntitle: Rotating keys\nintent: auth\n---\n# Rotating keys\n\nRoll them.\n"},
    )
    db = str(tmp_path / "plain.db")
    index_folder(db, docs, local_embedder)
    stub.route("/v1/messages", describe_answers)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
    assert main(["intents", "--describe", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "(with claude-sonnet-5-5)" in out.splitlines()[0]
    assert yaml.safe_load(out) == {
        "auth": {"description": "All about auth.", "examples": ["How does auth work?"]}
    }
    [call] = stub.calls("/v1/messages")
    assert structured_kind(call.json) == "describe" and "tool_choice" not in call.json
    assert "- Rotating keys" in call.json["messages"][0]["content"]
    # Claude down: the offline draft, and the reason on stderr
    stub.route("/v1/messages", (529, {"type": "error", "error": {"type": "overloaded_error"}}))
    monkeypatch.setenv("FIELDGUIDE_MAX_RETRIES", "0")
    assert main(["intents", "--describe", "--db", db]) == 0
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["auth"]["description"] == "Docs on Rotating keys."
    assert "auth: Claude unavailable (OverloadedError); drafted from its headings" in captured.err


def test_claude_routing_sees_each_intents_headings(stub, examples_db, local_embedder):
    db = open_db(examples_db, create=False)
    records, vectors = load_chunks(db, local_embedder.name)
    from index.store import load_intents

    intents = load_intents(db)
    headings = intent_headings(records)
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
    searcher = Searcher(records, vectors)
    classifier = ClaudeClassifier(
        client, "claude-haiku-4-5", intents, OfflineClassifier(searcher), headings
    )
    stub.route("/v1/messages", describe_answers)
    result = classifier.classify("Why are my deliveries retried?", None)
    assert result.source == "claude" and result.ranked == [("webhooks", 0.8)]
    [call] = stub.calls("/v1/messages")
    assert structured_kind(call.json) == "classify" and "tool_choice" not in call.json
    # the taxonomy is data in the user turn (escaped, inside <intents>), not the system prompt
    system = call.json["system"][0]["text"]
    taxonomy = html.unescape(call.json["messages"][0]["content"][0]["text"])
    for intent in intents:
        line = f"- {intent['name']}: {intent['description'] or '(no description)'}"
        assert line + f"\n    headings: {'; '.join(headings[intent['name']])}" in taxonomy
    assert "headings:" not in system
