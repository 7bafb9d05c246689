"""The Slack bot end to end: signed events sent to the real HTTP endpoint, the Web API answered by a
local mock.

Offline: a mention and a thread follow-up, no keys; the time from the event to the first visible
sign of work (the placeholder) and to the answer, and the mock's transcript.

With Claude: the Messages API stub (tests/standins/claude.py FakeClaude) at realistic latency
(classify and extract 0.6 s each, the answer's first token after 1 s, then 40 words/s), the answer
streamed into Slack: event → first sign (placeholder), → first answer words (chat.startStream),
→ done (chat.stopStream), and the pipeline's own overhead beside the stub's latency.

    python bench/slack_latency.py
"""

from __future__ import annotations

import json
import threading
import time

import waitress
from harness import ROOT, table, write_section
from slack_sdk import WebClient

from bot.app import FieldGuide
from bot.settings import Settings
from bot.slack.slack_app import build_app, build_bot, make_wsgi
from index.embedders import make_embedder
from index.indexer import index_folder
from tests.standins.slack import BOT, SlackMock, signed_request

SECRET = "bench-secret"


def main() -> None:
    db = ROOT / ".fieldguide" / "bench" / "examples.db"
    index_folder(db, ROOT / "examples" / "docs", make_embedder())
    mock = SlackMock()
    settings = Settings(
        db=str(db), docs=str(ROOT / "examples" / "docs"), slack_signing_secret=SECRET
    )
    guide = FieldGuide.open(settings)
    guide.engine.warm()  # as `fieldguide serve` does before it takes events
    app = build_app(guide, WebClient(token="xoxb-bench", base_url=mock.url + "/api/"))
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
    r1 = send(q1, f"EvBench1-{ts}", 0)
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
    r2 = send(q2, f"EvBench2-{ts2}", 1)

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
    claude_run(db)


CLAUDE_LATENCY = 0.6  # s, each classify / extract / condense reply
FIRST_TOKEN = 1.0  # s, before the answer's first words
WORDS_PER_SECOND = 40.0
RUNS = 5


def claude_run(db) -> None:
    from tests.standins.claude import FakeClaude, words
    from tests.standins.server import StubServer

    reply: list = [
        (
            "Verify each delivery by computing an HMAC-SHA256 of the raw request body with your"
            " endpoint's signing secret and comparing it, in constant time, with the signature"
            " header.",
            [(0, 0, 1)],
        ),
        (
            " Reject requests whose timestamp is more than five minutes old, so that a captured"
            " request cannot be replayed later, and rotate the secret from the dashboard when"
            " someone who knew it leaves the team."
        )
        * 3,
    ]
    fake = FakeClaude(
        answer=reply,
        latency=CLAUDE_LATENCY,
        first_token=FIRST_TOKEN,
        words_per_second=WORDS_PER_SECOND,
    )
    claude = StubServer()
    claude.route("/v1/messages", fake)
    mock = SlackMock()
    settings = Settings(
        db=str(db),
        docs=str(ROOT / "examples" / "docs"),
        slack_signing_secret=SECRET,
        anthropic_api_key="bench",
        anthropic_base_url=claude.url,
    )
    guide = FieldGuide.open(settings)
    guide.engine.warm()
    bot = build_bot(guide, WebClient(token="xoxb-bench", base_url=mock.url + "/api/"))
    server = waitress.create_server(make_wsgi(bot.app, SECRET), host="127.0.0.1", port=0, threads=4)
    threading.Thread(target=server.run, daemon=True).start()
    url = f"http://127.0.0.1:{server.effective_port}/slack/events"
    n_words = sum(len(words(t if isinstance(t, str) else t[0])) for t in reply)

    samples = []
    for run in range(RUNS):
        ts = f"{time.time():.6f}"
        event = {
            "type": "app_mention",
            "user": "U1",
            "channel": f"C{run}",
            "ts": ts,
            "event_ts": ts,
            "text": f"<@{BOT}> How do I verify the signature of a webhook?",
        }
        body = json.dumps(
            {
                "type": "event_callback",
                "event_id": f"EvClaude{run}-{ts}",
                "team_id": "T1",
                "event": event,
            }
        ).encode()
        seen_before = len(fake.seen)
        t = time.perf_counter()
        status, _ = signed_request(url, body, "application/json", SECRET)
        marks = {"ack": time.perf_counter() - t}
        for name, path in (
            ("first sign", "/api/chat.postMessage"),
            ("first words", "/api/chat.startStream"),
            ("done", "/api/chat.stopStream"),
        ):
            while len(mock.calls(path)) <= run:
                time.sleep(0.001)
            marks[name] = time.perf_counter() - t
        kinds = [fake.kind(b) for b in fake.seen[seen_before:]]
        stub = sum(CLAUDE_LATENCY for k in kinds if k != "answer") + sum(
            FIRST_TOKEN + (n_words - 1) / WORDS_PER_SECOND for k in kinds if k == "answer"
        )
        samples.append((status, marks, stub, kinds))
        assert status == 200

    # the same question in a plain DM, where the answer is posted whole (not streamed): its first
    # words are seen when it is done
    whole = []
    for run in range(3):
        ts = f"{time.time():.6f}"
        event = {
            "type": "message",
            "channel_type": "im",
            "user": f"UDM{run}",  # another user: U1 has used its 6 questions a minute
            "channel": f"D{run}",
            "ts": ts,
            "text": "How do I verify the signature of a webhook?",
        }
        body = json.dumps(
            {
                "type": "event_callback",
                "event_id": f"EvWhole{run}-{ts}",
                "team_id": "T1",
                "event": event,
            }
        ).encode()
        updates = len(mock.updates())
        t = time.perf_counter()
        signed_request(url, body, "application/json", SECRET)
        while len(mock.updates()) == updates:
            time.sleep(0.001)
        whole.append(time.perf_counter() - t)

    def med(values):
        return sorted(values)[len(values) // 2]

    keys = ["ack", "first sign", "first words", "done"]
    rows = [
        [
            f"run {i + 1}",
            *(f"{m[k] * 1000:.0f}" for k in keys),
            f"{stub * 1000:.0f}",
            f"{(m['done'] - stub) * 1000:.0f}",
        ]
        for i, (_, m, stub, _) in enumerate(samples)
    ]
    rows.append(
        [
            "median",
            *(f"{med([m[k] for _, m, _, _ in samples]) * 1000:.0f}" for k in keys),
            f"{med([s for _, _, s, _ in samples]) * 1000:.0f}",
            f"{med([m['done'] - s for _, m, s, _ in samples]) * 1000:.0f}",
        ]
    )
    calls = ", ".join(samples[0][3])
    appends = len(mock.calls("/api/chat.appendStream")) / RUNS
    body_md = f"""## Slack, with Claude (streamed)

`python bench/slack_latency.py` — a signed mention to the bot's HTTP endpoint, Web API mocked
locally, the Messages API answered by `tests/standins/claude.py` FakeClaude at realistic latency:
{CLAUDE_LATENCY} s for each classify / extract / claim check reply, the answer's first token after {
        FIRST_TOKEN
    } s,
then {WORDS_PER_SECOND:.0f} words/s ({n_words} words, streamed by server-sent events). Claude calls
per question: {calls}. The answer is streamed into Slack with `chat.startStream` /
`appendStream` (~{appends:.0f} a question) / `stopStream`. Times from sending the event, in ms;
"stub latency" is what the stub itself waited (its delays added up), "overhead" is done minus it:
retrieval, the pipeline's checks, the Slack calls and the HTTP hops.

{
        table(
            [
                "",
                "ack",
                "first sign (placeholder)",
                "first answer words",
                "done",
                "stub latency",
                "overhead",
            ],
            rows,
        )
    }

Not streamed (the same question in a plain DM, where the answer is posted whole), the first answer
words appear only when it is done: median {med(whole) * 1000:.0f} ms over {len(whole)} runs.
"""
    print(body_md)
    write_section("slack-claude", body_md)
    bot.close()
    server.close()
    mock.close()
    claude.close()


if __name__ == "__main__":
    main()
