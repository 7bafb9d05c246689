"""PostgresState, the schema and index publishing against a real PostgreSQL server (started by the
suite: tests/standins/pgserver.py)."""

import json
import threading
import time

import psycopg
import pytest

from bot.cli import main
from bot.state.postgres import PostgresState
from bot.state.postgres.schema import LATEST, MIGRATIONS, upgrade
from index.pg import FleetError, open_pool
from index.publish import local_generation
from index.store import get_meta, open_db
from tests.conftest import write_docs


@pytest.fixture
def two_states(pg_url):
    """Two replicas' states on one database."""
    a, b = PostgresState(pg_url), PostgresState(pg_url)
    yield a, b
    a.close()
    b.close()


def test_db_upgrade_is_versioned_and_idempotent(pg_server, monkeypatch, capsys):
    url = pg_server.create_database("upgrade_check")
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", url)
    assert main(["db", "upgrade"]) == 0
    assert f"upgraded from version 0 to {LATEST}" in capsys.readouterr().out
    assert main(["db", "upgrade"]) == 0
    assert f"already at version {LATEST}" in capsys.readouterr().out
    with psycopg.connect(url) as conn:
        versions = conn.execute("SELECT version FROM schema_version").fetchall()
    assert versions == [(v,) for v in range(1, LATEST + 1)]
    assert upgrade(url) == (LATEST, LATEST)
    # a database deployed at version 1 (no event kept with its claim) gets the column
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE event_claims DROP COLUMN event")
        conn.execute("DROP TABLE handoffs")
        conn.execute("DROP TABLE viewing")
        conn.execute("DELETE FROM schema_version WHERE version >= 2")
    assert upgrade(url) == (1, LATEST)
    with psycopg.connect(url) as conn:
        assert conn.execute(
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_name = 'event_claims' AND column_name = 'event'"
        ).fetchall() == [(1,)]


def test_a_schema_a_newer_fieldguide_migrated_is_refused_by_name(pg_server, monkeypatch, capsys):
    url = pg_server.create_database("newer_schema")
    upgrade(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", [LATEST + 1])
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", url)
    newer = f"written by a newer fieldguide (version {LATEST + 1}; this one knows up to {LATEST})"
    for argv in (["db", "upgrade"], ["audit"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert newer in err and "Traceback" not in err, err


def test_unreachable_or_unprepared_database_is_a_clear_error(pg_server, monkeypatch, capsys):
    from tests.standins.pgserver import free_port

    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", f"postgresql://x@127.0.0.1:{free_port()}/x")
    assert main(["audit"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fieldguide: Cannot reach PostgreSQL at 127.0.0.1:")
    assert "Traceback" not in err
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", pg_server.create_database("not_upgraded"))
    assert main(["audit"]) == 2
    assert f"version 0, this fieldguide needs {len(MIGRATIONS)}: run fieldguide db upgrade" in (
        capsys.readouterr().err
    )
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", f"postgresql://x@127.0.0.1:{free_port()}/x")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s")
    assert main(["serve", "--http", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "Cannot reach PostgreSQL" in err and "Traceback" not in err
    with pytest.raises(FleetError, match="Cannot reach"):
        open_pool(f"postgresql://x@127.0.0.1:{free_port()}/x", LATEST)


def test_an_event_is_claimed_once_across_replicas(two_states):
    a, b = two_states
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def claim(state, keys):
        barrier.wait()
        results.append(state.take_event(*keys))

    # the same message as app_mention (Ev1) and message (Ev2) events, to both replicas at once
    threads = [
        threading.Thread(target=claim, args=(s, (ev, "C1:1.0")))
        for s in (a, b, a, b)
        for ev in ("Ev1", "Ev2")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]
    assert not b.take_event("Ev1", "C1:1.0") and not a.take_event("Ev2", "C1:1.0")  # retries
    assert not b.take_event("Ev3", "C1:1.0")  # a new event id for the same message: no


def test_a_claim_whose_owner_died_unanswered_is_taken_over(two_states, pg_url):
    a, b = two_states
    assert a.take_event("Ev1", "C1:1.0")
    assert not b.take_event("Ev1", "C1:1.0")  # a is alive: it is answering
    a.close()  # a's session ends (as when the process dies) before it recorded the answer
    # the server ends that backend a moment after the connection closes, not at once
    deadline = time.monotonic() + 10
    while not b.take_event("Ev1", "C1:1.0"):
        assert time.monotonic() < deadline, "a's claim was never freed"
        time.sleep(0.05)
    b.record_answer(_answer(), {"channel": "C1", "thread_ts": "1.0"})
    c = PostgresState(pg_url)
    try:
        assert not c.take_event("Ev1", "C1:1.0")  # answered: b's death would not free it now
        b.close()
        assert not c.take_event("Ev1", "C1:1.0")
    finally:
        c.close()


def test_rate_limit_counts_across_replicas(two_states):
    a, b = two_states
    allowed = [s.allow_question("U1", 3) for s in (a, b, a, b)]
    assert allowed == [True, True, True, False]
    assert a.allow_question("U2", 3)


def test_what_a_user_is_looking_at_is_read_by_every_replica(two_states):
    a, b = two_states
    assert b.viewing("U1", "D1") == ""
    a.note_viewing("U1", "D1", "C0BILLING")
    assert b.viewing("U1", "D1") == "C0BILLING" and b.viewing("U2", "D1") == ""
    b.note_viewing("U1", "D1", "")  # looking at no channel now
    assert a.viewing("U1", "D1") == ""


def test_reindex_lock_is_fleet_wide_and_freed_when_the_holder_dies(two_states):
    a, b = two_states
    with a.reindex_lock() as mine:
        assert mine and b.reindex_running()
        with b.reindex_lock() as theirs:
            assert not theirs
        assert a._session is not None
        a._session.close()  # the holder's connection dies with its process
        # the server ends that backend (and frees its lock) a moment later, not at once
        deadline = time.monotonic() + 10
        while b.reindex_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        with b.reindex_lock() as theirs:
            assert theirs
    assert not b.reindex_running()


def _answer():
    from router.answer import Answer

    return Answer("How are webhooks retried?", "", "ANSWER", "8 times.")


def test_a_handoff_is_made_once_across_replicas(two_states):
    a, b = two_states
    aid = a.record_answer(_answer(), {"channel": "C9", "user": "U1", "thread_ts": "7.0"})
    assert aid is not None
    results: list = []

    def click(state, target):
        results.append(state.claim_handoff(aid, "U1", "S1", target))

    threads = [threading.Thread(target=click, args=st) for st in ((a, "#a"), (b, "#b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [first] = [r for r in results if r is not None]  # the loser is told where it went
    assert None in results and first in ("#a", "#b")
    assert b.get_answer(aid)["handoff"] == first
    a.release_handoff(aid)  # the post failed: the button may be tried again
    assert b.claim_handoff(aid, "U2", "S1", "#c") is None
    assert a.get_answer(aid)["handoff"] == "#c" and a.get_answer(aid + 1000) is None


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_an_answer_given_again_in_its_message_replaces_its_row(where, pg_url, examples_db):
    """The next process answering a claim its killed claimer never closed answers in the same
    message: the audit keeps one row for it."""
    from bot.state.sqlite import SqliteState

    state = PostgresState(pg_url) if where == "postgres" else SqliteState(open_db(examples_db))
    place = {"channel": "C7", "user": "U1", "thread_ts": "8.0", "message_ts": "8.5"}
    try:
        first = state.record_answer(_answer(), place)
        assert first is not None
        state.record_feedback(first, "U2", "helpful")
        again = state.record_answer(_answer(), place)
        other = state.record_answer(_answer(), place | {"message_ts": "8.6"})
        rows = [r for r in state.list_answers(limit=50) if r["channel"] == "C7"]
        assert {r["id"] for r in rows} == {again, other} and first != again
    finally:
        state.close()


def test_audit_and_feedback_are_read_from_postgres(pg_url, monkeypatch, capsys):
    state = PostgresState(pg_url)
    try:
        aid = state.record_answer(_answer(), {"channel": "C9", "user": "U1", "thread_ts": "5.0"})
        assert aid is not None
        state.record_feedback(aid, "U2", "helpful")
        state.record_feedback(aid, "U2", "not_helpful")  # last choice wins
        assert state.thread_answered("C9", "5.0") and not state.thread_answered("C9", "6.0")
    finally:
        state.close()
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", pg_url)
    assert main(["audit", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["question"] == "How are webhooks retried?" and row["channel"] == "C9"
    assert row["feedback"] == {"U2": "not_helpful"}


def test_audit_stats_read_from_postgres(pg_url, monkeypatch, capsys):
    from router.messages import add_usage

    state = PostgresState(pg_url)
    try:
        for n in range(3):
            ans = _answer()
            step = {"model": "claude-haiku-4-5", "input_tokens": 1_000_000, "output_tokens": n}
            add_usage(ans.trace.usage, "extract", step | {"cache_read_input_tokens": 0})
            state.record_answer(ans, {})
    finally:
        state.close()
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", pg_url)
    assert main(["audit", "--stats", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    haiku = s["models"]["claude-haiku-4-5"]
    assert s["questions"] >= 3 and haiku["calls"] == 3 and haiku["input_tokens"] == 3_000_000
    assert haiku["cost_usd"] == round(3.0 + 3 * 5 / 1e6, 6)  # $1 / $5 per million tokens


def test_index_publishes_and_shares_embeddings(pg_url, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", pg_url)
    docs = write_docs(tmp_path / "docs", {"a.md": "# Alpha\n\nAlpha rotates keys.\n"})
    first, second = tmp_path / "one.db", tmp_path / "two.db"
    assert main(["index", str(docs), "--db", str(first), "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["embedded"] == 1 and out["published"]["generation"] == 1
    assert local_generation(first) == 1
    # another machine indexing the same text embeds nothing: the vector comes from PostgreSQL
    write_docs(docs, {"b.md": "# Beta\n\nBeta signs requests.\n"})
    assert main(["index", str(docs), "--db", str(second), "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["embedded"] == 1 and out["chunks"] == 2 and out["published"]["generation"] == 2


def test_an_index_written_by_an_older_fieldguide_is_published(pg_url, examples_db):
    """Its tables may lack a column added since (runs.warnings): the snapshot copies the columns
    both have instead of failing."""
    import sqlite3

    from index.publish import publish

    with sqlite3.connect(examples_db) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN warnings")
    assert publish(pg_url, examples_db)["generation"] == 1


def test_a_replica_follows_the_newest_generation(pg_url, tmp_path, local_embedder, examples_db):
    from bot.indexing import start_follower, sync_published
    from bot.settings import Settings
    from index.indexer import index_folder
    from index.publish import publish
    from router.engine import Engine

    builder = examples_db
    publish(pg_url, builder)
    settings = Settings(database_url=pg_url)
    replica = str(tmp_path / "replica.db")
    assert sync_published(settings.at(replica)) == 1
    engine = Engine(replica, local_embedder)
    old = engine.loaded()
    follower = start_follower(settings, engine)
    try:
        docs = write_docs(tmp_path / "docs", {"zz.md": "# Zanzibar\n\nZanzibar rotation.\n"})
        index_folder(builder, docs, local_embedder, replace=True)  # other docs: a swap
        publish(pg_url, builder)
        _wait(lambda: engine._loaded is not old)
        assert local_generation(replica) == 2
        searcher = engine.loaded().searcher
        assert [r["doc"] for r in searcher.fetch(list(range(searcher.size)))] == ["zz.md"]
        assert get_meta(open_db(replica), "published_generation") == "2"
    finally:
        follower.stop()


def _wait(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_replicas_restore_their_sessions_from_their_pools_when_the_server_is_full():
    # PostgreSQL refusing new connections (max_connections reached) left both
    # replicas "unreachable" although their pools worked, and de-duplicating in memory: every
    # retried event answered twice. A session now comes from the pool.
    from tests.standins.pgserver import PgServer

    server = PgServer({"max_connections": "12"})
    held: list[psycopg.Connection] = []
    states: list[PostgresState] = []
    try:
        url = server.create_database("full")
        upgrade(url)
        states = [PostgresState(url, max_connections=4) for _ in range(2)]
        for state in states:  # the pools grow under load, as a serving replica's does
            threads = [
                threading.Thread(target=state._run, args=("SELECT pg_sleep(0.3)",))
                for _ in range(3)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        def fill() -> None:  # every free connection slot taken
            while True:
                try:
                    held.append(psycopg.connect(url, autocommit=True, connect_timeout=3))
                except psycopg.OperationalError:
                    return

        fill()
        assert held
        old = [s._identity for s in states]
        for s in states:  # the sessions end (a network blip, an admin's pg_terminate_backend)
            held[0].execute("SELECT pg_terminate_backend(%s)", [s._identity[0]])
        time.sleep(0.2)
        fill()  # and their slots are taken at once
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(
            s._identity != o and not s._down for s, o in zip(states, old, strict=True)
        ):
            time.sleep(0.2)
        assert [s._down for s in states] == [False, False]
        assert all(s._identity != o for s, o in zip(states, old, strict=True))
        assert all(s.durable() for s in states)
        # de-duplication is the fleet's again: one replica gets each event
        for i in range(8):
            got = [s.take_event(f"EvFull{i}", f"C1:{i}") for s in states]
            assert sorted(got) == [False, True]
    finally:
        for s in states:
            s.close()
        for c in held:
            c.close()
        server.close()


def test_a_claim_postgresql_refuses_still_gets_the_question_answered(two_states):
    # text PostgreSQL cannot hold (NUL, a lone surrogate) failed the claim after
    # Slack had its ack: never answered. It is cleaned before it is stored; and a claim that
    # fails anyway (here a key longer than a btree index entry may be) is made in memory.
    import secrets

    a, _ = two_states
    assert a.take_event("EvNul\x00", "C1:1.\ud800", event={"text": "a\x00b \ud800"}) is True
    with psycopg.connect(a.url) as conn:
        [(event,)] = conn.execute("SELECT event FROM event_claims WHERE key = 'EvNul'").fetchall()
    assert event == {"text": "ab \ufffd"}
    key = "C1:" + secrets.token_hex(5000)  # incompressible: past btree's 2,704-byte limit
    assert a.take_event("EvHuge", key) is True
    assert a.take_event("EvHuge", key) is False  # a second delivery still dropped
    assert a.durable() and not a._down  # one refused statement is no outage
