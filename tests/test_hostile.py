"""Bad input and double faults (issue 27): secrets kept out of messages, terminals kept safe from
the text they print, invalid text refused clearly, per-input costs bounded."""

import logging

import pytest

from bot.cli import main
from bot.testing.pgserver import free_port
from index.redact import redact


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
