"""The Messages API stub read by the real anthropic client, plain and streamed; the Socket Mode
server with several connections; the stub server with a request its client never finished."""

import json
from contextlib import ExitStack
from typing import Any

import anthropic

from tests.standins.claude import FakeClaude
from tests.standins.slack import SlackMock
from tests.standins.socket_mode import SocketModeServer

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


def test_socket_mode_server_re_sends_an_unacknowledged_envelope_on_another_connection():
    """What the fleet tests rely on: Slack hands an event to one connection, and re-sends it
    (retry_attempt + 1) on another when it is not acknowledged in time or its connection closes."""
    from websockets.sync.client import connect

    mock = SlackMock()
    socket = SocketModeServer(mock)
    clients: list = []
    stack = ExitStack()
    try:
        for n in (1, 2):
            clients.append(stack.enter_context(connect(mock.socket_url)))
            assert json.loads(clients[-1].recv(5))["type"] == "hello"
            socket.wait_live(n)

        def received(d: dict) -> dict:
            return json.loads(clients[socket.connections.index(d["ws"])].recv(5))

        payload = {"type": "event_callback", "event_id": "Ev1", "event": {"type": "app_mention"}}
        t = socket.deliver(payload, resend_after=1.0)  # nobody acks the first one
        first = wait_delivery(socket, 1)
        second = wait_delivery(socket, 2)
        assert first["connection"] != second["connection"]
        one, two = received(first), received(second)
        assert (one["retry_attempt"], two["retry_attempt"]) == (0, 1)
        assert two["retry_reason"] == "http_timeout" and two["payload"] == payload
        assert one["envelope_id"] != two["envelope_id"]
        clients[socket.connections.index(second["ws"])].send(
            json.dumps({"envelope_id": two["envelope_id"]})
        )
        t.join(5)
        assert not t.is_alive() and len(socket.deliveries) == 2

        # a connection that closes with the envelope unacknowledged: re-sent on the other at once
        t = socket.deliver({**payload, "event_id": "Ev2"}, resend_after=30)
        gone = wait_delivery(socket, 3)
        received(gone)
        clients[socket.connections.index(gone["ws"])].close()
        again = wait_delivery(socket, 4)
        assert again["connection"] != gone["connection"] and received(again)["retry_attempt"] == 1
    finally:
        stack.close()
        socket.close()
        mock.close()


def wait_delivery(socket: SocketModeServer, count: int) -> dict:
    """The `count`th envelope the server delivered, with its connection as `ws`."""
    socket._wait(lambda: len(socket.deliveries) >= count, 5, f"delivery {count}")
    d = socket.deliveries[count - 1]
    return {**d, "ws": socket.connections[d["connection"]]}


def test_a_request_cut_short_by_its_client_is_never_recorded(stub):
    """A client that dies while sending (a killed process) leaves a request the service never
    receives whole: the stand-in records only the whole ones, as the service would."""
    import socket
    from urllib.parse import urlsplit

    calls: list = []

    def post(req):
        calls.append(req)
        return 200, {"ok": True}

    stub.route("/api/chat.postMessage", post)
    where = urlsplit(stub.url)
    with socket.create_connection((where.hostname, where.port)) as sock:
        sock.sendall(
            b"POST /api/chat.postMessage HTTP/1.1\r\nHost: x\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"chan'
        )
        sock.shutdown(socket.SHUT_WR)  # the rest never comes
        assert sock.recv(1024) == b""  # closed without an answer
    whole = json.dumps({"channel": "C1", "text": "hi"}).encode()
    with socket.create_connection((where.hostname, where.port)) as sock:
        sock.sendall(
            b"POST /api/chat.postMessage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(whole), whole)
        )
        assert sock.recv(1024).startswith(b"HTTP/1.0 200")
    assert [r.form for r in calls] == [{"channel": "C1", "text": "hi"}]
    assert [r.path for r in stub.requests] == ["/api/chat.postMessage"]
