"""One owner per table: the index's tables (index/store.py) and the audit trail's
(bot/state/sqlite.py) each have their own set of sqlite-utils Migrations, applied when opened."""

import sqlite3

import sqlite_utils

from bot.state.sqlite import AUDIT_MIGRATIONS, SqliteState
from index.store import INDEX_MIGRATIONS, open_db


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
    assert applied(db)["fieldguide.audit"] == ["m001_audit_tables", "m002_owners_loop"]
    assert not INDEX_MIGRATIONS.pending(db) and not AUDIT_MIGRATIONS.pending(db)
    tables = set(db.table_names())
    assert {"meta", "docs", "chunks", "embeddings", "intents", "runs"} <= tables
    assert {"answers", "feedback", "slack_events", "handoffs"} <= tables


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
