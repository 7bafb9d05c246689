"""A throwaway PostgreSQL server for the tests and bench/fleet.py: initdb into a temp folder, run on
a random port on 127.0.0.1, trust authentication, removed on stop. The server binaries come from
the Debian `postgresql` package (`make setup` installs it when it can); as root they run as the
`postgres` user, since initdb and postgres refuse to run as root."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class PgUnavailable(Exception):
    """No PostgreSQL server binaries here, or the server does not start."""


def bindir() -> Path:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise PgUnavailable("PostgreSQL server binaries not found (apt-get install postgresql)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, options: dict[str, str] | None = None):
        self.bin = bindir()
        self.port = free_port()
        self.options = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": "",
            "fsync": "off",  # a test server: durability is not what is tested
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            **(options or {}),
        }
        self.root = Path(tempfile.mkdtemp(prefix="fieldguide-pg-"))
        self.data = self.root / "data"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]
        )
        self.start()

    def _run(self, cmd: list[str]) -> None:
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise PgUnavailable(f"{' '.join(cmd[:4])}… failed: {done.stderr.strip()[-500:]}")

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        opts = " ".join(
            f"-c {k}={v!r}" if v == "" else f"-c {k}={v}" for k, v in self.options.items()
        )
        self._run(
            [
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.root / "log"),
                "-o",
                f"-p {self.port} {opts}",
                "-w",
                "start",
            ]
        )

    def stop(self, mode: str = "fast") -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise PgUnavailable("PostgreSQL did not come up")

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def close(self) -> None:
        with contextlib.suppress(PgUnavailable):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
