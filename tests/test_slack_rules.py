"""The Slack bot's rules, its message format and its Slack-facing pieces, without HTTP."""

import json
import threading
import time

import pytest
from slack_sdk import WebClient

from bot.slack.reindex import RESPONSE_URL_POSTS, Reporter
from bot.slack.slack_app import SlackStartupError, connect, retry_handlers
from bot.slack.slack_format import (
    MARKDOWN_LIMIT,
    answer_messages,
    context_line,
    fallback_text,
    parse_feedback,
    plain_pieces,
    safe_markdown,
    safe_url,
)
from bot.slack.slack_rules import (
    GREETING,
    WORKING,
    history_from,
    message_kind,
    plain_text,
    reindex_action,
    reply_thread,
    small_talk,
    thread_title,
)
from bot.state.sqlite import SqliteState
from index.indexer import index_folder
from index.store import open_db
from router.answer import Answer, Source, Trace
from tests.conftest import write_docs
from tests.standins.slack import SERVER_ERROR, SlackMock, slack_error

BOT = "UBOT"


def msg(**kw):
    return {"type": "message", "user": "U1", "text": "hi", "ts": "1.1", "channel": "C1", **kw}


@pytest.mark.parametrize(
    "event, answered, kind",
    [
        (msg(channel_type="im"), False, "dm"),
        (msg(channel_type="im", subtype="file_share"), False, "dm"),
        (
            msg(channel_type="channel", thread_ts="1.0", subtype="thread_broadcast"),
            True,
            "follow_up",
        ),
        (msg(channel_type="channel", thread_ts="1.0"), True, "follow_up"),
        (msg(channel_type="channel", thread_ts="1.0"), False, None),  # not our thread
        (msg(channel_type="channel"), False, None),  # plain channel chatter
        (msg(channel_type="channel", text=f"<@{BOT}> hi", thread_ts="1.0"), True, None),
        (msg(channel_type="im", subtype="message_changed"), False, None),
        (msg(channel_type="im", bot_id="B2"), False, None),
        (msg(channel_type="im", user=BOT), False, None),
    ],
)
def test_which_messages_are_answered(event, answered, kind):
    assert message_kind(event, BOT, answered) == kind


def test_reply_thread():
    assert reply_thread({"ts": "2.0", "thread_ts": "1.0"}, True) == "1.0"
    assert reply_thread({"ts": "2.0"}, True) == "2.0"
    assert reply_thread({"ts": "2.0"}, False) is None


def test_history_keeps_the_newest_turns_and_skips_the_bots_chatter():
    messages = [{"user": "U1", "text": f"q{i}", "ts": f"1.{i:03d}"} for i in range(30)]
    messages += [
        {"user": BOT, "bot_id": "B", "text": GREETING, "ts": "2.0"},
        {"user": BOT, "bot_id": "B", "text": WORKING, "ts": "2.1"},
        {"user": BOT, "bot_id": "B", "text": "Five times &amp; more", "ts": "2.2"},
        {"user": "U1", "text": "the current one", "ts": "3.0"},
    ]
    history = history_from(messages, "3.0", BOT)
    assert len(history) == 10
    assert history[-1] == {"role": "assistant", "text": "Five times & more"}
    assert history[-2]["text"] == "q29" and GREETING not in json.dumps(history)


def test_reindex_arguments_and_titles():
    assert [reindex_action(t) for t in ("", " status ", "help", "now")] == [
        "run",
        "status",
        "help",
        "help",
    ]
    assert thread_title(f"<@{BOT}> " + "word " * 40).endswith("…")


# -- escaping -----------------------------------------------------------------------------------

INJECTIONS = [
    "<!channel> read this",
    "<!here|here>",
    "ping <@U123ABC> now",
    "<https://evil.example|click me>",
    "`<!channel>` in code",
    "```\n<!everyone>\n```",
    "[docs](https://evil.example) and ![img](https://evil.example/x.png)",
    "[1]: https://evil.example",
]


def answer(text, url="https://docs.example/a", title="Doc"):
    return Answer(
        "q",
        "q",
        "ANSWER",
        text,
        sources=[Source(1, "c1", "a.md", title, [title, "Section"], url)],
    )


def everything(ans) -> str:
    return json.dumps(answer_messages(ans, 7)) + fallback_text(ans) + "".join(plain_pieces(ans))


@pytest.mark.parametrize("text", INJECTIONS)
def test_injected_mentions_and_links_are_neutralised(text):
    out = everything(answer(text))
    for bad in ("<!", "<@", "<https", "](https://evil", "\n[1]: https"):
        assert bad not in out


def test_front_matter_url_injection_is_shown_as_text_not_linked():
    url = "https://x> <!channel> <https://evil"
    ans = answer("Answer [1]", url=url, title="Title <!here>")
    out = everything(ans)
    assert "<!" not in out and "<https" not in out and "(https://x" not in out
    assert safe_url(url) is None
    assert safe_url("https://docs.example/a#b") == "https://docs.example/a#b"
    for bad in ("javascript:alert(1)", "ftp://x", "https://", "https://a b", "https://a|b"):
        assert safe_url(bad) is None


def test_safe_markdown_keeps_blockquotes_and_escapes_code():
    assert safe_markdown("> quote <x>") == "> quote &lt;x&gt;"
    assert safe_markdown("`a<b`") == "`a&lt;b`"


def test_long_answer_is_split_within_block_kit_limits():
    text = "\n\n".join(f"Paragraph {i}: " + "word " * 300 for i in range(40))
    ans = answer(text)
    messages = answer_messages(ans, 7)
    assert len(messages) > 1
    for blocks in messages:
        assert len(blocks) <= 50
        assert sum(len(b["text"]) for b in blocks if b["type"] == "markdown") <= MARKDOWN_LIMIT
    assert messages[-1][-1]["type"] == "context_actions"
    assert (
        "".join(b["text"] for m in messages for b in m if b["type"] == "markdown").count("word")
        == 40 * 300
    )


def test_short_answer_is_one_markdown_block_with_sources():
    [blocks] = answer_messages(answer("Rotate keys [1]."), 7)
    assert [b["type"] for b in blocks] == ["markdown", "context", "context_actions"]
    assert "- [1] [Doc › Section](https://docs.example/a)" in blocks[0]["text"]


def test_sources_are_listed_under_the_numbers_the_text_marks():
    """Sources 16 and 44 are shown as [16] and [44], as the text cites them (a numbered list
    would be renumbered 16, 17 by any markdown reader)."""
    from markdown_it import MarkdownIt

    ans = answer("Alias it.[16] It maps a name to a backend.[44]")
    ans.sources = [
        Source(n, f"c{n}", "a.md", label, [label], f"https://docs.example/{n}")
        for n, label in ((16, "Aliases"), (44, "Glossary"))
    ]
    [blocks] = answer_messages(ans, 7)
    items = [
        t.content
        for t in MarkdownIt("commonmark").parse(blocks[0]["text"])
        if t.type == "inline" and t.level == 3
    ]
    assert items == [
        "[16] [Aliases](https://docs.example/16)",
        "[44] [Glossary](https://docs.example/44)",
    ]


def test_feedback_values():
    assert parse_feedback({"action_id": "answer_feedback", "value": "helpful:12"}) == (
        12,
        "helpful",
    )
    assert parse_feedback({"action_id": "feedback_not_helpful", "value": "3"}) == (3, "not_helpful")
    assert parse_feedback({"action_id": "answer_feedback", "value": "junk"}) is None


# -- state: de-duplication that survives a restart ------------------------------------------------


def test_claimed_events_survive_a_restart_and_expire_after_an_hour(tmp_path):
    path = tmp_path / "state.db"
    assert SqliteState(open_db(path)).take_event("Ev1", "C1:1.0")
    restarted = SqliteState(open_db(path))
    assert not restarted.take_event("Ev1", "")
    assert not restarted.take_event("Ev2", "C1:1.0")  # same message, other event id
    restarted.db.execute("UPDATE slack_events SET claimed = ?", [time.time() - 3601])
    restarted.db.conn.commit()
    assert restarted.take_event("Ev1", "C1:1.0")


def test_concurrent_claims_of_one_event_have_one_winner(tmp_path):
    state = SqliteState(open_db(tmp_path / "state.db"))
    wins = []
    threads = [
        threading.Thread(target=lambda: wins.append(state.take_event("Ev", "C:1")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1


# -- reindex reports within the response_url's 5 posts -------------------------------------------


def recorder(into: list[str], ok: bool):
    """A report channel that keeps what it is given and answers `ok`."""

    def send(text: str) -> bool:
        into.append(text)
        return ok

    return send


def test_a_long_reindex_reports_within_five_posts_and_the_summary_gets_through():
    now = [0.0]
    sent: list[str] = []
    ephemeral: list[str] = []
    report = Reporter(recorder(sent, True), recorder(ephemeral, True), clock=lambda: now[0])
    report.start("start")
    for i in range(600):  # ten minutes of progress callbacks, one a second
        now[0] += 1
        report.progress(f"{i}")
    assert report.summary("summary")
    assert len(sent) <= RESPONSE_URL_POSTS and sent[-1] == "summary" and ephemeral == []


def test_a_refused_response_url_falls_back_to_ephemeral():
    sent: list[str] = []
    ephemeral: list[str] = []
    report = Reporter(recorder(sent, False), recorder(ephemeral, True))
    report.start("start")
    report.summary("summary")
    assert sent == ["start"] and ephemeral == ["start", "summary"]


def test_reporter_against_the_mock_response_url_limit():
    from slack_sdk.webhook import WebhookClient

    mock = SlackMock()
    try:
        hook = WebhookClient(mock.url + "/respond")
        for _ in range(RESPONSE_URL_POSTS):
            assert hook.send(text="x").status_code == 200
        refused = hook.send(text="x")
        assert refused.status_code == 404 and refused.body == "used_url"
    finally:
        mock.close()


# -- start-up -----------------------------------------------------------------------------------


def test_startup_gives_a_clear_error_when_slack_is_unreachable():
    client = WebClient(token="x", base_url="http://127.0.0.1:9/api/", retry_handlers=[])
    t = time.monotonic()
    with pytest.raises(SlackStartupError, match="Could not reach Slack"):
        connect(client, within=0.5)
    assert time.monotonic() - t < 3


def test_startup_retries_then_connects_and_fails_fast_on_a_bad_token():
    mock = SlackMock()
    try:
        client = WebClient(token="x", base_url=mock.url + "/api/", retry_handlers=retry_handlers())
        mock.fail("auth.test", slack_error("fatal_error"))
        waits: list[float] = []
        assert connect(client, within=5, sleep=waits.append)["user_id"] == "UBOT"
        assert len(waits) == 1 and 1.0 <= waits[0] <= 2.0  # the policy's first backoff
        mock.fail("auth.test", slack_error("invalid_auth"))
        with pytest.raises(SlackStartupError, match="invalid_auth"):
            connect(client, within=30, sleep=waits.append)
        assert len(waits) == 1  # a refused token is not retried
        assert SERVER_ERROR[0] == 500
    finally:
        mock.close()


@pytest.mark.parametrize(
    "text, talk",
    [
        ("hi", "greeting"),
        (f"<@{BOT}> hello there", "greeting"),
        ("Good morning!", "greeting"),
        ("help", "greeting"),
        ("thanks!", "thanks"),
        ("Thank you so much", "thanks"),
        ("ok thanks", "thanks"),
        ("bye", "ack"),
        ("see you later", "ack"),
        ("ok", "ack"),
        ("got it, makes sense", "ack"),
        (":thumbsup:", "ack"),
        (":pray: thanks", "thanks"),
        ("👍", "ack"),
        ("", None),  # an empty mention: "the question is empty"
        ("help with webhooks", None),
        ("hi, how do I rotate an API key?", None),
        ("thanks, and how long is the grace period?", None),
        ("what is it", None),
        ("how long is the grace period", None),  # asks, though every word is common English
        ("retry schedule", None),  # a word English uses rarely: a term of the docs
    ],
)
def test_small_talk_is_told_from_questions(text, talk):
    assert small_talk(text) == talk


def test_a_message_is_read_as_typed_not_as_slack_sends_it():
    sent = (
        f"<@{BOT}> why does <https://hooks.acme.io/tw|hooks.acme.io/tw> get 4xx &amp; no retries"
        " when x &lt; 5? see <https://status.acme.io>, <#C42|ops>, <mailto:bob@acme.io|bob@acme.io>"
        " <!here> <!subteam^S1|@platform>"
    )
    assert " ".join(plain_text(sent).split()) == (
        "why does hooks.acme.io/tw get 4xx & no retries when x < 5? see https://status.acme.io,"
        " #ops, bob@acme.io @here @platform"
    )
    # a pasted trace keeps its lines and their indentation
    assert plain_text('boom:\n  File "a.py", line 1') == 'boom:\n  File "a.py", line 1'


DEFINITIONS = [
    "see [evil\nlabel] now\n\n[evil\nlabel]: //evil.example/two-lines",
    "see [a\\]b] now\n\n[a\\]b]: mailto:boss@evil.example",
    "see [x] now\n\n- > [x]: https:evil.example/in-a-list-quote",
    "see [y] now\n\n[y]:\n  //evil.example/next-line",
]


@pytest.mark.parametrize("text", DEFINITIONS)
def test_no_reference_definition_reaches_slack_whatever_its_label(text):
    """A CommonMark parser (markdown-it, as Slack's markdown block) reads no link and no
    definition in what is posted, whole or streamed a few characters at a time."""
    from markdown_it import MarkdownIt

    from bot.slack.slack_format import StreamSanitizer

    def links(markdown: str) -> list:
        env: dict = {}
        tokens = MarkdownIt("commonmark").parse(markdown, env)
        found = [
            t for tok in tokens for t in tok.children or [] if t.type in ("link_open", "image")
        ]
        return found + list(env.get("references", {}))

    assert links(text)  # as written, a link
    ans = Answer("q", "q", "ANSWER", text)
    [[block, *_]] = answer_messages(ans, None)
    assert not links(block["text"]), block["text"]
    assert "evil.example" in block["text"]  # shown as text
    s = StreamSanitizer()
    streamed = "".join(s.feed(text[i : i + 3]) for i in range(0, len(text), 3)) + s.flush()
    assert not links(streamed), streamed


def test_a_long_streamed_answer_is_made_safe_as_the_whole_would_be():
    """Streamed in pieces, an answer is what `safe_markdown` makes of it whole, a code block that
    holds a blank line read as code after it too (its URL and brackets as typed)."""
    from bot.slack.slack_format import StreamSanitizer, safe_markdown, unlinked_urls

    code = "```sh\ncurl https://example.com/a\n\nx=a[1]\n```\n\n"
    text = code + "See https://example.com/b for [the steps] [3].\n\n" * 40
    s = StreamSanitizer()
    streamed = "".join(s.feed(text[i : i + 5]) for i in range(0, len(text), 5)) + s.flush()
    assert streamed == safe_markdown(unlinked_urls(text))
    assert streamed.startswith(code)


# -- 4. no link from the docs or the model reaches Slack, nested brackets and all ----------------

DECEPTIVE = [
    "[the recovery console [official]](//evil.example/recover)",
    "[a [b [c]]](https://evil.example/x)",
    "![logo [x]](//evil.example/p.png)",
    "[label](<//evil.example/a b>)",
    "[ref [x]][r]\n\n[r]: //evil.example/ref",
    "[x](//evil.example/a_(b))",
    "[x\\\\](//evil.example/b)",  # an escaped backslash, then the `]` that closes the label
    "see [r] below\n\n> [r]: //evil.example/quoted\n\nend",  # a definition in a blockquote
    "[one]\n[two]: //evil.example/list\n\n- [two]: //evil.example/item\n\n[two]",
]


def links_in(markdown: str) -> list[str]:
    """The link and image targets CommonMark reads in `markdown` (as Slack's markdown block)."""
    from markdown_it import MarkdownIt

    found = []
    for token in MarkdownIt("commonmark").parse(markdown):
        for t in token.children or []:
            if t.type in ("link_open", "image"):
                found.append(str(t.attrs.get("href") or t.attrs.get("src")))
    return found


@pytest.mark.parametrize("text", DECEPTIVE)
def test_no_link_of_the_text_reaches_the_markdown_block(text):
    from bot.slack.slack_format import StreamSanitizer, answer_messages
    from router.answer import Answer

    ans = Answer("q", "q", "ANSWER", f"See {text} for the steps.")
    [[block, *_]] = answer_messages(ans, None)
    assert not links_in(block["text"]), block["text"]
    # streamed a few characters at a time, as Claude's deltas arrive
    s = StreamSanitizer()
    streamed = "".join(s.feed(ans.text[i : i + 3]) for i in range(0, len(ans.text), 3)) + s.flush()
    assert not links_in(streamed), streamed


def test_a_docs_deceptive_link_is_no_link_in_slack(make_harness, tmp_path, local_embedder):
    from tests.standins.slack_harness import answer_in, mention, shown_text

    doc = (
        "---\nintent: ops\n---\n# Account recovery\n\n"
        "To recover a locked account, open [the recovery console [official]]"
        "(//evil.example/recover) and follow the recovery steps shown there.\n"
    )
    docs = write_docs(tmp_path / "docs", {"ops/recovery.md": doc})
    db = str(tmp_path / "index.db")
    index_folder(db, docs, local_embedder)
    h = make_harness(db=db)
    h.event(mention("How do I recover a locked account?"), "EvL1")
    [answer] = answer_in(h.mock, "C1")
    text = shown_text(answer)
    assert "recovery console" in text
    assert "evil.example" not in " ".join(links_in(text)), text


def test_a_dead_process_s_unanswered_claim_is_taken_over_once(tmp_path):
    """A claim made by a process that has exited (here `python -c`), not answered: the next
    process takes it over with its event, once; answered claims are not taken."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    path = tmp_path / "state.db"
    claim = (
        "import sys; from bot.state.sqlite import SqliteState; from index.store import open_db;"
        " s = SqliteState(open_db(sys.argv[1]));"
        " assert s.take_event('Ev1', 'C1:1.0', event={'keys': ['Ev1', 'C1:1.0'], 'n': 1});"
        " assert s.take_event('Ev2', event={'keys': ['Ev2'], 'n': 2}); s.done_event('Ev2')"
    )
    subprocess.run([sys.executable, "-c", claim, str(path)], cwd=ROOT, check=True, timeout=60)
    state = SqliteState(open_db(path))
    [taken] = state.take_orphans(10)
    assert json.dumps(taken) == json.dumps({"keys": ["Ev1", "C1:1.0"], "n": 1})
    assert state.take_orphans(10) == []  # now this process's
    assert not state.take_event("Ev1")  # held by a live process


def test_the_context_line_says_without_claude_only_when_claude_did_not_write_it():
    """A step that fell back (a follow-up condensed offline) leaves Claude's answer Claude's."""
    wrote = Trace(offline=True, usage={"condense": {}, "answer": {"output_tokens": 9}})
    assert "without Claude" not in context_line(Answer("q", "q", "ANSWER", "x", trace=wrote))
    quoted = Trace(offline=True, usage={})
    assert "answered without Claude" in context_line(Answer("q", "q", "ANSWER", "x", trace=quoted))


def test_code_keeps_its_brackets_and_a_url_stops_at_a_mark():
    """Markdown reads no link in code and shows a backslash there as typed: code is sent as
    written (the SQL copied from an answer runs); a source's label likewise. A URL the answer
    ends a sentence with leaves its [n] mark outside the code it is set in."""
    ans = answer(
        "Use `ORDER BY array_distance(v, [1, 2]::FLOAT[2])` and `h[i](e)`, or"
        " http://127.0.0.1:8000.[1]\n\n```sql\nSELECT [1, 2][1];\n```",
        title="`regexp_extract(s, p[, group = 0])`",
    )
    [[block, *_]] = answer_messages(ans, None)
    text = block["text"]
    assert "`ORDER BY array_distance(v, [1, 2]::FLOAT[2])`" in text and "`h[i](e)`" in text
    assert "`http://127.0.0.1:8000`.[1]" in text and "SELECT [1, 2][1];" in text
    assert "`regexp_extract(s, p[, group = 0])`" in json.dumps(answer_messages(ans, None))
    assert "\\" not in fallback_text(answer("Both.[21][6]"))
