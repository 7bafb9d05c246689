"""The health port under the third attack's load, before and after its fix.

    python bench/healthz.py [REV]     # REV: the "before" commit (default 2547680, main before it)

Each server runs in a process of its own (`--serve`), on the example docs' index, its Slack check
answering at once: the stdlib ThreadingHTTPServer of REV's bot/health.py, and this tree's (waitress,
a connection cap and an idle timeout). Two loads, from this process:
- 800 connections that send half a request and nothing more: the server's threads 2 s later, and
  how many of the 800 it has closed after 10 s;
- 150 threads probing /healthz back to back for 20 s (a 30 s client timeout): probes answered,
  p50 / p99 / max, and how many took over 10 s (the image's HEALTHCHECK allows 5 s).
Section `healthz`. About 2 minutes.

    python bench/healthz.py --starve [REV]     # REV default c75d3e9

300 idle sockets, then 40 sending headers a byte every 0.5 s, each with 7 probes among them: the
waitress server of REV against this tree's selector server. Section `healthz-starve`.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.request import urlopen

from harness import ROOT, eval_db, table, write_section

SERVE = "--serve" in sys.argv  # a server process: --serve old|new PORT DB REV
STARVE = "--starve" in sys.argv  # the starving loads: python bench/healthz.py --starve [REV]
ARGS = (
    sys.argv[sys.argv.index("--serve") + 1 :]
    if SERVE
    else [a for a in sys.argv[1:] if a != "--starve"]
)
REV = ARGS[3] if SERVE else (ARGS[0] if ARGS else "c75d3e9" if STARVE else "2547680")
HALF_SENT, PROBERS, PROBE_SECONDS = 800, 150, 20.0


def serve(which: str, port: int, db: str) -> None:
    """Run one health server (`old`: REV's module, `new`: this tree's) until killed."""
    from bot import health as new
    from index.embedders import make_embedder
    from router.engine import Engine

    module = new
    if which == "old":
        source = subprocess.run(
            ["git", "show", f"{REV}:bot/health.py"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode()
        spec = importlib.util.spec_from_loader("old_health", loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        exec(compile(source, "old_health.py", "exec"), module.__dict__)  # noqa: S102
    health = module.Health(Engine(db, make_embedder()))
    health.slack = lambda: (True, "bench")
    health.engine.loaded()  # the index loaded, as `serve` warms it before serving
    module.serve_health(health, port, "127.0.0.1")
    print("ready", flush=True)
    while True:
        time.sleep(60)


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


def half_sent(port: int, pid: int) -> tuple[int, int, int]:
    """(threads before, threads 2 s after 800 half-sent requests, connections closed by 10 s)."""
    before = threads_of(pid)
    held = []
    for _ in range(HALF_SENT):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        s.setblocking(False)
        held.append(s)
    time.sleep(2)
    during = threads_of(pid)
    time.sleep(8)
    closed = 0
    for s in held:
        try:
            closed += s.recv(100) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    return before, during, closed


def probes(port: int) -> list[float]:
    """Seconds each probe took (inf: failed), PROBERS threads back to back for PROBE_SECONDS."""
    took: list[float] = []
    end = time.monotonic() + PROBE_SECONDS

    def probe() -> None:
        while time.monotonic() < end:
            t = time.monotonic()
            try:
                with urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
                    r.read()
                took.append(time.monotonic() - t)
            except OSError:
                took.append(float("inf"))

    workers = [threading.Thread(target=probe) for _ in range(PROBERS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return took


def measure(which: str, db: str) -> list:
    from tests.standins.pgserver import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", which, str(port), db, REV],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        before, during, closed = half_sent(port, proc.pid)
        time.sleep(3)  # what the server still holds goes on timing out
        took = sorted(probes(port))
        ok = [t for t in took if t != float("inf")]
        pct = lambda q: ok[min(len(ok) - 1, int(q * len(ok)))] * 1000 if ok else float("nan")  # noqa: E731
        return [
            which,
            f"{during - before:,}",
            f"{closed:,} / {HALF_SENT}",
            f"{len(ok):,} / {len(took):,}",
            f"{pct(0.5):.0f}",
            f"{pct(0.99):.0f}",
            f"{max(ok) * 1000:.0f}" if ok else "-",
            sum(t > 10 for t in took),
        ]
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    from index.embedders import make_embedder

    db = str(eval_db("examples", make_embedder()))
    rows = [measure("old", db), measure("new", db)]
    for row in rows:
        print(row)
    body = (
        "`python bench/healthz.py`: the health port of "
        f"{REV} (`old`: stdlib ThreadingHTTPServer) and of this tree (`new`: waitress, 20"
        " connections, 2 s idle timeout, one report a second), each in its own process bound to"
        f" 127.0.0.1, on the examples' index. {HALF_SENT} connections send half a request and"
        " stop;"
        f" then {PROBERS} threads probe `/healthz` back to back for {PROBE_SECONDS:.0f} s (30 s"
        " client timeout), from this process.\n\n"
        + table(
            [
                "server",
                "threads added by the half-sent",
                "half-sent closed by the server within 10 s",
                "probes answered",
                "p50 ms",
                "p99 ms",
                "max ms",
                "probes over 10 s",
            ],
            rows,
        )
        + "\n\nThe new server takes 20 connections at a time: the rest wait in the kernel's listen"
        " backlog, costing it nothing, and are closed 20 per idle period as it takes them; the old"
        " one holds a thread for each and never closes them."
    )
    write_section("healthz", body)


# -- starving the probes -----------------------------------------------------------------------

IDLE, SLOW, PROBES = 300, 40, 7


def seven_probes(port: int) -> tuple[int, float]:
    """(probes answered of PROBES, the slowest in s), one every 0.5 s, each with a 5 s timeout
    (a HEALTHCHECK's)."""
    answered, slowest = 0, 0.0
    for _ in range(PROBES):
        t = time.monotonic()
        try:
            with urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                r.read()
            answered += 1
        except OSError:
            pass
        slowest = max(slowest, time.monotonic() - t)
        time.sleep(0.5)
    return answered, slowest


def starve(which: str, db: str) -> list:
    from tests.standins.pgserver import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", which, str(port), db, REV],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    row = [which]
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(IDLE)]
        answered, slowest = seven_probes(port)
        row += [f"{answered} / {PROBES}", f"{slowest:.1f}"]
        for s in idle:
            s.close()
        time.sleep(3)
        stop = threading.Event()

        def slow() -> None:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 60:
                    if stop.wait(0.5):
                        break
                    s.send(bytes([byte]))
                s.close()
            except OSError:
                pass

        senders = [threading.Thread(target=slow, daemon=True) for _ in range(SLOW)]
        for t in senders:
            t.start()
        time.sleep(1)
        answered, slowest = seven_probes(port)
        stop.set()
        row += [f"{answered} / {PROBES}", f"{slowest:.1f}"]
        return row
    finally:
        proc.kill()
        proc.wait()


def starving() -> None:
    from index.embedders import make_embedder

    db = str(eval_db("examples", make_embedder()))
    rows = [starve("old", db), starve("new", db)]
    for row in rows:
        print(row)
    body = (
        "`python bench/healthz.py --starve`: the health port of"
        f" {REV} (`old`: waitress, 20 connections, 2 s idle timeout) and of this tree (`new`:"
        " one selector thread, a 2 s deadline from accept, 256 connections, the oldest closed"
        f" for a new one), each in its own process on the examples' index. First {IDLE} sockets"
        f" connect and send nothing; then, those closed, {SLOW} send a request header a byte"
        f" every 0.5 s. During each, {PROBES} probes of `/healthz`, one every 0.5 s, each with"
        " a 5 s timeout.\n\n"
        + table(
            [
                "server",
                f"{IDLE} idle: probes answered",
                "slowest probe (s)",
                f"{SLOW} slow headers: probes answered",
                "slowest probe (s)",
            ],
            rows,
        )
    )
    write_section("healthz-starve", body)


if __name__ == "__main__":
    if SERVE:
        serve(ARGS[0], int(ARGS[1]), ARGS[2])
    else:
        starving() if STARVE else main()
