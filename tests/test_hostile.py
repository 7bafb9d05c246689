"""Bad input and double faults (issue 27): secrets kept out of messages, terminals kept safe from
the text they print, invalid text refused clearly, per-input costs bounded."""

import json
import logging
import unicodedata

import pytest

from bot.cli import main
from bot.testing.pgserver import free_port
from index.clean import terminal_safe
from index.redact import redact
from tests.conftest import write_docs


def test_a_database_password_is_never_printed_nor_logged(monkeypatch, capsys, caplog):
    port = free_port()
    # an unencoded % in the password: libpq quotes the token it could not read
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", f"postgresql://bob:pa%ss@127.0.0.1:{port}/x")
    assert main(["audit"]) == 2
    err = capsys.readouterr().err
    assert "not a valid connection URL" in err and "%25" in err
    assert "pa%ss" not in err and "Traceback" not in err
    # unreachable, with a password: the error, and every log line of a server that fails to start
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", f"postgresql://bob:hunter2@127.0.0.1:{port}/x")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s")
    assert main(["audit"]) == 2
    assert main(["serve", "--http", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "Cannot reach PostgreSQL at 127.0.0.1:" in err and "hunter2" not in err
    with caplog.at_level(logging.INFO):
        logging.getLogger("fieldguide.test").warning(
            "lost postgresql://bob:hunter2@127.0.0.1/x", exc_info=ValueError("password=hunter2")
        )
    assert "hunter2" not in caplog.text and "postgresql://bob:***@127.0.0.1/x" in caplog.text
    # a URL setting that fails its check is named without its password
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", "mysql://bob:hunter2@db/x")
    assert main(["audit"]) == 2
    err = capsys.readouterr().err
    assert "FIELDGUIDE_DATABASE_URL" in err and "hunter2" not in err


@pytest.mark.parametrize(
    "text, url, shown",
    [
        ("at postgresql://u:p%40ss@h:5/d failed", "", "at postgresql://u:***@h:5/d failed"),
        ('invalid percent-encoded token: "s3%zz"', "postgresql://u:s3%zz@h/d", '"***"'),
        ("host=h password='a b' user=u", "", "host=h password=*** user=u"),
        ("https://user@example.com/x no password", "", "https://user@example.com/x no password"),
        ("decoded: s3@cr", "postgres://u:s3%40cr@h/d", "decoded: ***"),
    ],
)
def test_redact(text, url, shown):
    assert shown in redact(text, url)


def test_control_characters_reach_no_terminal_but_stay_in_json(tmp_path, capsys, monkeypatch):
    # issue 27 row 6: an escape sequence in a doc (clear screen, set the window title) and in a
    # question is shown, not obeyed, by every human-readable command; --json keeps the text
    docs = write_docs(
        tmp_path / "docs",
        {
            "ops.md": "---\nintent: ops\n---\n# Rotor tuning\n\n"
            "The rotor \x1b[2J\x1b]0;pwned\x07 flange is tuned with the \u202egauge\u202c tool.\n"
        },
    )
    db = str(tmp_path / "i.db")
    monkeypatch.setenv("FIELDGUIDE_DB", db)
    assert main(["index", str(docs), "--quiet"]) == 0
    question = "how is the rotor flange tuned \x1b[31m\x9b?"
    for argv in (["search", question], ["ask", "--show-context", question], ["audit"]):
        capsys.readouterr()
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "rotor" in out
        assert not set(out) & {"\x1b", "\x07", "\x9b", "\u202e"}, argv
        assert "\\x1b" in out, argv
    assert main(["ask", "--json", question]) == 0
    assert json.loads(capsys.readouterr().out)["question"] == question.strip()


def test_control_character_escapes_match_unicode():
    from index.clean import UNSAFE

    def unsafe(ch: str) -> bool:
        if ch in "\n\t":
            return False
        if 0xD800 <= ord(ch) <= 0xDFFF:
            return True
        bidi = unicodedata.bidirectional(ch)
        return unicodedata.category(ch) == "Cc" or bidi in (
            "LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"
        )  # fmt: skip

    assert [c for c in range(0x110000) if bool(UNSAFE.match(chr(c))) != unsafe(chr(c))] == []
    assert terminal_safe("a\tb\nc\x1b[0m\x7f") == "a\tb\nc\\x1b[0m\\x7f"


def test_a_question_that_is_not_utf8_is_a_clear_error(examples_db, capsys, monkeypatch):
    # issue 27 row 8: Python hands a non-UTF-8 argument over as lone surrogates
    monkeypatch.setenv("FIELDGUIDE_DB", examples_db)
    argument = b"webhook retries \xff\xfe".decode("utf-8", "surrogateescape")
    for command in ("ask", "search"):
        assert main([command, argument]) == 2
        err = capsys.readouterr().err
        assert "not valid UTF-8 text (byte 0xff)" in err and "Traceback" not in err
