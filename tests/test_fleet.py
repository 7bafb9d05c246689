"""A fleet: real `fieldguide serve --http` processes on one real PostgreSQL, one Slack mock. Events
are signed and posted as Slack posts them; the replicas answer through the mock's Web API."""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from bot.cli import main
from index.publish import local_generation, publish
from tests.conftest import EXAMPLES, write_docs
from tests.standins import slack_harness
from tests.standins.fleet import FleetSlack, Replica, event_payload, mention
from tests.standins.server import StubServer
from tests.standins.socket_mode import SocketModeServer


def wait(condition, timeout: float = 30.0):
    return slack_harness.wait(condition, timeout, "the fleet")


class Fleet:
    def __init__(
        self, url: str, mock: FleetSlack, replicas: list[Replica], builder: str, docs: Path
    ):
        self.url, self.mock, self.replicas, self.builder = url, mock, replicas, builder
        self.docs = docs

    def answers_in(self, ts: str) -> list[dict]:
        """The final answers in thread `ts` (a placeholder updated, a stream stopped)."""
        return self.mock.answers_in(ts)

    def placeholders_in(self, ts: str) -> int:
        return list(self.mock.thread_of.values()).count(ts)

    def audit_threads(self) -> list[str]:
        with psycopg.connect(self.url) as conn:
            return [r[0] for r in conn.execute("SELECT thread_ts FROM answers ORDER BY id")]

    def settle(self) -> None:
        """Every replica has handled what it was sent before: a fresh question to each is
        answered (Bolt runs listeners in order of arrival on a small pool)."""
        stamps = []
        for r in self.replicas:
            ts = f"1700009{uuid.uuid4().int % 10**6:06d}.000001"
            stamps.append(ts)
            # a replica whose session is still coming back refuses (503) as Slack expects: resent
            q = mention("How do I rotate a webhook signing secret?", ts)
            wait(lambda r=r, q=q, ts=ts: r.event(q, ts) == 200)
        wait(lambda: all(self.answers_in(ts) for ts in stamps))


def _new_database(
    pg_server, template: str, work: Path, docs: Path | None = None, embedder=None
) -> tuple[str, str]:
    """A new fleet database with the example docs' index published to it, and that index (built
    from `docs`, a copy of the example docs, when given: the source /docs-reindex then uses)."""
    from bot.state.postgres.schema import upgrade
    from index.indexer import index_folder

    builder = str(work / "builder.db")
    shutil.copyfile(template, builder)
    if docs is not None:  # the same docs elsewhere: nothing to embed, the source recorded
        index_folder(builder, docs, embedder, replace=True)
    url = pg_server.create_database("fleet_" + uuid.uuid4().hex[:8])
    upgrade(url)
    publish(url, builder)
    return url, builder


@pytest.fixture(scope="module")
def fleet(pg_server, examples_template, local_embedder, tmp_path_factory):
    work = tmp_path_factory.mktemp("fleet")
    docs = shutil.copytree(EXAMPLES, work / "docs")  # what /docs-reindex indexes
    url, builder = _new_database(pg_server, examples_template, work, Path(docs), local_embedder)
    mock = FleetSlack()
    replicas = [
        Replica(name, url, mock.url, work, FIELDGUIDE_ADMINS="UADMIN", FIELDGUIDE_DOCS=str(docs))
        for name in ("r1", "r2")
    ]
    try:
        for r in replicas:
            r.wait_ready()
        yield Fleet(url, mock, replicas, builder, Path(docs))
    finally:
        for r in replicas:
            r.stop()
        mock.close()


def _both_at_once(calls) -> None:
    threads = [threading.Thread(target=c) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_the_same_event_to_two_replicas_is_answered_once(fleet):
    r1, r2 = fleet.replicas
    ev = mention("How many times is a failed webhook retried?", "1700000100.000001")
    _both_at_once([lambda: r1.event(ev, "EvSame"), lambda: r2.event(ev, "EvSame")])
    # Slack's retries of it, to each replica (one of them is "the other")
    assert r1.event(ev, "EvSame", retry=1) == 200
    assert r2.event(ev, "EvSame", retry=2) == 200
    # the same message delivered again as a `message` event with its own event id
    assert r2.event({**ev, "type": "message", "channel_type": "channel"}, "EvSame2") == 200
    wait(lambda: fleet.answers_in("1700000100.000001"))
    fleet.settle()
    [answer] = fleet.answers_in("1700000100.000001")
    assert "attempts" in json.dumps(answer) + answer.get("text", "")
    assert fleet.audit_threads().count("1700000100.000001") == 1


def test_a_publish_reaches_every_replica_without_restart(fleet, tmp_path, monkeypatch):
    docs = fleet.docs  # the fleet's docs source (another folder would be refused)
    write_docs(
        docs,
        {
            "ops/zanzibar.md": "---\nintent: troubleshooting\n---\n# Zanzibar rotation\n\n"
            "The zanzibar rotation replaces every quokka token each Tuesday at 04:00 UTC.\n"
        },
    )
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", fleet.url)
    before = local_generation(fleet.builder)
    assert main(["index", str(docs), "--db", fleet.builder, "--quiet"]) == 0
    new = local_generation(fleet.builder)
    assert new is not None and new != before
    t0 = time.monotonic()
    # each replica logs it once it has loaded the new index (it answered from the old one till then)
    wait(lambda: all(r.serving(new) for r in fleet.replicas), timeout=15)
    assert time.monotonic() - t0 < 10  # NOTIFY, not the 30 s poll
    assert all(local_generation(r.db) == new for r in fleet.replicas)
    for i, r in enumerate(fleet.replicas):
        ts = f"1700000200.00000{i}"
        assert r.event(mention("When does the zanzibar rotation replace quokka tokens?", ts), ts)
        [answer] = wait(lambda ts=ts: fleet.answers_in(ts))
        assert "ops/zanzibar.md" in json.dumps(answer) or "Tuesday" in json.dumps(answer)


def test_docs_reindex_on_one_replica_reaches_the_other(fleet):
    r1, r2 = fleet.replicas
    docs = Path(fleet.docs)
    write_docs(docs, {"ops/kestrel.md": "# Kestrel drills\n\nKestrel drills run every March.\n"})
    status, body = r2.command("UADMIN", "", fleet.mock.url + "/respond")
    assert status == 200 and "Reindexing" in body
    done = wait(
        lambda: [r["text"] for r in fleet.mock.responses() if "Published" in r.get("text", "")]
    )
    assert "added 1" in done[0]
    generation = int(done[0].rsplit("generation ", 1)[1].rstrip("."))
    assert local_generation(r2.db) == generation  # built there: nothing to download
    wait(lambda: r1.serving(generation), timeout=15)
    status, body = r1.command("UADMIN", "status", fleet.mock.url + "/respond")
    assert status == 200 and "Last run" in body


@contextmanager
def dying_replica(fleet, name: str, **env: str) -> Iterator[tuple[Replica, StubServer]]:
    """A fourth replica whose Claude never answers, so that it can be killed mid-answer; its
    Claude stub, to wait on the question reaching it. `env`: more of its settings."""
    claude = StubServer()
    release = threading.Event()

    def hang(req):
        release.wait(30)
        return 500, {"type": "error", "error": {"type": "api_error", "message": "gone"}}

    claude.route("/v1/messages", hang)
    slow = Replica(
        name,
        fleet.url,
        fleet.mock.url,
        Path(fleet.replicas[0].db).parent,
        False,  # HTTP, not Socket Mode
        ANTHROPIC_API_KEY="sk-ant-test",
        ANTHROPIC_BASE_URL=claude.url,
        FIELDGUIDE_MAX_RETRIES="0",
        **env,
    )
    try:
        slow.wait_ready()
        yield slow, claude
    finally:
        release.set()
        slow.stop()
        claude.close()


def test_a_replica_killed_mid_answer_its_retry_is_answered_by_another(fleet):
    with dying_replica(fleet, "slow") as (slow, claude):
        ts = "1700000300.000001"
        ev = mention("How many times is a failed webhook retried?", ts)
        assert slow.event(ev, "EvKilled") == 200
        claude.wait_for("/v1/messages")  # claimed, placeholder posted, now asking Claude
        assert fleet.placeholders_in(ts) == 1
        slow.proc.send_signal(signal.SIGKILL)
        slow.proc.wait(10)
        # its PostgreSQL sessions end with it (what the other replicas' claims look at)
        wait(lambda: not _sessions_of(fleet.url, slow.proc.pid))
        assert fleet.replicas[0].event(ev, "EvKilled", retry=1) == 200
        [answer] = wait(lambda: fleet.answers_in(ts))
        assert "attempts" in json.dumps(answer)
        assert fleet.audit_threads().count(ts) == 1


def test_a_replica_killed_after_acking_its_event_is_answered_by_another_without_retry(fleet):
    """Slack does not resend an event it saw acknowledged: the claim keeps the event, and a live
    replica's sweeper takes it over once the claimer's session is gone, and answers it once."""
    with dying_replica(fleet, "slow2") as (slow, claude):
        ts = "1700000310.000001"
        ev = mention("How many times is a failed webhook retried?", ts)
        assert slow.event(ev, "EvOrphan") == 200  # acknowledged: Slack will not send it again
        claude.wait_for("/v1/messages")
        assert fleet.placeholders_in(ts) == 1 and not fleet.answers_in(ts)
        slow.proc.send_signal(signal.SIGKILL)
        slow.proc.wait(10)
        # no retry is sent: a live replica's sweeper answers it
        [answer] = wait(lambda: fleet.answers_in(ts), timeout=15)
        assert "attempts" in json.dumps(answer)
        fleet.settle()  # every replica has handled what it was sent
        assert len(fleet.answers_in(ts)) == 1
        # answered in the dead replica's placeholder, not under it
        assert fleet.placeholders_in(ts) == 1
        assert fleet.audit_threads().count(ts) == 1
        with psycopg.connect(fleet.url) as conn:
            done = conn.execute(
                "SELECT bool_and(done) FROM event_claims WHERE key IN ('EvOrphan', %s)",
                [f"C1:{ts}"],
            ).fetchone()
        assert done == (True,)


def test_a_replica_stopped_with_sigterm_leaves_what_it_could_not_answer_to_another(fleet):
    """SIGTERM: the replica answers what it holds for FIELDGUIDE_DRAIN_SECONDS, then exits 0
    with its claims open; a live replica's sweeper answers the rest, in its placeholder, once."""
    with dying_replica(fleet, "slow3", FIELDGUIDE_DRAIN_SECONDS="1") as (slow, claude):
        ts = "1700000320.000001"
        ev = mention("How many times is a failed webhook retried?", ts)
        assert slow.event(ev, "EvTerm") == 200
        claude.wait_for("/v1/messages")  # in flight: Claude never answers it
        slow.proc.send_signal(signal.SIGTERM)
        assert slow.proc.wait(30) == 0
        assert "stopped with 1 question(s) unanswered" in slow.log_text()
        [answer] = wait(lambda: fleet.answers_in(ts), timeout=20)
        assert "attempts" in json.dumps(answer.get("blocks", ""))
        fleet.settle()
        assert len(fleet.answers_in(ts)) == 1 and fleet.placeholders_in(ts) == 1
        assert fleet.audit_threads().count(ts) == 1


def _sessions_of(url: str, pid: int) -> list:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s", [f"%:{pid}"]
        ).fetchall()


def test_postgres_stopped_and_restarted_while_serving(fleet, pg_server):
    r1, r2 = fleet.replicas
    pg_server.stop()
    try:
        stamps = [f"1700000400.00000{i}" for i in range(4)]
        question = "How many times is a failed webhook retried?"
        for i, ts in enumerate(stamps):
            r = fleet.replicas[i % 2]
            # not acknowledged while its claim cannot be durable: Slack keeps it
            assert r.event(mention(question, ts), ts) == 503
            # Slack's last retry is answered from memory
            assert r.event(mention(question, ts), ts, retry=3) == 200
        # a second last retry to the replica that has the event: its own memory drops it
        assert r1.event(mention("x", stamps[0]), stamps[0], retry=3) == 200
        wait(lambda: all(fleet.answers_in(ts) for ts in stamps))
    finally:
        pg_server.start()
    # the queued audit rows arrive once the database is back
    wait(lambda: set(stamps) <= set(fleet.audit_threads()), timeout=30)
    assert all(len(fleet.answers_in(ts)) == 1 for ts in stamps)
    # and the fleet de-duplicates through PostgreSQL again
    ev = mention("How many times is a failed webhook retried?", "1700000500.000001")
    _both_at_once([lambda: r1.event(ev, "EvAfter"), lambda: r2.event(ev, "EvAfter")])
    wait(lambda: fleet.answers_in("1700000500.000001"))
    fleet.settle()
    assert len(fleet.answers_in("1700000500.000001")) == 1


# -- Socket Mode: each replica holds its own WebSocket; Slack hands each event to one of them ------


class SocketFleet(Fleet):
    def __init__(self, url: str, mock: FleetSlack, socket: SocketModeServer, replicas, builder):
        super().__init__(url, mock, replicas, builder, Path())
        self.socket = socket

    def deliver(
        self, stamps: list[str], event_prefix: str, resend_after: float = 3.0, retries: int = 3
    ) -> None:
        """A mention per stamp, each delivered as Slack does (one connection, retried on another
        when not acknowledged in time); returns once every one was acknowledged."""
        threads = [
            self.socket.deliver(
                event_payload(
                    mention("How many times is a failed webhook retried?", ts),
                    f"{event_prefix}{i}",
                ),
                resend_after=resend_after,
                retries=retries,
            )
            for i, ts in enumerate(stamps)
        ]
        for t in threads:
            t.join(30)

    def envelopes_to(self, replica: Replica, event_prefix: str) -> list[dict]:
        """The envelopes of these events that went to the replica's connection."""
        index = self.socket.connections.index(replica.connection(self.socket.live))
        return [
            d
            for d in self.socket.deliveries
            if d["connection"] == index and str(d["event_id"]).startswith(event_prefix)
        ]

    def answered_once(self, stamps: list[str]) -> None:
        assert all(len(self.answers_in(ts)) == 1 for ts in stamps)
        assert all(self.placeholders_in(ts) == 1 for ts in stamps)
        audit = self.audit_threads()
        assert all(audit.count(ts) == 1 for ts in stamps)


@contextmanager
def new_socket_fleet(pg_server, examples_template, work: Path) -> Iterator[SocketFleet]:
    """Two replicas in Socket Mode on a database of their own, each with its connection."""
    url, builder = _new_database(pg_server, examples_template, work)
    mock = FleetSlack()
    socket = SocketModeServer(mock)  # apps.connections.open hands out its URL
    replicas = [Replica(name, url, mock.url, work, socket=True) for name in ("s1", "s2")]
    try:
        for r in replicas:
            r.wait_ready()
        socket.wait_live(2)
        yield SocketFleet(url, mock, socket, replicas, builder)
    finally:
        for r in replicas:
            r.stop()
        socket.close()
        mock.close()


@pytest.fixture(scope="module")
def socket_fleet(pg_server, examples_template, tmp_path_factory):
    """Shared by the tests that leave both replicas alive."""
    with new_socket_fleet(pg_server, examples_template, tmp_path_factory.mktemp("socket")) as f:
        yield f


def test_socket_mode_replicas_report_slack_the_index_and_postgresql_healthy(socket_fleet):
    for replica in socket_fleet.replicas:  # each on its FIELDGUIDE_HEALTH_PORT
        status, report = replica.health()
        assert status == 200 and report["ok"], report
        assert report["postgres"] == {"ok": True, "detail": "reachable"}
        assert report["slack"]["ok"] and report["index"]["ok"]


def test_socket_mode_replicas_share_events_and_slack_retries_are_answered_once(socket_fleet):
    f = socket_fleet
    s1, s2 = f.replicas
    stamps = [f"1700000600.00000{i}" for i in range(6)]
    f.deliver(stamps, "EvSock")
    wait(lambda: all(f.answers_in(ts) for ts in stamps))
    # spread over both connections, answered by the replica that received each
    assert f.envelopes_to(s1, "EvSock") and f.envelopes_to(s2, "EvSock")
    f.answered_once(stamps)

    # s1 stops reading its socket (a GC pause, an overloaded host): what Slack sent it is not
    # acknowledged, so Slack sends it again on s2's connection, which answers it
    retried = [f"1700000700.00000{i}" for i in range(4)]
    s1.freeze()
    try:
        # Slack's retries are minutes apart; here 1 s, so a loaded machine gets a few more of them
        f.deliver(retried, "EvRetry", resend_after=1.0, retries=6)
        try:
            wait(lambda: all(f.answers_in(ts) for ts in retried), timeout=60)
        except AssertionError:
            deliveries = [d for d in f.socket.deliveries if "EvRetry" in str(d["event_id"])]
            logs = "\n".join(r.log_text()[-3000:] for r in f.replicas)
            acked = sorted(f.socket.acks)
            raise AssertionError(f"not all answered: {deliveries}, acked {acked}\n{logs}") from None
    finally:
        s1.proc.send_signal(signal.SIGCONT)
    late = {d["event_id"] for d in f.envelopes_to(s1, "EvRetry")}
    assert late, "no envelope went to the stopped replica"
    assert any(
        d["retry_attempt"] >= 1 and d["event_id"] in late for d in f.envelopes_to(s2, "EvRetry")
    )
    # s1 wakes up and reads the first deliveries: it drops them (s2 has them), not answers them
    ts_of = {f"EvRetry{i}": ts for i, ts in enumerate(retried)}
    wait(
        lambda: all(
            f"event {e} already claimed" in s1.log_text() or f.placeholders_in(ts_of[e]) > 1
            for e in late
        )
    )
    f.answered_once(stamps + retried)


def test_socket_mode_replica_killed_the_other_answers_its_unacknowledged_events(
    pg_server, examples_template, tmp_path
):
    with new_socket_fleet(pg_server, examples_template, tmp_path) as f:  # one of its own: it dies
        the_other_answers_a_killed_replicas_events(f)


def the_other_answers_a_killed_replicas_events(f: SocketFleet) -> None:
    s1, s2 = f.replicas
    stamps = [f"1700000800.00000{i}" for i in range(4)]
    s2.freeze()  # it receives its share but acknowledges none
    threads = [
        f.socket.deliver(
            event_payload(mention("How many times is a failed webhook retried?", ts), f"EvDie{i}"),
            resend_after=30,  # no timeout: the closed connection is what makes Slack re-send
        )
        for i, ts in enumerate(stamps)
    ]
    wait(lambda: len(f.envelopes_to(s2, "EvDie")) >= 1)
    s2.proc.send_signal(signal.SIGKILL)
    s2.proc.wait(10)
    f.socket.wait_live(1)
    for t in threads:
        t.join(30)
    wait(lambda: all(f.answers_in(ts) for ts in stamps))
    f.answered_once(stamps)
    # and s1 alone keeps answering
    more = ["1700000900.000001"]
    f.deliver(more, "EvAlone")
    wait(lambda: f.answers_in(more[0]))
    f.answered_once(more)


def test_text_postgres_cannot_hold_is_cleaned_and_answered(fleet):
    # a NUL or a lone surrogate in a mention failed the claim after the ack
    ts = "1700000700.000001"
    text = "How many times is a failed webhook retried?\x00 \ud800"
    assert fleet.replicas[0].event(mention(text, ts), "EvNul") == 200
    [answer] = wait(lambda: fleet.answers_in(ts))
    assert "attempts" in json.dumps(answer)
    with psycopg.connect(fleet.url) as conn:
        [(question,)] = conn.execute(
            "SELECT question FROM answers WHERE thread_ts = %s", [ts]
        ).fetchall()
    assert question == "How many times is a failed webhook retried? \ufffd"


def test_a_replica_killed_during_an_outage_leaves_nothing_unanswered(fleet, pg_server):
    # events sent while PostgreSQL is down are not acknowledged (their claims
    # could live only in memory), so Slack sends them again once a replica can take them;
    # the replica that got them first dies meanwhile
    with dying_replica(fleet, "doomed") as (doomed, _claude):
        question = "How many times is a failed webhook retried?"
        stamps = [f"1700000800.00000{i}" for i in range(8)]
        pg_server.stop()
        try:
            statuses = [doomed.event(mention(question, ts), f"EvDoom{i}") for i, ts in
                        enumerate(stamps)]  # fmt: skip
            doomed.proc.send_signal(signal.SIGKILL)
            doomed.proc.wait(10)
        finally:
            pg_server.start()
        assert statuses == [503] * 8
        # Slack's retries reach a live replica
        for i, ts in enumerate(stamps):
            r = fleet.replicas[i % 2]
            wait(lambda r=r, i=i, ts=ts: r.event(mention(question, ts), f"EvDoom{i}", retry=1)
                 == 200)  # fmt: skip
        wait(lambda: all(fleet.answers_in(ts) for ts in stamps))
        fleet.settle()
        assert all(len(fleet.answers_in(ts)) == 1 for ts in stamps)
        # no placeholder left behind: each thread holds one message, its answer
        assert all(fleet.placeholders_in(ts) == 1 for ts in stamps)
