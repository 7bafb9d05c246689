"""Slack's signature headers as an unauthenticated stranger may send them, over signed HTTP to the
real Bolt app (waitress, as `serve --http` runs it): whatever their shape, a plain 401, no
traceback, and nothing reaches a listener."""

import http.client
import json
import logging
import time

import pytest
from slack_sdk.signature import SignatureVerifier

from tests.standins.slack_harness import SECRET, mention, sentinel

BODY = json.dumps(
    {"type": "event_callback", "event_id": "EvHdr", "team_id": "T1", "event": mention("x")}
).encode()


def good_signature(ts: str) -> str:
    sig = SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=BODY.decode())
    assert sig is not None
    return sig


NOW = str(int(time.time()))
MALFORMED = {
    "400 digits": ("9" * 400, None),
    "5000 digits": ("9" * 5000, None),
    "negative": ("-" + "9" * 30, None),
    "a float": ("1e400", None),
    "underscores": ("1_7" * 5, None),
    "not a number": ("soon", None),
    "empty": ("", None),
    "non-ASCII digits": ("١٧٠٠٠٠٠٠٠٠", None),
    "non-ASCII signature": (NOW, "v0=é" + "0" * 60),
    "huge signature": (NOW, "v0=" + "a" * 20000),
    "no v0": (NOW, "0" * 64),
    "empty signature": (NOW, ""),
}


def post(port: int, headers: dict[str, str]) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("POST", "/slack/events")
        for name, value in {
            "content-type": "application/json",
            "content-length": str(len(BODY)),
            **headers,
        }.items():
            conn.putheader(name, value.encode("utf-8"))
        conn.endheaders(BODY)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_timestamp_or_signature_is_a_plain_401(make_harness, caplog, case):
    h = make_harness("http")
    ts, sig = MALFORMED[case]
    headers = {
        "x-slack-request-timestamp": ts,
        "x-slack-signature": good_signature(ts) if sig is None else sig,
    }
    with caplog.at_level(logging.WARNING):
        status, text = post(h.server.effective_port, headers)
    assert status == 401, (status, text)
    assert "Traceback" not in text and "Internal Server Error" not in text
    # what handling the request logs, through Bolt and the app; slack_sdk's Web API client is
    # outbound only, and an earlier test's app still winding down in this process logs there
    handled = [r for r in caplog.records if r.name.split(".")[0] != "slack_sdk"]
    assert not [r for r in handled if r.exc_info or r.levelno >= logging.ERROR]
    sentinel(h)  # the app still answers, and the stranger's event reached no listener
    assert [p for p in h.mock.posts() if p["channel"] != "DSENT"] == []
