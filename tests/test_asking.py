"""Every door's way in (bot/asking.py): the line of questions, and small talk, answers and the
audit the same through Slack (the real Bolt app over signed HTTP), `fieldguide ask` and MCP over
stdio (MCP over HTTP: tests/test_mcp_http.py)."""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import closing

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from bot.app import FieldGuide
from bot.asking import ACK_REPLY, THANKS_REPLY, Busy, Line, greeting
from bot.cli import main
from bot.settings import Settings
from tests.standins.slack_harness import dm, wait
from tests.test_mcp import stdio

QUESTION = "How many times is a failed webhook retried?"
SMALL_TALK = {"thanks!": THANKS_REPLY, "ok": ACK_REPLY}


def recorded(db: str) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return [q for (q,) in conn.execute("SELECT question FROM answers ORDER BY id")]


def examples_greeting(db: str, embedder) -> str:
    """The greeting every door gives on the example docs: with their example questions."""
    with FieldGuide.open(Settings(db=db), embedder=embedder) as guide:
        return greeting(guide.asking.examples(None))


# -- the line -------------------------------------------------------------------------------------


def test_past_its_share_or_with_the_line_full_a_question_is_turned_away_at_once():
    line = Line(workers=1, waiting=2)  # a client's share: the worker and half the waiting places
    first, second = line.place("A"), line.place("A")
    assert not first.waits and second.waits
    with pytest.raises(Busy, match="already have 2 questions"):
        line.place("A")
    line.place("B")  # the last waiting place
    with pytest.raises(Busy, match="Too many questions"):
        line.place("C")
    assert line.room() == 0
    second.leave()
    second.leave()  # leaving twice frees one place
    assert line.room() == 1
    line.place("C")


def test_a_freed_worker_goes_to_the_client_with_the_fewest_answers_then_the_first_come():
    line = Line(workers=2, waiting=4)
    a1, a2 = line.place("A"), line.place("A")
    a3, b1, a4 = line.place("A"), line.place("B"), line.place("A")
    answered: list[str] = []
    done = {p: threading.Event() for p in (a3, b1, a4)}

    def answer(place, name):
        with place:
            answered.append(name)
            done[place].wait(20)

    threads = [
        threading.Thread(target=answer, args=(p, n), daemon=True)
        for p, n in ((a3, "a3"), (b1, "b1"), (a4, "a4"))
    ]
    for t in threads:
        t.start()
    a1.leave()  # A still has one answered, B none: B's goes first, though A's came first
    wait(lambda: answered == ["b1"], what="B's question")
    a2.leave()
    wait(lambda: answered == ["b1", "a3"], what="A's first waiting question")
    done[b1].set()
    wait(lambda: answered == ["b1", "a3", "a4"], what="A's last question")
    for p in done.values():
        p.set()
    for t in threads:
        t.join(20)
    assert line.room() == 6


# -- through each door ----------------------------------------------------------------------------


def test_slack_gives_small_talk_its_reply_and_records_only_questions(make_harness, local_embedder):
    h = make_harness("http")
    db = h.guide.settings.db
    sent = {**SMALL_TALK, "hello": examples_greeting(db, local_embedder), QUESTION: None}
    for n, text in enumerate(sent):
        h.event(dm(text, ts=f"1700000300.00010{n}", channel=f"D{n}"), f"EvDoor{n}")
    # the small talk posted, the question recorded (its answer streams into its thread)
    wait(lambda: len(recorded(db)) == 1 and len(h.mock.posts()) >= len(sent) - 1, what="replies")
    by_channel = {p["channel"]: p["text"] for p in h.mock.posts()}
    for n, (text, reply) in enumerate(sent.items()):
        if reply is not None:
            assert by_channel[f"D{n}"] == reply, text
    assert recorded(db) == [QUESTION]


def test_the_cli_gives_small_talk_the_same_reply_and_records_only_questions(
    examples_db, local_embedder, capsys
):
    sent = {**SMALL_TALK, "hello": examples_greeting(examples_db, local_embedder)}
    for text, reply in sent.items():
        assert main(["ask", text, "--db", examples_db]) == 0
        assert capsys.readouterr().out.strip() == reply
    assert main(["ask", QUESTION, "--db", examples_db]) == 0
    assert "8 attempts" in capsys.readouterr().out
    assert recorded(examples_db) == [QUESTION]


def test_mcp_over_stdio_gives_small_talk_the_same_reply_and_records_only_questions(
    examples_db, local_embedder, tmp_path
):
    """As Slack and the CLI: small talk's reply, nothing searched or recorded; the server's log
    written as `serve`'s is (bot/logs.py: here JSON lines on stderr)."""
    sent = {**SMALL_TALK, "hello": examples_greeting(examples_db, local_embedder)}
    errors = tmp_path / "stderr.log"
    params = stdio(
        examples_db, env={"FIELDGUIDE_LOG_FORMAT": "json", "FIELDGUIDE_LOG_LEVEL": "DEBUG"}
    )

    async def session():
        with errors.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                talk = {t: await client.call_tool("ask", {"question": t}) for t in sent}
                asked = await client.call_tool("ask", {"question": QUESTION})
                return talk, asked

    talk, asked = anyio.run(session)
    for text, reply in sent.items():
        result = talk[text].structured_content
        assert result["answer"] == reply and result["audit_id"] is None, text
        assert result["decision"] == "ABSTAIN" and result["small_talk"] is not None
    assert asked.structured_content["small_talk"] is None
    assert asked.structured_content["audit_id"] is not None
    assert recorded(examples_db) == [QUESTION]
    lines = [line for line in errors.read_text().splitlines() if line.strip()]
    assert lines and all(json.loads(line)["level"] for line in lines)
