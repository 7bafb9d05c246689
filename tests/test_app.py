"""fieldguide as one application object (bot/app.py): opened once, each part made once, the
question's path stateless below it."""

import sqlite3

from bot import api
from bot.app import FieldGuide
from bot.settings import Settings
from tests.conftest import EXAMPLES

QUESTION = "How many times is a failed webhook delivery retried?"


def test_ask_opens_the_index_once(tmp_path, monkeypatch):
    """One question through the API opens one connection to the index file (a connection per
    thread: the question is asked in this one): the engine, the hits' records, the scopes and the
    audit trail all go through it."""
    db = tmp_path / "index.db"
    scopes = tmp_path / "scopes.yaml"
    scopes.write_text("channels:\n  C0123ABC: {intents: [troubleshooting]}\n")
    settings = Settings(db=str(db), scopes=str(scopes))
    api.index(EXAMPLES, settings=settings)  # the run writes its search arrays beside the index
    opened: list[str] = []
    connect = sqlite3.connect

    def counted(database, *args, **kwargs):
        opened.append(str(database))
        return connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counted)
    ans = api.ask(QUESTION, channel="C0123ABC", settings=settings)
    assert ans.sources and ans.scope is not None and ans.audit_id is not None
    assert [p for p in opened if db.name in p] == [str(db)]
    [row] = api.audit(settings=settings)
    assert row["id"] == ans.audit_id and row["question"] == QUESTION


def test_each_part_is_made_once_and_only_when_used(examples_db, local_embedder):
    guide = FieldGuide(Settings(db=examples_db, database_url=""), embedder=local_embedder)
    assert "index" not in vars(guide)  # nothing is opened before it is needed
    first = guide.ask(QUESTION, context={"channel": "C1", "user": "U1"})
    second = guide.ask(QUESTION)
    assert first.audit_id is not None and second.audit_id == first.audit_id + 1
    assert guide.engine.db is guide.index and guide.state.db is guide.index  # type: ignore[attr-defined]
    assert guide.pipeline.engine is guide.engine
    rows = guide.state.list_answers()
    assert [r["channel"] for r in rows] == [None, "C1"]


def test_open_takes_the_index_file_given_over_the_setting(tmp_path):
    settings = Settings(db=str(tmp_path / "default.db"))
    assert FieldGuide.open(settings).settings.db == str(tmp_path / "default.db")
    assert FieldGuide.open(settings, tmp_path / "other.db").settings.db == str(
        tmp_path / "other.db"
    )
