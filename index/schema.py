"""The index's tables: their schema as sqlite-utils' Migrations (`INDEX_MIGRATIONS`, applied
when the file is opened: index/store.py's `open_db`), and a file a newer fieldguide migrated
refused by name (`NewerIndex`): it records a migration this fieldguide does not have, so its tables
may no longer be what this one reads and writes. The audit trail's tables, in the same file, have
their own set (bot/state/sqlite.py), checked the same way.
"""

from __future__ import annotations

import sqlite3

import sqlite_utils


class IndexMissing(Exception):
    """No usable index at the path; the message says how to build one."""


class NewerIndex(IndexMissing):
    """The file records migrations this fieldguide does not know: a newer fieldguide wrote it,
    and its tables may no longer be what this one reads and writes. No usable index for this
    version; the message names the migrations."""


class IndexUnreadable(IndexMissing):
    """A read-only index SQLite cannot read as it is (its write-ahead log holds changes and no
    shared memory can be made for it); the message says what to do."""


INDEX_MIGRATIONS = sqlite_utils.Migrations("fieldguide.index")


@INDEX_MIGRATIONS()
def m001_tables(db: sqlite_utils.Database) -> None:
    """The index's tables (IF NOT EXISTS: an index made before migrations has them)."""
    for sql in (
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
        """CREATE TABLE IF NOT EXISTS docs (
            path TEXT PRIMARY KEY, title TEXT, intent TEXT, subcategory TEXT,
            related_intents TEXT, version TEXT, url TEXT, hash TEXT, size INTEGER, owner TEXT,
            updated TEXT)""",
        """CREATE TABLE IF NOT EXISTS chunks (
            id TEXT PRIMARY KEY, doc TEXT, ord INTEGER, heading_path TEXT, text TEXT,
            search_text TEXT, text_hash TEXT, start INTEGER, "end" INTEGER)""",
        "CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc)",
        """CREATE TABLE IF NOT EXISTS embeddings (
            text_hash TEXT, model TEXT, vector BLOB, PRIMARY KEY (text_hash, model))""",
        """CREATE TABLE IF NOT EXISTS intents (
            name TEXT PRIMARY KEY, description TEXT, examples TEXT, docs INTEGER,
            chunks INTEGER, owner TEXT)""",
        """CREATE TABLE IF NOT EXISTS runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT, finished TEXT, status TEXT,
            docs_root TEXT, model TEXT, added INTEGER, changed INTEGER, removed INTEGER,
            unchanged INTEGER, skipped TEXT, chunks INTEGER, embedded INTEGER, seconds REAL,
            error TEXT, warnings TEXT)""",
    ):
        db.execute(sql)


@INDEX_MIGRATIONS()
def m002_owners(db: sqlite_utils.Database) -> None:
    """An index made before owners existed gains the `owner` columns; its docs' hashes are
    cleared so the next index run parses them again and reads their owners (the embeddings
    are cached: nothing is embedded again)."""
    for table in ("docs", "intents"):
        if "owner" not in table_columns(db.conn, table):
            db.execute(f"ALTER TABLE {table} ADD COLUMN owner TEXT")
            if table == "docs":
                db.execute("UPDATE docs SET hash = ''")


@INDEX_MIGRATIONS()
def m003_doc_updated(db: sqlite_utils.Database) -> None:
    """Each doc's last change (`updated`), in an index made before it existed."""
    if "updated" not in table_columns(db.conn, "docs"):
        db.execute("ALTER TABLE docs ADD COLUMN updated TEXT")


# what an index run reads about each doc's ownership and freshness (index/ownership.py, the
# front matter): written for every doc by every run
DOC_FACTS = ("codeowner", "author", "watched")
FRESHNESS = ("reviewed", "review_every", "watches")


@INDEX_MIGRATIONS()
def m004_doc_owners_and_freshness(db: sqlite_utils.Database) -> None:
    """Each doc's CODEOWNERS owner, last author, review dates and watched paths; docs' hashes
    cleared so the next run reads their front matter again (nothing is embedded again)."""
    have = table_columns(db.conn, "docs")
    added = [c for c in (*FRESHNESS, *DOC_FACTS) if c not in have]
    for column in added:
        db.execute(f"ALTER TABLE docs ADD COLUMN {column} TEXT")
    if added:
        db.execute("UPDATE docs SET hash = ''")


def unknown_migrations(db: sqlite_utils.Database, migrations: sqlite_utils.Migrations) -> list[str]:
    """The migrations of this set that `db` records and this fieldguide does not have: what a
    newer fieldguide applied."""
    known = {m.name for m in migrations._migrations}
    return [m.name for m in migrations.applied(db) if m.name not in known]


def refuse_newer(db: sqlite_utils.Database, migrations: sqlite_utils.Migrations, what: str) -> None:
    """NewerIndex when `db` records migrations of this set that this fieldguide does not know;
    `what` names the file in the message."""
    if newer := unknown_migrations(db, migrations):
        raise NewerIndex(newer_message(what, newer))


def newer_message(what: str, newer: list[str]) -> str:
    return (
        f"{what} was written by a newer fieldguide ({', '.join(newer)}): upgrade fieldguide to"
        " use it, or build a new index with this one"
    )


def migrate(
    db: sqlite_utils.Database, migrations: sqlite_utils.Migrations, what: str = "the index"
) -> None:
    """Apply the migrations `db` lacks, each in one transaction with its record; nothing is
    written when none is pending (a read-only file opens as it is). A file that records a
    migration this fieldguide does not know is refused (NewerIndex), before anything is
    written: a newer fieldguide wrote it."""
    refuse_newer(db, migrations, what)
    if not migrations.pending(db):
        return
    try:
        migrations.apply(db)
    except sqlite3.IntegrityError:  # another process recorded them first: they are applied
        if migrations.pending(db):
            raise


def table_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def doc_updated(conn: sqlite3.Connection) -> str:
    """The SQL for a doc's last change in a query over `docs d`: NULL in an index too old to have
    it that this process cannot write."""
    return "d.updated" if "updated" in table_columns(conn, "docs") else "NULL"
