"""The Slack bot end to end, offline: a signed mention and a thread follow-up sent to the real HTTP
endpoint, the Web API answered by a local mock. Prints the mock's transcript and the time from the
event to the first visible sign of work (the placeholder) and to the answer.

    python bench/slack_latency.py
"""

from __future__ import annotations

import json
import threading
import time

import waitress
from _util import ROOT, table, write_section
from slack_sdk import WebClient

from bot.settings import Settings
from bot.slack_app import build_app, make_wsgi
from bot.wiring import make_pipeline
from index.embedders import make_embedder
from index.indexer import index_folder
from tests.stubs import BOT, SlackMock, signed_request

SECRET = "bench-secret"


def main() -> None:
    db = ROOT / ".fieldguide" / "bench" / "examples.db"
    index_folder(db, ROOT / "examples" / "docs", make_embedder())
    mock = SlackMock()
    settings = Settings(
        db=str(db), docs=str(ROOT / "examples" / "docs"), slack_signing_secret=SECRET
    )
    pipeline = make_pipeline(settings)
    pipeline.engine.loaded()
    pipeline.engine.embed_query("warm up")  # as `fieldguide serve` does before it takes events
    app = build_app(settings, pipeline, WebClient(token="xoxb-bench", base_url=mock.url + "/api/"))
    server = waitress.create_server(make_wsgi(app, SECRET), host="127.0.0.1", port=0, threads=4)
    threading.Thread(target=server.run, daemon=True).start()
    url = f"http://127.0.0.1:{server.effective_port}/slack/events"

    def send(event, event_id, updates_before):
        body = json.dumps(
            {"type": "event_callback", "event_id": event_id, "team_id": "T1", "event": event}
        ).encode()
        t = time.perf_counter()
        status, _ = signed_request(url, body, "application/json", SECRET)
        ack = time.perf_counter() - t
        posts_before = len(mock.posts())
        while len(mock.posts()) == posts_before:
            time.sleep(0.001)
        first = time.perf_counter() - t
        while len(mock.updates()) == updates_before:
            time.sleep(0.001)
        return status, ack, first, time.perf_counter() - t

    ts = f"{time.time():.6f}"
    q1 = {
        "type": "app_mention",
        "user": "U1",
        "channel": "C1",
        "ts": ts,
        "event_ts": ts,
        "text": f"<@{BOT}> How many times is a failed webhook retried, and over how long?",
    }
    r1 = send(q1, "EvBench1", 0)
    answer_text = mock.updates()[0]["text"]
    mock.thread_messages = [
        {"user": "U1", "text": q1["text"], "ts": ts},
        {"user": BOT, "bot_id": "B1", "text": answer_text, "ts": "1800000000.000001"},
    ]  # the mock's first ts
    ts2 = f"{time.time():.6f}"
    q2 = {
        "type": "message",
        "channel_type": "channel",
        "user": "U1",
        "channel": "C1",
        "ts": ts2,
        "thread_ts": ts,
        "text": "and how long does it wait between tries?",
    }
    mock.thread_messages.append({"user": "U1", "text": q2["text"], "ts": ts2})
    r2 = send(q2, "EvBench2", 1)

    lines = []
    for req in mock.requests:
        if req.path.startswith("/api/"):
            f = req.form or {}
            shown = {k: f[k] for k in ("channel", "ts", "thread_ts", "text") if k in f}
            if "text" in shown and len(shown["text"]) > 90:
                shown["text"] = shown["text"][:90] + "…"
            if "blocks" in f:
                blocks = f["blocks"] if isinstance(f["blocks"], list) else json.loads(f["blocks"])
                shown["blocks"] = f"{len(blocks)} blocks"
            lines.append(f"{req.path[5:]:<22} {json.dumps(shown, ensure_ascii=False)}")
    transcript = "\n".join(lines)
    print(transcript)
    rows = [
        ["mention", r1[0], f"{r1[1] * 1000:.0f}", f"{r1[2] * 1000:.0f}", f"{r1[3] * 1000:.0f}"],
        [
            "thread follow-up",
            r2[0],
            f"{r2[1] * 1000:.0f}",
            f"{r2[2] * 1000:.0f}",
            f"{r2[3] * 1000:.0f}",
        ],
    ]
    body = f"""## Slack, offline

`python bench/slack_latency.py` — signed events to the bot's HTTP endpoint (waitress), Web API
mocked locally, no keys; model and index loaded before the first event, as `fieldguide serve` does.

{table(["event", "HTTP status", "ack ms", "first visible sign ms", "answer posted ms"], rows)}

Transcript of the mock Web API calls (auth.test at start-up, then one mention and one follow-up):

```
{transcript}
```
"""
    write_section("slack", body)
    server.close()
    mock.close()


if __name__ == "__main__":
    main()
