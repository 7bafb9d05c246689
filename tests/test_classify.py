import anthropic
import numpy as np
import pytest

from index.search import Searcher
from router.classify import NO_INTENT, ClaudeClassifier, OfflineClassifier
from tests.standins.claude import OVERLOADED, claude_message, structured_message, text_block

INTENTS = [
    {
        "name": "authentication",
        "description": "API keys and OAuth",
        "examples": ["How do I rotate a key?"],
    },
    {"name": "billing", "description": "Plans and invoices", "examples": []},
]


@pytest.fixture
def offline():
    recs = [
        {
            "id": f"c{i}",
            "doc": f"{intent}.md",
            "heading_path": [intent],
            "text": t,
            "search_text": t,
            "start": 0,
            "end": 0,
            "title": intent,
            "intent": intent,
            "url": None,
        }
        for i, (intent, t) in enumerate(
            [("authentication", "rotate api key"), ("billing", "invoice plan refund")]
        )
    ]
    return OfflineClassifier(Searcher(recs, np.eye(2, 4, dtype=np.float32)))


def classifier(stub, offline, retries=0):
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=retries, timeout=5)
    return ClaudeClassifier(client, "claude-haiku-4-5", INTENTS, offline)


def answer(*items):
    return 200, structured_message({"intents": list(items)})


def test_valid_answer(stub, offline):
    stub.route(
        "/v1/messages",
        answer(
            {"intent": "billing", "confidence": 0.9},
            {"intent": "authentication", "confidence": 0.2},
        ),
    )
    result = classifier(stub, offline).classify("Can I get a refund?", None)
    assert result.source == "claude" and result.ranked == [
        ("billing", 0.9),
        ("authentication", 0.2),
    ]
    sent = stub.calls("/v1/messages")[0].json
    assert sent["model"] == "claude-haiku-4-5"
    # a structured output, not a forced tool call (which the 5.5 models refuse)
    assert "tool_choice" not in sent and "tools" not in sent
    schema = sent["output_config"]["format"]["schema"]
    enum = schema["properties"]["intents"]["items"]["properties"]["intent"]["enum"]
    assert enum == ["authentication", "billing", NO_INTENT]
    assert "effort" not in sent["output_config"]  # Haiku 4.5 takes no effort
    # the instructions alone in the system prompt; the taxonomy is data in the user turn, and its
    # prefix is far below Haiku 4.5's minimum cacheable length: no marker
    [system] = sent["system"]
    taxonomy, question = sent["messages"][0]["content"]
    assert "cache_control" not in system and "cache_control" not in taxonomy
    assert "API keys and OAuth" not in system["text"]
    assert taxonomy["text"].startswith("<intents>") and taxonomy["text"].endswith("</intents>")
    assert "API keys and OAuth" in taxonomy["text"] and "How do I rotate a key?" in taxonomy["text"]
    assert question["text"] == "<question>Can I get a refund?</question>"
    # "general" is named once, as a docs intent when the docs have one: no second meaning
    assert "general" not in taxonomy["text"] + system["text"] and NO_INTENT in system["text"]


def test_intent_outside_the_taxonomy_falls_back(stub, offline):
    stub.route("/v1/messages", answer({"intent": "cooking", "confidence": 1.0}))
    result = classifier(stub, offline).classify(
        "refund my invoice", np.eye(2, 4, dtype=np.float32)[1]
    )
    assert (
        result.source == "offline"
        and result.top == "billing"
        and "not in the taxonomy" in result.note
    )


@pytest.mark.parametrize(
    "body",
    [
        claude_message(text_block("billing, I think")),
        structured_message({"intent": "billing"}),
        structured_message({"intents": [{"intent": "billing", "confidence": "high"}]}),
    ],
)
def test_malformed_output_falls_back(stub, offline, body):
    stub.route("/v1/messages", (200, body))
    result = classifier(stub, offline).classify(
        "rotate my api key", np.eye(2, 4, dtype=np.float32)[0]
    )
    assert (
        result.source == "offline" and result.top == "authentication" and "unusable" in result.note
    )


def test_overloaded_retries_then_falls_back(stub, offline):
    stub.route("/v1/messages", OVERLOADED)
    result = classifier(stub, offline, retries=2).classify(
        "rotate my api key", np.eye(2, 4, dtype=np.float32)[0]
    )
    assert len(stub.calls("/v1/messages")) == 3  # two more tries within the deadline
    assert result.source == "offline" and result.top == "authentication"
    assert result.note == "Claude unavailable for routing (OverloadedError)"


def test_overloaded_once_then_success(stub, offline):
    stub.route(
        "/v1/messages", [OVERLOADED, answer({"intent": "authentication", "confidence": 0.8})]
    )
    result = classifier(stub, offline, retries=2).classify("rotate", None)
    assert result.source == "claude" and result.top == "authentication"


def test_general_is_named_once_and_none_means_no_intent(stub, offline):
    """A docs intent called "general" is listed as what it is; the catch-all is NONE, which is no
    slug (the prompt listed "general" twice with two meanings)."""
    intents = [*INTENTS, {"name": "general", "description": "Everything else", "examples": []}]
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0, timeout=5)
    claude = ClaudeClassifier(client, "claude-haiku-5-5", intents, offline)
    stub.route("/v1/messages", answer({"intent": NO_INTENT, "confidence": 0.9}))
    result = claude.classify("What is the weather?", None)
    assert result.source == "claude" and result.ranked == []  # no intent: search everything
    sent = stub.calls("/v1/messages")[0].json
    taxonomy = sent["messages"][0]["content"][0]["text"]
    assert taxonomy.count("general") == 1 and "- general: Everything else" in taxonomy
    assert sent["output_config"]["effort"] == "low"  # Haiku 5.5 takes an effort
