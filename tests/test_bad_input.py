"""Bad input and double faults: secrets kept out of messages, terminals kept safe from
the text they print, invalid text refused clearly, per-input costs bounded."""

import json
import logging
import os
import sqlite3
import subprocess
import sys
import unicodedata

import pytest

from bot.cli import main
from index.clean import terminal_safe
from index.redact import redact
from tests.conftest import write_docs
from tests.standins.pgserver import free_port


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
    # an escape sequence in a doc (clear screen, set the window title) and in a
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
    def unsafe(ch: str) -> bool:
        if ch in "\n\t":
            return False
        if 0xD800 <= ord(ch) <= 0xDFFF:
            return True
        bidi = unicodedata.bidirectional(ch)
        return unicodedata.category(ch) in ("Cc", "Cf") or bidi in (
            "LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"
        )  # fmt: skip

    assert [c for c in range(0x110000) if (terminal_safe(chr(c)) != chr(c)) != unsafe(chr(c))] == []
    assert terminal_safe("a\tb\nc\x1b[0m\x7f") == "a\tb\nc\\x1b[0m\\x7f"
    # the invisible ones too: a zero-width space, a word joiner, a tag character, shown
    assert terminal_safe("x\u200by\u2060z\U000e0041") == "x\\u200by\\u2060z\\U000e0041"
    assert terminal_safe("café 日本 🙂") == "café 日本 🙂"


def test_a_question_that_is_not_utf8_is_a_clear_error(examples_db, capsys, monkeypatch):
    # Python hands a non-UTF-8 argument over as lone surrogates
    monkeypatch.setenv("FIELDGUIDE_DB", examples_db)
    argument = b"webhook retries \xff\xfe".decode("utf-8", "surrogateescape")
    for command in ("ask", "search"):
        assert main([command, argument]) == 2
        err = capsys.readouterr().err
        assert "not valid UTF-8 text (byte 0xff)" in err and "Traceback" not in err


EMBED_PEAK = """
import resource, sys
from index.onnx_model import OnnxEmbedder
e = OnnxEmbedder(threads=1)
e.embed_documents(["warm up the model " * 300])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
big = ("def handler(event):  # a huge generated code block\\n    return 42\\n" * 160_000)
e.embed_documents([big]); e.embed_query(big)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_a_10_mb_chunk_costs_the_embedder_no_more_than_its_model_reads():
    # the tokenizer truncates only after tokenising everything it is given
    out = subprocess.run(
        [sys.executable, "-c", EMBED_PEAK], capture_output=True, text=True, check=True, timeout=120
    )
    assert int(out.stdout) < 100, f"peak memory grew by {out.stdout.strip()} MB"


def test_the_embedders_cut_changes_nothing_the_model_reads(local_embedder, examples_db):
    # every example chunk, repeated past the cut: the model reads the same tokens either way
    from index.embedding import fit_text

    tok = local_embedder._load()[1]
    limit = local_embedder.max_seq_length
    texts = [r[0] for r in sqlite3.connect(examples_db).execute("SELECT search_text FROM chunks")]
    assert len(texts) > 100
    for text in texts:
        long = (text + "\n\n") * (2 * limit * 16 // len(text) + 2)
        assert tok.encode(fit_text(long, limit)).ids == tok.encode(long).ids


def test_a_retrieved_huge_chunk_is_read_only_as_far_as_a_question_needs(
    tmp_path, monkeypatch, capsys
):
    """An index holding one huge chunk (a code block the chunker could not split, as an index
    built before it could holds one): search and ask read at most CHUNK_READ_CHARS of it."""
    import sqlite3

    from index.mapped import CHUNK_READ_CHARS

    docs = write_docs(
        tmp_path / "docs",
        {"gen.md": "# Generated rotor table\n\nThe zorblax rotor table.\n\n```\nzorblax_0\n```\n"},
    )
    db = tmp_path / "i.db"
    monkeypatch.setenv("FIELDGUIDE_DB", str(db))
    assert main(["index", str(docs), "--quiet"]) == 0
    block = "".join(f"zorblax_{i} = configure(rotor={i})\n" for i in range(30_000))  # ~1 MB
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE chunks SET text = text || ?, search_text = search_text || ?", [block] * 2
        )
    capsys.readouterr()
    assert main(["search", "--json", "zorblax rotor table"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert hits and all(len(h["text"]) <= CHUNK_READ_CHARS for h in hits)
    assert any(len(h["text"]) == CHUNK_READ_CHARS and "zorblax_0" in h["text"] for h in hits)
    assert main(["ask", "what is the zorblax rotor table?"]) == 0


ASK_PEAK = """
import resource, sys, time
from bot.cli import main
main(["ask", "How many times is a failed webhook retried?"])  # warm: the model, the index
before, started = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
assert main(["ask", sys.argv[1]]) == 0
grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
print(grew, time.perf_counter() - started)
"""


def ask_cost(question: str, db: str) -> tuple[int, float]:
    """(MB the peak RSS grew by, seconds) answering `question` in a warm fresh process."""
    env = {**os.environ, "FIELDGUIDE_DB": db}
    out = subprocess.run(
        [sys.executable, "-c", ASK_PEAK, question],
        capture_output=True, text=True, check=True, timeout=300, env=env,
    )  # fmt: skip
    mb, seconds = out.stdout.split()[-2:]
    return int(mb), float(seconds)


def test_a_4000_letter_word_costs_about_what_an_ordinary_question_costs(examples_db):
    # 8.9 s and 1.79 GB for one question; every step bounds a word's cost
    ordinary_mb, ordinary_s = ask_cost("How do I rotate the webhook signing secret?", examples_db)
    # the question is the word alone (within a sentence the typo check passed it by)
    long_mb, long_s = ask_cost("supercalifragilistic" * 200, examples_db)
    assert long_mb <= ordinary_mb + 50 and long_s <= 3 * ordinary_s + 1


def test_a_long_word_is_one_bounded_term():
    from index.search import MAX_TERM_CHARS, tokenize

    word = "x" * 4000
    assert tokenize(f"rotate {word} keys") == ["rotate", "x" * MAX_TERM_CHARS, "key"]
    digest = "ab" * 32  # a SHA-256 in hex stays whole
    assert tokenize(digest) == [digest]
