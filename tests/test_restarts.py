"""Acknowledged questions survive a stop: a real `fieldguide serve --http` on one machine (its
SQLite index), 20 signed mentions acknowledged, then SIGTERM or SIGKILL. Every question is answered
exactly once, before the process exits or by the next start, or (grown too old meanwhile) gets an
apology in its thread; new events are refused while it stops."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from urllib.error import URLError

import pytest

from bot.slack.listeners.common import TOO_LATE
from tests.conftest import ROOT
from tests.standins import slack_harness
from tests.standins.fleet import FleetSlack, Replica, mention

QUESTIONS = (
    "How many times is a failed webhook retried?",
    "How do I verify a webhook signature?",
    "How do I rotate an API key?",
    "What does error TW-1429 mean?",
)
QUEUED = 20


def wait(condition, timeout: float = 60.0):
    return slack_harness.wait(condition, timeout, "serve")


@pytest.fixture
def mock():
    m = FleetSlack()
    yield m
    m.close()


@pytest.fixture
def server(mock, examples_template, tmp_path):
    """`serve(**env)`: `fieldguide serve --http` on a copy of the examples index (the same copy
    each time in one test: a restart), answering one question at a time so that questions queue."""
    shutil.copyfile(examples_template, tmp_path / "bot.db")
    started: list[Replica] = []

    def serve(**env: str) -> Replica:
        env = {"FIELDGUIDE_ANSWER_WORKERS": "1", **env}
        r = Replica("bot", "", mock.url, tmp_path, False, **env)  # HTTP
        started.append(r)
        r.wait_ready()
        return r

    yield serve
    for r in started:
        r.stop()


def ask_all(r: Replica) -> list[str]:
    """QUEUED mentions, each from its own user in its own thread, all acknowledged; their ts."""
    base = int(time.time())
    stamps = [f"{base}.{i:06d}" for i in range(QUEUED)]
    for i, ts in enumerate(stamps):
        assert r.event(mention(QUESTIONS[i % len(QUESTIONS)], ts), f"EvQ{i}") == 200
    return stamps


def replies_in(mock: FleetSlack, ts: str) -> list[str]:
    """What the thread `ts` was finally told: each stream's text once stopped, each placeholder's
    (or unstopped stream's) last update, and apologies posted straight into it."""
    with mock.lock:
        final = {
            k: s["text"]
            for k, s in mock.streams.items()
            if s["thread_ts"] == ts and s["state"] == "stopped"
        }
    for u in mock.updates():
        if mock.thread_of.get(u["ts"]) == ts:
            final[u["ts"]] = u.get("text", "")
    late = [p["text"] for p in mock.posts() if p.get("thread_ts") == ts and p["text"] == TOO_LATE]
    return list(final.values()) + late


def answered(mock: FleetSlack, stamps: list[str]) -> int:
    return sum(1 for ts in stamps if [t for t in replies_in(mock, ts) if t != TOO_LATE])


def audit_threads(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT thread_ts FROM answers")]


def every_thread_told_once(mock: FleetSlack, stamps: list[str], db: Path) -> None:
    for ts in stamps:
        assert len(replies_in(mock, ts)) == 1, (ts, replies_in(mock, ts))
    recorded = audit_threads(db)
    assert len(recorded) == len(set(recorded))  # never answered twice


def test_sigterm_answers_every_acknowledged_question_before_exiting(server, mock, tmp_path):
    r = server(FIELDGUIDE_ANSWER_WORKERS="4", FIELDGUIDE_DRAIN_SECONDS="120")
    stamps = ask_all(r)
    time.sleep(0.3)
    r.proc.send_signal(signal.SIGTERM)
    # new events are refused meanwhile (the port is closed): Slack sends them again later
    time.sleep(0.5)
    with pytest.raises((URLError, ConnectionError)):
        r.event(mention(QUESTIONS[0], f"{int(time.time())}.999999"), "EvLate")
    assert r.proc.wait(60) == 0
    assert answered(mock, stamps) == QUEUED
    every_thread_told_once(mock, stamps, tmp_path / "bot.db")
    assert "stopped, every question answered" in r.log_text()


def test_sigterm_past_the_drain_bound_leaves_the_rest_to_the_next_start(server, mock, tmp_path):
    r = server(FIELDGUIDE_DRAIN_SECONDS="0.1")
    stamps = ask_all(r)
    r.proc.send_signal(signal.SIGTERM)
    assert r.proc.wait(30) == 0
    assert "question(s) unanswered: the next start answers them" in r.log_text()
    before = answered(mock, stamps)
    assert before < QUEUED
    server()  # the next start
    wait(lambda: answered(mock, stamps) == QUEUED)
    every_thread_told_once(mock, stamps, tmp_path / "bot.db")


def test_sigkill_the_next_start_answers_what_was_acknowledged(server, mock, tmp_path):
    r = server()
    stamps = ask_all(r)
    time.sleep(0.3)
    r.proc.send_signal(signal.SIGKILL)
    r.proc.wait(10)
    assert answered(mock, stamps) < QUEUED
    server()
    wait(lambda: answered(mock, stamps) == QUEUED)
    every_thread_told_once(mock, stamps, tmp_path / "bot.db")


def test_what_grew_too_old_meanwhile_gets_an_apology_in_its_thread(server, mock, tmp_path):
    r = server()
    stamps = ask_all(r)
    r.proc.send_signal(signal.SIGKILL)
    r.proc.wait(10)
    unanswered = [ts for ts in stamps if not replies_in(mock, ts)]
    assert unanswered
    time.sleep(1.5)
    server(FIELDGUIDE_RECOVER_SECONDS="1")
    wait(lambda: all(replies_in(mock, ts) for ts in stamps))
    every_thread_told_once(mock, stamps, tmp_path / "bot.db")
    assert all(replies_in(mock, ts) == [TOO_LATE] for ts in unanswered)


def test_an_event_acknowledged_before_its_listener_ran_is_handled_at_the_next_start(
    server, mock, tmp_path
):
    """The claim written before Slack's ack, left by a process that died before its listener ran
    (made here by a process that exits): the next start hands the event to Bolt again."""
    ts = f"{int(time.time())}.000777"
    body = {
        "token": "t",
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": "EvInbox",
        "event_time": int(time.time()),
        "event": mention(QUESTIONS[0], ts),
    }
    stored = {"keys": ["inbox:EvInbox"], "inbox": body, "received": time.time()}
    claim = (
        "import json, sys; from bot.state.sqlite import SqliteState; from index.store import"
        " open_db; s = SqliteState(open_db(sys.argv[1]));"
        " assert s.take_event('inbox:EvInbox', event=json.loads(sys.argv[2]))"
    )
    subprocess.run(
        [sys.executable, "-c", claim, str(tmp_path / "bot.db"), json.dumps(stored)],
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    server()
    [reply] = wait(lambda: replies_in(mock, ts))
    assert "attempts" in reply or "retried" in reply.lower()
    assert audit_threads(tmp_path / "bot.db") == [ts]
