"""Acknowledged Slack questions across a stop (issue 54, row 1): `fieldguide serve --http` on one
machine (the example docs' index, offline answers, the default 4 workers), 20 signed mentions sent
and acknowledged, then 0.3 s later SIGTERM (what `systemctl restart` and `docker stop` send) or
SIGKILL; then the same command started again on the same index. For each stop, the 20 threads:
answered before the process ended, answered by the next start, apologised for, never told anything,
and answered twice. Run on this tree and on REV's (default f88711b, before the fix), each from a
copy of its code with this environment.

    .venv/bin/python bench/restarts.py [REV]

Section `restarts`. About 2 minutes.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from urllib.request import urlopen

from harness import ROOT, WORK, table, write_section

sys.path.insert(0, str(ROOT))

from index.embedders import make_embedder  # noqa: E402
from index.indexer import index_folder  # noqa: E402
from tests.standins.fleet import FleetSlack, event_payload, mention  # noqa: E402
from tests.standins.pgserver import free_port  # noqa: E402
from tests.standins.slack import signed_request  # noqa: E402

REV = sys.argv[1] if len(sys.argv) > 1 else "f88711b"
QUEUED = 20
SECRET = "bench-signing-secret"
QUESTIONS = (
    "How many times is a failed webhook retried?",
    "How do I verify a webhook signature?",
    "How do I rotate an API key?",
    "What does error TW-1429 mean?",
)
TOO_LATE_PREFIX = ":warning: Sorry, I was restarted"


def code_of(rev: str) -> Path:
    """REV's tree, unpacked once under the bench's work folder."""
    root = WORK / "restarts" / f"code-{rev}"
    if not (root / "bot").is_dir():
        archive = subprocess.run(
            ["git", "archive", rev, "bot", "router", "index", "prompts"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
        root.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(root, filter="data")
    return root


class Serve:
    """`python -m bot.cli serve --http` from the code at `root`, on the index `db`."""

    def __init__(self, root: Path, db: Path, mock_url: str, log: Path):
        self.port = free_port()
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("FIELDGUIDE_", "SLACK_", "ANTHROPIC_", "VOYAGE_"))
        }
        env.update(
            PYTHONPATH=str(root),
            FIELDGUIDE_DB=str(db),
            SLACK_BOT_TOKEN="xoxb-bench",
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_BASE_URL=mock_url + "/api/",
        )
        self.log = open(log, "w")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--http", str(self.port)],
            cwd=db.parent,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, Path(log).read_text()
            try:
                with urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"serve did not start:\n{Path(log).read_text()}")

    def mention(self, text: str, ts: str, event_id: str) -> int:
        body = json.dumps(event_payload(mention(text, ts), event_id)).encode()
        url = f"http://127.0.0.1:{self.port}/slack/events"
        return signed_request(url, body, "application/json", SECRET)[0]

    def wait(self, timeout: float = 60) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def told(mock: FleetSlack, ts: str) -> list[str]:
    """What thread `ts` was finally told: each placeholder's last text, and messages posted
    straight into it that answer or apologise."""
    final: dict[str, str] = {}
    for u in mock.updates():
        if mock.thread_of.get(u["ts"]) == ts:
            final[u["ts"]] = u.get("text", "")
    straight = [
        p["text"]
        for p in mock.posts()
        if p.get("thread_ts") == ts and p["text"].startswith(TOO_LATE_PREFIX)
    ]
    return list(final.values()) + straight


def run(root: Path, stop: signal.Signals, template: Path) -> dict:
    work = WORK / "restarts" / f"{root.name}-{stop.name}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    db = work / "index.db"
    shutil.copyfile(template, db)
    mock = FleetSlack()
    try:
        first = Serve(root, db, mock.url, work / "first.log")
        base = int(time.time())
        stamps = [f"{base}.{i:06d}" for i in range(QUEUED)]
        acked = sum(
            first.mention(QUESTIONS[i % len(QUESTIONS)], ts, f"EvR{i}") == 200
            for i, ts in enumerate(stamps)
        )
        time.sleep(0.3)
        first.proc.send_signal(stop)
        first.wait()
        before = sum(bool(told(mock, ts)) for ts in stamps)
        second = Serve(root, db, mock.url, work / "second.log")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(told(mock, ts) for ts in stamps):
            time.sleep(0.2)
        time.sleep(2)  # anything said twice has time to show
        second.proc.send_signal(signal.SIGTERM)
        second.wait()
        replies = [told(mock, ts) for ts in stamps]
    finally:
        mock.close()
    late = [r for r in replies if r and all(t.startswith(TOO_LATE_PREFIX) for t in r)]
    return {
        "acknowledged": acked,
        "before": before,
        "answered": sum(1 for r in replies if r and r not in late),
        "apologised": len(late),
        "never": sum(1 for r in replies if not r),
        "twice": sum(1 for r in replies if len(r) > 1),
    }


def main() -> None:
    template = WORK / "restarts" / "examples.db"
    template.parent.mkdir(parents=True, exist_ok=True)
    index_folder(template, ROOT / "examples" / "docs", make_embedder())
    rows = []
    for label, root in ((f"before ({REV})", code_of(REV)), ("this tree", ROOT)):
        for stop in (signal.SIGTERM, signal.SIGKILL):
            r = run(root, stop, template)
            print(label, stop.name, r, flush=True)
            rows.append(
                [
                    label,
                    stop.name,
                    r["acknowledged"],
                    r["before"],
                    r["answered"],
                    r["apologised"],
                    r["never"],
                    r["twice"],
                ]
            )
    body = (
        f"`python bench/restarts.py {REV}`: `fieldguide serve --http` on the example docs'"
        f" index (offline answers, 4 workers, the default 20 s drain), {QUEUED} signed mentions"
        " acknowledged, the stop 0.3 s later, then the same command started again on the same"
        " index and given 30 s. Per stop, the 20 threads: told something before the process"
        " ended; answered in the end; apologised for (none here: the restart is quick); never"
        " told anything; told twice.\n\n"
        + table(
            [
                "code",
                "stop",
                "acknowledged",
                "told before exit",
                "answered",
                "apologised",
                "never told",
                "told twice",
            ],
            rows,
        )
    )
    write_section("restarts", body)


if __name__ == "__main__":
    main()
