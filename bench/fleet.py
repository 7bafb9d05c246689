"""A fleet under load: 3 `fieldguide serve --http` replicas on one PostgreSQL (a throwaway server
with pg_stat_statements), 300 Slack events sent to random replicas, 20% of them re-sent to another
replica as Slack retries, one replica killed (SIGKILL) halfway. Counts how many events were
answered exactly once, the event → answer latency, and the PostgreSQL statements per answer.

    .venv/bin/python bench/fleet.py [--events 300] [--rate 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import ROOT, WORK, eval_path, ms, table, write_section

sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bot.state.postgres.schema import upgrade  # noqa: E402
from index.embedders import make_embedder  # noqa: E402
from index.indexer import index_folder  # noqa: E402
from index.publish import publish  # noqa: E402
from tests.standins.fleet import FleetSlack, Replica, mention  # noqa: E402
from tests.standins.pgserver import PgServer  # noqa: E402

# the statements a replica sends for one event (claim, rate limit, thread lookup, audit row)
PER_ANSWER = (
    "event_claims AS c",
    "rate_windows",
    "FROM answers WHERE channel",
    "INSERT INTO answers",
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=300)
    ap.add_argument("--rate", type=float, default=2.0, help="events sent per second")
    ap.add_argument("--retries", type=float, default=0.2, help="share re-sent to another replica")
    args = ap.parse_args()
    rng = random.Random(13)
    questions = [
        json.loads(line)["question"]
        for line in (ROOT / "examples" / "questions.jsonl").read_text().splitlines()
        if line.strip()
    ]
    work = WORK / "fleet"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    builder = work / "builder.db"
    index_folder(builder, ROOT / "examples" / "docs", make_embedder())

    server = PgServer(
        {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}
    )
    mock = FleetSlack()
    replicas: list[Replica] = []
    try:
        url = server.create_database("fleet")
        upgrade(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        published = publish(url, builder)
        publishing = publish_figures(server, work)
        t0 = time.monotonic()
        replicas = [Replica(f"r{i}", url, mock.url, work) for i in (1, 2, 3)]
        for r in replicas:
            r.wait_ready(120)
        startup = time.monotonic() - t0
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_statements_reset()")
        load = os.getloadavg()[0]
        result = run(args, rng, questions, replicas, mock)
        result["load"] = (load, os.getloadavg()[0])
        with psycopg.connect(url, autocommit=True) as conn:
            stats = conn.execute(
                "SELECT query, calls, mean_exec_time FROM pg_stat_statements s JOIN pg_database d"
                " ON d.oid = s.dbid WHERE d.datname = 'fleet' ORDER BY calls DESC"
            ).fetchall()
            audit = conn.execute("SELECT count(*) FROM answers").fetchone()
            totals = [
                json.loads(t)["total"] / 1000
                for (t,) in conn.execute("SELECT timings_ms FROM answers").fetchall()
            ]
        result["pipeline"] = ms(totals) if totals else (0.0, 0.0)
        report(args, result, stats, audit[0] if audit else 0, published, startup, publishing)
    finally:
        for r in replicas:
            r.stop()
        mock.close()
        server.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(args, rng: random.Random, questions: list[str], replicas: list[Replica], mock) -> dict:
    sent_at: dict[str, float] = {}
    acked: dict[str, set[int]] = {}  # event ts → replicas that acknowledged it
    dead: set[int] = set()
    lock = threading.Lock()
    redirected = 0

    def deliver(ts: str, ev: dict, target: int, retry: int, delay: float = 0.0) -> None:
        """Send as Slack does: a replica that does not answer the request gets the retry on
        another one."""
        nonlocal redirected
        time.sleep(delay)
        while True:
            try:
                replicas[target].event(ev, f"Ev{ts}", retry=retry)
                with lock:
                    acked.setdefault(ts, set()).add(target)
                return
            except OSError:
                with lock:
                    redirected += 1
                alive = [j for j in range(len(replicas)) if j not in dead and j != target]
                target, retry = rng.choice(alive), retry + 1

    killed_at = args.events // 2
    resent = 0
    cpu = {r.proc.pid: cpu_seconds(r.proc.pid) for r in replicas}
    with ThreadPoolExecutor(32) as pool:
        start = time.monotonic()
        for i in range(args.events):
            time.sleep(max(0.0, start + i / args.rate - time.monotonic()))
            if i == killed_at:
                pid = replicas[0].proc.pid
                cpu[pid] = cpu_seconds(pid) - cpu[pid]
                replicas[0].proc.send_signal(signal.SIGKILL)
                replicas[0].proc.wait(10)
                dead.add(0)
            ts = f"1700100000.{i:06d}"
            ev = mention(rng.choice(questions), ts)
            target = rng.randrange(len(replicas))
            sent_at[ts] = time.monotonic()
            pool.submit(deliver, ts, ev, target, 0)
            if rng.random() < args.retries:  # Slack retries after 1-3 s (no timely ack seen)
                resent += 1
                other = rng.choice([j for j in range(len(replicas)) if j != target])
                pool.submit(deliver, ts, ev, other, 1, rng.uniform(1.0, 3.0))
        sending = time.monotonic() - start
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(answered(mock)) < args.events:
        time.sleep(0.2)
        idle = time.monotonic() - max(mock.answered_at.values(), default=0.0)
        if idle > 5:  # nothing answered for 5 s: what is left is not coming
            break
    for r in replicas[1:]:
        cpu[r.proc.pid] = cpu_seconds(r.proc.pid) - cpu[r.proc.pid]
    counts = answered(mock)
    latencies = [
        mock.answered_at[p] - sent_at[t]
        for p, t in mock.thread_of.items()
        if p in mock.answered_at and t in sent_at
    ]
    lost_with_r1 = [t for t in sent_at if t not in counts and acked.get(t) == {0}]
    for r in replicas[1:]:
        r.log.flush()
    # events another replica's sweeper answered for the killed one (bot/slack/orphans.py)
    taken_over = sum(
        Path(r.log.name).read_text().count("the replica that acknowledged it died")
        for r in replicas[1:]
    )
    return {
        "counts": counts,
        "latencies": latencies,
        "resent": resent,
        "redirected": redirected,
        "killed_at": killed_at,
        "lost_with_r1": len(lost_with_r1),
        "taken_over": taken_over,
        "cpu_per_answer": sum(cpu.values()) / max(1, sum(counts.values())),
        "sending": sending,
    }


def answered(mock) -> dict[str, int]:
    """thread ts → how many answers were posted in it."""
    out: dict[str, int] = {}
    for p, t in list(mock.thread_of.items()):
        if p in mock.answered_at:
            out[t] = out.get(t, 0) + 1
    return out


def publish_figures(server: PgServer, work: Path) -> str:
    """Publish and follow the indexes at hand: bytes, stored bytes, seconds, with and without
    compression."""
    import index.publish as pub

    rows = []
    for name, db in (
        ("examples (226 chunks)", work / "builder.db"),
        ("openshift-4.15 (26k chunks)", eval_path("openshift-4.15")),
    ):
        if not db.is_file():
            continue
        copy = work / f"publish-{db.name}"
        shutil.copyfile(db, copy)
        for level in (0, 1):
            url = server.create_database(f"pub_{abs(hash((name, level))) % 10**8}")
            upgrade(url)
            pub.COMPRESS_LEVEL = level
            got = pub.publish(url, copy)
            replica = work / f"replica-{level}-{db.name}"
            t0 = time.monotonic()
            with psycopg.connect(url, autocommit=True) as conn:
                pub.sync(conn, replica)
            follow = time.monotonic() - t0
            rows.append(
                [
                    name,
                    f"zlib {level}" if level else "none",
                    round(got["bytes"] / 1e6, 1),
                    round(got["stored"] / 1e6, 1),
                    round(got["seconds"], 2),
                    round(follow, 2),
                ]
            )
            replica.unlink()
    pub.COMPRESS_LEVEL = 1
    return table(
        [
            "index",
            "compression",
            "SQLite copy (MB)",
            "stored in PG (MB)",
            "publish (s)",
            "replica download + switch (s)",
        ],
        rows,
    )


def report(
    args,
    result: dict,
    stats: list,
    audit_rows: int,
    published: dict,
    startup: float,
    publishing: str,
):
    counts = result["counts"]
    once = sum(1 for v in counts.values() if v == 1)
    twice = sum(1 for v in counts.values() if v > 1)
    missing = args.events - len(counts)
    p50, p95 = ms(result["latencies"])
    total_calls = sum(c for _, c, _ in stats)
    per_answer = sum(c for q, c, _ in stats if any(k in q for k in PER_ANSWER))
    answers = sum(counts.values()) or 1
    rows = [
        ["events sent", args.events],
        ["re-sent to another replica (Slack retries)", result["resent"]],
        ["sent to the killed replica after it died, retried on another", result["redirected"]],
        ["answered exactly once", once],
        ["answered more than once", twice],
        ["never answered", missing],
        ["… acknowledged only by the killed replica, never re-sent", result["lost_with_r1"]],
        ["taken over from the killed replica by another's sweeper", result["taken_over"]],
        ["audit rows in PostgreSQL", audit_rows],
        ["event → answer p50 (ms)", round(p50, 1)],
        ["event → answer p95 (ms)", round(p95, 1)],
        [
            "… of which the answer pipeline, p50 / p95 (ms, audit timings)",
            f"{result['pipeline'][0]:.0f} / {result['pipeline'][1]:.0f}",
        ],
        ["replica CPU per answer (ms, all 3 replicas)", round(result["cpu_per_answer"] * 1000, 1)],
        ["PostgreSQL statements per answer (answer path)", round(per_answer / answers, 2)],
        [
            "PostgreSQL statements per answer (all, background included)",
            round(total_calls / answers, 2),
        ],
    ]
    top = [[" ".join(q.split())[:90].replace("|", "\\|"), c, round(t, 3)] for q, c, t in stats[:10]]
    body = (
        f"`.venv/bin/python bench/fleet.py --events {args.events} --rate {args.rate}`: 3 replicas"
        f" (`fieldguide serve --http`, offline answers, the example docs) on one PostgreSQL 15,"
        f" {args.rate:g} events/s to random replicas, {args.retries:.0%} re-sent to another"
        f" replica, replica r1 killed (SIGKILL) after event {result['killed_at']}."
        f" Machine load average {result['load'][0]:.1f} before, {result['load'][1]:.1f} after"
        f" (2 cores shared with other work: latencies include that queueing)."
        f" Replicas ready in {startup:.1f} s; the published index: {published['bytes'] / 1e6:.1f}"
        f" MB ({published['stored'] / 1e6:.1f} MB stored, zlib level 1) in"
        f" {published['seconds']:.2f} s.\n\n"
        + table(["", "value"], rows)
        + "\n\nStatements by count (pg_stat_statements, the whole run):\n\n"
        + table(["statement", "calls", "mean ms in PostgreSQL"], top)
        + "\n\nPublishing an index (`fieldguide index` with FIELDGUIDE_DATABASE_URL) and a replica"
        " following it (download, sha256 check, SQLite backup into its live file; the engine's"
        " reload comes on top):\n\n"
        + publishing
        + "\n\nRetries are sent 1-3 s after the first delivery. An event that the killed replica"
        " had acknowledged (Bolt acknowledges at once, then answers on its worker threads) and not"
        " yet answered is not retried by Slack: the claim keeps the event, and another replica's"
        " sweeper (every 2 s) takes it over once the killed replica's session is gone and answers"
        " it."
    )
    print(body)
    write_section(f"fleet-{args.rate:g}-events-per-s", body)


if __name__ == "__main__":
    main()
