"""One owner per table: the index's tables (index/store.py) and the audit trail's
(bot/state/sqlite.py) each have their own set of sqlite-utils Migrations, applied when opened."""

import sqlite3
import time

import sqlite_utils

from bot.state.sqlite import AUDIT_MIGRATIONS, SqliteState
from index.schema import INDEX_MIGRATIONS, NewerIndex
from index.store import open_db


def applied(db: sqlite_utils.Database) -> dict[str, list[str]]:
    rows = db.execute("SELECT migration_set, name FROM _sqlite_migrations ORDER BY id")
    found: dict[str, list[str]] = {}
    for migration_set, name in rows:
        found.setdefault(migration_set, []).append(name)
    return found


def test_the_index_and_the_audit_trail_migrate_apart(tmp_path):
    db = open_db(tmp_path / "index.db")
    assert applied(db) == {
        "fieldguide.index": [
            "m001_tables",
            "m002_owners",
            "m003_doc_updated",
            "m004_doc_owners_and_freshness",
        ]
    }
    SqliteState(db)
    assert applied(db)["fieldguide.audit"] == [
        "m001_audit_tables",
        "m002_owners_loop",
        "m003_claims_keep_their_event",
        "m004_viewing",
    ]
    assert not INDEX_MIGRATIONS.pending(db) and not AUDIT_MIGRATIONS.pending(db)
    tables = set(db.table_names())
    assert {"meta", "docs", "chunks", "embeddings", "intents", "runs"} <= tables
    assert {"answers", "feedback", "slack_events", "handoffs", "viewing"} <= tables


def test_an_index_made_before_migrations_gains_what_it_lacks(tmp_path):
    """An index written before owners and doc dates (and before migrations were recorded) is
    brought up to date once: its docs are to be parsed again (hash cleared) for their owners."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
            CREATE TABLE docs (path TEXT PRIMARY KEY, title TEXT, intent TEXT, subcategory TEXT,
                related_intents TEXT, version TEXT, url TEXT, hash TEXT, size INTEGER);
            CREATE TABLE intents (name TEXT PRIMARY KEY, description TEXT, examples TEXT,
                docs INTEGER, chunks INTEGER);
            INSERT INTO docs (path, title, intent, hash) VALUES ('a.md', 'A', 'general', 'h1');
            INSERT INTO meta VALUES ('generation', '4');"""
        )
    db = open_db(path, create=False)
    assert {"owner", "updated"} <= {c.name for c in db["docs"].columns}
    assert "owner" in {c.name for c in db["intents"].columns}
    assert db.execute("SELECT hash FROM docs").fetchone()[0] == ""
    assert db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0] == "4"
    db.execute("UPDATE docs SET hash = 'h2'")
    db.conn.commit()
    again = open_db(path, create=False)  # applied once: the hash a run wrote since stays
    assert again.execute("SELECT hash FROM docs").fetchone()[0] == "h2"
    assert len(applied(again)["fieldguide.index"]) == 4


def record_unknown(path, migration_set: str, name: str) -> None:
    """What a newer fieldguide leaves in the file: a migration this one does not have."""
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, '')",
            [migration_set, name],
        )


def test_an_index_a_newer_fieldguide_migrated_is_refused_by_name(examples_db, capsys):
    import pytest

    from bot.cli import main

    record_unknown(examples_db, "fieldguide.index", "m099_chunk_language")
    newer = "was written by a newer fieldguide (m099_chunk_language)"
    for create in (True, False):
        with pytest.raises(NewerIndex, match=newer.replace("(", r"\(").replace(")", r"\)")):
            open_db(examples_db, create=create)
    for argv in (["ask", "How are webhooks retried?"], ["search", "retries"], ["audit"]):
        assert main([*argv, "--db", examples_db]) == 2
        err = capsys.readouterr().err
        assert newer in err and "Traceback" not in err, err
    assert main(["doctor", "--db", examples_db]) == 1
    out = capsys.readouterr().out
    assert f"FAIL  index        {examples_db} {newer}" in out
    assert "integrity ok" not in out


def test_audit_tables_a_newer_fieldguide_migrated_are_refused_by_name(examples_db, capsys):
    import pytest

    from bot.cli import main

    SqliteState(open_db(examples_db))  # the audit tables made, as a first answer makes them
    record_unknown(examples_db, "fieldguide.audit", "m099_answer_language")
    newer = "audit trail was written by a newer fieldguide (m099_answer_language)"
    with pytest.raises(NewerIndex, match="m099_answer_language"):
        SqliteState(open_db(examples_db))
    assert main(["ask", "How are webhooks retried?", "--db", examples_db]) == 2
    assert newer in capsys.readouterr().err
    assert main(["doctor", "--db", examples_db]) == 1
    assert newer in capsys.readouterr().out


def test_claims_made_before_they_kept_their_event_are_taken_as_done(tmp_path):
    """A claim written by a fieldguide whose claims kept no event: nothing can answer it, so the
    next process neither takes it over nor lets a retry of it through."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE slack_events (key TEXT PRIMARY KEY, claimed REAL NOT NULL)")
        conn.execute("INSERT INTO slack_events VALUES ('Ev1', ?)", [time.time()])
    state = SqliteState(open_db(path))
    assert state.take_orphans(10) == []
    assert not state.claim_event("Ev1")
