"""The Messages API stub read by the real anthropic client, plain and streamed."""

from typing import Any

import anthropic

from tests.stubs import FakeClaude

RESULTS = [
    {
        "type": "search_result",
        "source": "https://docs.example.com/a",
        "title": "A › One",
        "content": [{"type": "text", "text": "First block. "}, {"type": "text", "text": "Second."}],
        "citations": {"enabled": True},
    }
]
REQUEST: Any = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": [*RESULTS, {"type": "text", "text": "Question?"}]}],
}


def test_citation_spanning_blocks_and_stream_match_the_plain_reply(stub):
    fake = FakeClaude(
        answer=[("It has two parts.", [(0, 0, 2)]), " Done."], stop_reasons=["max_tokens"]
    )
    stub.route("/v1/messages", fake)
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
    plain: Any = client.messages.create(**REQUEST)
    with client.messages.stream(**REQUEST) as s:
        pieces = list(s.text_stream)
        streamed: Any = s.get_final_message()
    [cit] = plain.content[0].citations
    assert cit.cited_text == "First block. Second." and (
        cit.start_block_index,
        cit.end_block_index,
    ) == (0, 2)
    assert "".join(pieces) == "It has two parts. Done." and len(pieces) == 5
    assert streamed.content[0].citations == plain.content[0].citations
    assert streamed.content[1].citations == []  # a text block opens with citations: []
    assert [b.text for b in streamed.content] == [b.text for b in plain.content]
    assert streamed.stop_reason == plain.stop_reason == "max_tokens"
    assert streamed.usage.output_tokens == plain.usage.output_tokens
    assert stub.calls("/v1/messages")[1].json["stream"] is True


def test_streamed_tool_call_is_parsed_from_json_deltas(stub):
    fake = FakeClaude(passages=[{"chunk": 1, "text": "a quote"}])
    stub.route("/v1/messages", fake)
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
    tool: Any = {"name": "record_passages", "input_schema": {"type": "object"}}
    with client.messages.stream(
        model="claude-haiku-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "q"}],
        tools=[tool],
    ) as s:
        msg: Any = s.get_final_message()
    assert msg.content[0].input == {
        "passages": [{"chunk": 1, "text": "a quote"}],
        "nothing_relevant": False,
    }
    assert msg.stop_reason == "tool_use"
