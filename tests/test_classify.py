import anthropic
import numpy as np
import pytest

from index.search import Searcher
from router.classify import CLASSIFY_TOOL, ClaudeClassifier, OfflineClassifier
from tests.standins.claude import OVERLOADED, claude_message, text_block, tool_use

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
    return 200, claude_message(
        tool_use(CLASSIFY_TOOL, {"intents": list(items)}), stop_reason="tool_use"
    )


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
    assert sent["tool_choice"] == {"type": "tool", "name": CLASSIFY_TOOL}
    enum = sent["tools"][0]["input_schema"]["properties"]["intents"]["items"]["properties"][
        "intent"
    ]["enum"]
    assert enum == ["authentication", "billing", "general"]
    [system] = sent["system"]  # one block, the end of the cached prefix
    assert system["cache_control"] == {"type": "ephemeral"}
    assert "API keys and OAuth" in system["text"] and "How do I rotate a key?" in system["text"]


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
        claude_message(tool_use(CLASSIFY_TOOL, {"intent": "billing"})),
        claude_message(
            tool_use(CLASSIFY_TOOL, {"intents": [{"intent": "billing", "confidence": "high"}]})
        ),
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
    assert len(stub.calls("/v1/messages")) == 3  # the SDK's own retries first
    assert result.source == "offline" and result.top == "authentication"
    assert result.note == "Claude unavailable for routing (OverloadedError)"


def test_overloaded_once_then_success(stub, offline):
    stub.route(
        "/v1/messages", [OVERLOADED, answer({"intent": "authentication", "confidence": 0.8})]
    )
    result = classifier(stub, offline, retries=2).classify("rotate", None)
    assert result.source == "claude" and result.top == "authentication"
