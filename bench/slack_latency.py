"""The Slack bot end to end: signed mentions sent to the real HTTP endpoint (waitress), the Web API
answered by the local stand-in, the index and model loaded first as `fieldguide serve` does.

For each question, from the moment the event is sent: the first visible sign of work (the
placeholder, or the stream's first call: with task updates, "Searching the docs"), the first
word of the answer (the first Web API call carrying its text), and done (the stream stopped, or
the placeholder replaced). Offline (no keys), then with Claude: the Messages API stand-in
(tests/standins/claude.py FakeClaude) at realistic latency (each classify / check reply 0.6 s,
the answer's first token after 1 s, then 40 words/s).

Three codes, each in a process of its own on the same index: main's (`git archive main`, the
code before task updates: "today"), and this tree's with task updates off and on.

    python bench/slack_latency.py [--before REV]    # REV: "today" (default main)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

QUESTIONS = (
    "How many times is a failed webhook retried, and over how long?",
    "How do I verify the signature of a webhook?",
    "What does error TW-1429 mean?",
    "How do I rotate an API key?",
    "How much does the Team plan cost?",
)
CLAUDE_LATENCY = 0.6  # s, each classify / extract / claim check reply
FIRST_TOKEN = 1.0  # s, before the answer's first words
WORDS_PER_SECOND = 40.0
SECRET = "bench-secret"
ROUNDS = 5  # each code is measured once a round, the codes in turn: drift on a shared machine
# falls on all of them
MARKS = ("first sign", "first word", "done")


def words_in(path: str, form: dict) -> bool:
    """Does this Web API call carry the answer's words (not a placeholder, a task, a note)?"""
    if path in ("chat.startStream", "chat.appendStream", "chat.stopStream"):
        chunks = form.get("chunks") or []
        chunks = json.loads(chunks) if isinstance(chunks, str) else chunks
        return bool(form.get("markdown_text")) or any(
            c.get("type") == "markdown_text" for c in chunks
        )
    return path in ("chat.update", "chat.postMessage") and bool(form.get("blocks"))


def marks_of(requests: list, channel: str, sent: float) -> dict | None:
    """The three marks (s after `sent`) of the answer in `channel`, None until it is done."""
    calls = [
        (r.at - sent, r.path.removeprefix("/api/"), r.form or {})
        for r in requests
        if r.path.startswith("/api/") and r.at >= sent and (r.form or {}).get("channel") == channel
    ]
    shown = [t for t, p, _ in calls if p in ("chat.startStream", "chat.postMessage")]
    worded = [t for t, p, f in calls if words_in(p, f)]
    done = [
        t for t, p, f in calls if p == "chat.stopStream" or (p == "chat.update" and words_in(p, f))
    ]
    if not (shown and worded and done):
        return None
    return {"first sign": min(shown), "first word": min(worded), "done": max(done)}


def measure(root: Path, mode: str, db: str, docs: str, claude: bool) -> dict:
    """The marks of each question, asked of the checkout at `root` (`mode`: "on" / "off" task
    updates where the code has them), with the first question's Web API calls."""
    sys.path.insert(0, str(root))
    import waitress
    from slack_sdk import WebClient

    from bot.app import FieldGuide
    from bot.settings import Settings
    from bot.slack.slack_app import build_bot, make_wsgi
    from tests.standins.claude import FakeClaude
    from tests.standins.server import StubServer
    from tests.standins.slack import BOT, SlackMock, signed_request

    extra: dict = {}
    stub = None
    if claude:
        reply: list = [
            (
                "Verify each delivery by computing an HMAC-SHA256 of the raw request body with"
                " your endpoint's signing secret and comparing it, in constant time, with the"
                " signature header.",
                [(0, 0, 1)],
            ),
            " Reject requests whose timestamp is more than five minutes old, so that a captured"
            " request cannot be replayed later, and rotate the secret from the dashboard when"
            " someone who knew it leaves the team.",
        ]
        stub = StubServer()
        stub.route(
            "/v1/messages",
            FakeClaude(
                answer=reply,
                latency=CLAUDE_LATENCY,
                first_token=FIRST_TOKEN,
                words_per_second=WORDS_PER_SECOND,
            ),
        )
        extra = {"anthropic_api_key": "bench", "anthropic_base_url": stub.url}
    mock = SlackMock()
    settings = Settings(db=db, docs=docs, slack_signing_secret=SECRET, **extra)
    guide = FieldGuide.open(settings)
    guide.engine.warm()  # as `fieldguide serve` does before it takes events
    bot = build_bot(guide, WebClient(token="xoxb-bench", base_url=mock.url + "/api/"))
    if hasattr(bot.answerer, "task_updates"):
        bot.answerer.task_updates = mode == "on"
    server = waitress.create_server(make_wsgi(bot.app, SECRET), host="127.0.0.1", port=0, threads=4)
    threading.Thread(target=server.run, daemon=True).start()
    url = f"http://127.0.0.1:{server.effective_port}/slack/events"
    samples, transcript = [], []
    for i, question in enumerate(QUESTIONS):
        ts = f"{time.time():.6f}"
        channel = f"C{i}"
        event = {
            "type": "app_mention",
            "user": f"U{i}",
            "channel": channel,
            "ts": ts,
            "event_ts": ts,
            "text": f"<@{BOT}> {question}",
        }
        body = {
            "type": "event_callback",
            "event_id": f"Ev{i}-{ts}",
            "team_id": "T1",
            "event": event,
        }
        sent = time.monotonic()
        status, _ = signed_request(url, json.dumps(body).encode(), "application/json", SECRET)
        assert status == 200, status
        deadline = sent + 60
        while (found := marks_of(mock.requests, channel, sent)) is None:
            assert time.monotonic() < deadline, f"no answer in {channel}"
            time.sleep(0.002)
        # the question path's own time (its audit row): what is left of the first word is the
        # Slack side's (the ack, the queue, the calls), apart from the path's own variation
        [row] = wait_for(
            lambda c=channel, t=ts: [
                r for r in guide.state.list_answers() if (r["channel"], r["thread_ts"]) == (c, t)
            ]
        )
        found["path"] = row["timings_ms"]["total"] / 1000
        samples.append(found)
        if i == 0:
            time.sleep(0.2)  # the last calls of the answer (a placeholder deleted)
            transcript = calls_of(mock.requests, channel)
    bot.close()
    server.close()
    mock.close()
    if stub is not None:
        stub.close()
    code = Path(sys.modules[FieldGuide.__module__].__file__ or "").parent  # the checkout that ran
    return {"samples": samples, "transcript": transcript, "code": str(code)}


def wait_for(found, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not (result := found()):
        assert time.monotonic() < deadline, "not recorded"
        time.sleep(0.005)
    return result


def calls_of(requests: list, channel: str) -> list[str]:
    lines = []
    for r in requests:
        f = r.form or {}
        if not r.path.startswith("/api/") or f.get("channel") != channel:
            continue
        shown = {k: f[k] for k in ("thread_ts", "text") if k in f}
        if "text" in shown and len(shown["text"]) > 60:
            shown["text"] = shown["text"][:60] + "…"
        chunks = f.get("chunks") or []
        for c in json.loads(chunks) if isinstance(chunks, str) else chunks:
            if c.get("type") == "task_update":
                shown.setdefault("tasks", []).append(f"{c['title'][:50]}: {c['status']}")
            elif c.get("type") == "markdown_text":
                shown["words"] = shown.get("words", 0) + len(c["text"])
        if f.get("blocks"):
            blocks = f["blocks"] if isinstance(f["blocks"], list) else json.loads(f["blocks"])
            shown["blocks"] = [b["type"] for b in blocks]
        lines.append(f"{r.path[5:]:<18} {json.dumps(shown, ensure_ascii=False)}")
    return lines


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="the commit that is 'today'")
    # the checkout to measure (its mode, index, docs and Claude or not in SLACK_LATENCY)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        how = json.loads(os.environ["SLACK_LATENCY"])
        print(json.dumps(measure(args.measure, how["mode"], how["db"], how["docs"], how["claude"])))
        return
    # only now: harness puts this checkout first on sys.path
    from harness import ROOT, WORK, in_checkout, write_section
    from hostile import checkout

    from index.embedders import make_embedder
    from index.indexer import index_folder

    docs = ROOT / "examples" / "docs"
    db = WORK / "slack-latency.db"
    index_folder(db, docs, make_embedder())
    codes = [("task updates off", ROOT, "off"), ("task updates on", ROOT, "on")]
    try:
        codes.insert(0, ("today", checkout(args.before, WORK / "slack-latency-before"), "off"))
    except subprocess.CalledProcessError:  # a clone without that commit: this tree's only
        print(f"no {args.before} to compare with: measuring this tree only", file=sys.stderr)
    for claude, section in ((False, "slack"), (True, "slack-claude")):
        samples: dict[str, list] = {name: [] for name, _, _ in codes}
        transcripts = {}
        for _ in range(ROUNDS):
            for name, root, mode in codes:
                how = {"mode": mode, "db": str(db), "docs": str(docs), "claude": claude}
                os.environ["SLACK_LATENCY"] = json.dumps(how)
                got = in_checkout(__file__, "--measure", root)
                assert Path(got["code"]).is_relative_to(root), got["code"]  # that code ran
                samples[name] += got["samples"]
                transcripts[name] = got["transcript"]
        rows = []
        for name, _, _ in codes:
            marks = {m: [s[m] for s in samples[name]] for m in MARKS}
            rows.append([name, *(f"{median(marks[m]) * 1000:.0f}" for m in MARKS)])
            rows[-1] += [f"{max(marks['first word']) * 1000:.0f}"]
            if not claude:  # offline the words come once the path is done: what is Slack's
                side = [x["first word"] - x["path"] for x in samples[name]]
                rows[-1] += [f"{median(side) * 1000:.0f}"]
            print(section, *rows[-1], sep="\t")
        write_section(section, report(section, rows, transcripts, args.before))


def report(section: str, rows: list, transcripts: dict, before: str) -> str:
    from harness import table

    what = (
        "with Claude: the Messages API stand-in at realistic latency (each classify / claim check"
        f" reply {CLAUDE_LATENCY} s, the answer's first token after {FIRST_TOKEN} s, then"
        f" {WORDS_PER_SECOND:.0f} words/s)"
        if section == "slack-claude"
        else "offline (no keys)"
    )
    headers = ["code", "first sign of work ms", "first word ms", "done ms", "slowest first word ms"]
    if section == "slack":
        headers.append("first word less the path's own time ms")
    calls = "\n".join(transcripts["task updates on"])
    title = "with Claude" if section == "slack-claude" else "offline"
    note = (
        ""
        if section == "slack-claude"
        else " Offline the words come once the question path is done: the last column is the first"
        " word less the path's own time (its audit row's `total`), what the Slack side adds (the"
        " ack, the queue, the calls before and the one carrying the words), apart from the"
        " path's own variation on a shared machine."
    )
    return f"""## Slack, {title}: the first sign of work and the first word

`python bench/slack_latency.py` — {len(QUESTIONS)} signed mentions to the bot's HTTP endpoint,
{what}; Web API stand-in local; each code asked them {ROUNDS} times, the codes in turn; medians
over the {len(QUESTIONS) * ROUNDS} answers, in ms from sending the event. The
first sign of work is the placeholder ("today", task updates off) or the stream's first task
update ("Searching the docs"); the first word is the first call carrying the answer's text.
"today" is `{before}`'s code (`git archive`); each code runs in a process of its own on the same
index.{note}

{table(headers, rows)}

The Web API calls of the first question, task updates on:

```
{calls}
```
"""


if __name__ == "__main__":
    main()
