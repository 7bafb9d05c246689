"""Docs kept in a git repository: a working copy pulled before each index run, and each doc's last
change read from the history.

The `git` command line does the work (clone, fetch, hard reset, log), each call under a timeout
with its whole process group killed when it runs over. Credentials never go into a URL that git
stores or prints: a token (or the password of a URL written `https://user:token@host/…`) is handed
to git as an `http.<host>.extraHeader` through git's GIT_CONFIG_* environment, and every message
that names the repository names it without its user part (`redact`).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


class GitError(Exception):
    """A git step failed; the message is one line, fit to show, with no credentials in it."""


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with the user part of every URL (`https://user:token@host` → `https://***@host`) and
    every secret given replaced."""
    text = USERINFO.sub("***@", text)
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text


def cause(stderr: str) -> str:
    """What went wrong, from git's messages: the first one that is not a hint or a warning. Git
    says the cause first ("'/srv/docs.git' does not appear to be a git repository", "Could not
    resolve host", "couldn't find remote ref refs/heads/main"); what follows is its consequence
    ("Could not read from remote repository.") and advice ("Please make sure you have the correct
    access rights / and the repository exists.")."""
    for line in stderr.splitlines():
        line = line.strip()
        if line and not line.startswith(("hint:", "warning:")):
            return line.removeprefix("fatal: ").removeprefix("error: ")
    return ""


def is_url(source: str) -> bool:
    return "://" in source or re.match(r"[\w.-]+@[\w.-]+:", source) is not None


# the transports a docs repository may use: git's own allow-list (GIT_ALLOW_PROTOCOL) is set to
# these for every git call, so `ext::sh -c …` or a helper named in a URL never runs a command
PROTOCOLS = ("http", "https", "ssh", "git", "file")


def check_repository(source: str) -> str:
    """`source` (FIELDGUIDE_DOCS_GIT) as git will be given it: an http(s), ssh, git or file URL,
    an scp-like `user@host:path`, or a local path. GitError (one line, no credentials) for
    anything git could read as an option (`--upload-pack=…`) or a command transport (`ext::…`,
    `fd::…`): the one check `index`, `/docs-reindex` and `doctor` share."""
    text = source.strip()
    if not text:
        raise GitError("FIELDGUIDE_DOCS_GIT is empty")
    if text.startswith("-") or any(ord(c) < 32 for c in text):
        raise GitError(
            f"FIELDGUIDE_DOCS_GIT {redact(text)[:80]!r} is not a repository (it starts with '-'"
            " or holds a control character): use an https or ssh URL, or a path"
        )
    if "::" in text.split("/", 1)[0]:
        raise GitError(
            f"FIELDGUIDE_DOCS_GIT uses git's {text.split('::')[0]}:: transport:"
            " not accepted (use an https or ssh URL, or a path)"
        )
    if "://" in text:
        scheme = text.split("://", 1)[0].lower()
        host = urlsplit(text).hostname or ""
        if scheme not in PROTOCOLS or (scheme != "file" and (not host or host.startswith("-"))):
            raise GitError(
                f"FIELDGUIDE_DOCS_GIT {redact(text)[:80]!r} is not an {'/'.join(PROTOCOLS)}"
                " URL with a host"
            )
    elif (m := re.match(r"([^/:]*@)?([^/:]+):", text)) and m.group(2).startswith("-"):
        raise GitError(f"FIELDGUIDE_DOCS_GIT {redact(text)[:80]!r} names no host")
    return text


# a URL's host and port, as what follows the user part's '@' must be ("[::1]" and "host:8443" too)
HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(?::\d*)?(?=[/?#]|\Z)")


def split_credentials(url: str) -> tuple[str, str, str, str]:
    """(the URL without its user part, user, password, the user part as written) of an http(s)
    URL, user and password percent-decoded (`tok%23x` is the password `tok#x`); other URLs and
    paths are returned as they are.

    People paste passwords holding '#', '/', '?' or '@' unencoded, which a standard parser
    (urlsplit) reads as the end of the host: `http://alice:tok#SECRET/1@host/d.git` would be the
    host `alice:tok` and a fragment, the password printed in every message and stored in the
    clone's config. So the user part runs to the authority's last '@' when it has one, and else,
    when what stands before the first '/', '?' or '#' is no host (`alice:tok`) or a '?' or '#'
    follows it, to the first '@' that a host follows."""
    m = re.match(r"(?i)(https?://)(.*)\Z", url, re.S)
    if not m:
        return url, "", "", ""
    scheme, rest = m.groups()
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        at = authority.rindex("@")
    else:
        ends_early = rest[len(authority) : len(authority) + 1] in ("?", "#")
        if HOST.fullmatch(authority) and not ends_early:
            return url, "", "", ""
        at = next((i for i, c in enumerate(rest) if c == "@" and HOST.match(rest, i + 1)), -1)
        if at < 0:
            return url, "", "", ""
    userinfo = rest[:at]
    user, _, password = userinfo.partition(":")
    return scheme + rest[at + 1 :], unquote(user), unquote(password), userinfo


@dataclass
class GitSource:
    """The repository at `url` (an http(s) or ssh URL, or a local path), branch `branch` (empty:
    the repository's default branch), pulled into `checkout`; the docs are the folder `subdir` of
    it (empty: all of it)."""

    url: str
    branch: str
    checkout: Path
    subdir: str = ""
    token: str = ""
    timeout: float = 120.0
    user: str = field(default="", init=False)
    secrets: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.checkout = Path(self.checkout)
        check_repository(self.url)
        if self.branch.startswith("-") or self.subdir.startswith("-"):
            raise GitError(
                "FIELDGUIDE_DOCS_BRANCH and FIELDGUIDE_DOCS_GIT_PATH cannot start with '-'"
            )
        self.url, self.user, password, written = split_credentials(self.url)
        self.token = self.token or password
        if not is_url(self.url):  # a local path: absolute, so the working copy can fetch from it
            self.url = str(Path(self.url).expanduser().resolve())
        # the password as written and as decoded: either may turn up in what git says
        raw = written.partition(":")[2]
        self.secrets = [s for s in (self.token, password, raw) if s]

    @property
    def identity(self) -> str:
        """What the index remembers as its source: the URL (no credentials) and the branch."""
        where = f" folder {self.subdir}" if self.subdir.strip("/") else ""
        return f"{self.url} (branch {self.branch or 'default'}){where}"

    @property
    def root(self) -> Path:
        """The docs folder inside the working copy."""
        return self.checkout / self.subdir.strip("/") if self.subdir.strip("/") else self.checkout

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["GIT_TERMINAL_PROMPT"] = "0"  # never wait for a password on a terminal
        env["GIT_ALLOW_PROTOCOL"] = ":".join(PROTOCOLS)  # no ext:: or fd:: transport
        env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        if self.token and urlsplit(self.url).scheme in ("http", "https"):
            parts = urlsplit(self.url)
            basic = base64.b64encode(f"{self.user or 'x-access-token'}:{self.token}".encode())
            # added to whatever GIT_CONFIG_* the environment already holds
            n = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
            env["GIT_CONFIG_COUNT"] = str(n + 1)
            # sent to this host only, not to whatever a redirect points at
            env[f"GIT_CONFIG_KEY_{n}"] = f"http.{parts.scheme}://{parts.netloc}/.extraHeader"
            env[f"GIT_CONFIG_VALUE_{n}"] = f"Authorization: Basic {basic.decode()}"
            if basic.decode() not in self.secrets:
                self.secrets.append(basic.decode())
        return env

    def git(self, *args: str, cwd: Path | None = None) -> str:
        """Run `git args` and return its output; GitError with git's cause (`cause`), redacted,
        when it fails or runs over the timeout. Callers put `--` before any value that comes from
        a setting, so git never reads one as an option."""
        try:
            proc = subprocess.Popen(
                ["git", *args],
                cwd=cwd,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its helpers (git-remote-https, ssh) are killed with it
            )
        except OSError as e:
            raise GitError(f"cannot run git ({e.strerror}): install git") from None
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise GitError(f"git {args[0]} took over {self.timeout:.0f} s") from None
        if proc.returncode != 0:
            why = cause(err.decode(errors="replace")) or f"exit status {proc.returncode}"
            raise GitError(redact(f"git {args[0]}: {why}", self.secrets))
        return out.decode(errors="replace")

    def pull(self) -> str:
        """Bring the working copy to the branch's newest commit (a clone the first time, then a
        fetch and a hard reset, untracked files removed); returns the commit id. GitError (one
        line, no credentials) when the repository cannot be reached: the copy stays as it was."""
        ref = f"refs/heads/{self.branch}" if self.branch else "HEAD"
        if not self._usable():
            shutil.rmtree(self.checkout, ignore_errors=True)
            self.checkout.parent.mkdir(parents=True, exist_ok=True)
            self.git("init", "-q", "--", str(self.checkout))
            self.git("remote", "add", "--", "origin", self.url, cwd=self.checkout)
        self.git("fetch", "-q", "--no-tags", "--", "origin", ref, cwd=self.checkout)
        self.git("reset", "-q", "--hard", "FETCH_HEAD", cwd=self.checkout)
        self.git("clean", "-q", "-ffdx", cwd=self.checkout)
        if not self.root.is_dir():
            raise GitError(f"{self.subdir} is not a folder of {self.identity}")
        return self.git("rev-parse", "HEAD", cwd=self.checkout).strip()

    def _usable(self) -> bool:
        """The working copy exists and fetches from this URL (another one is started afresh)."""
        if not (self.checkout / ".git").is_dir():
            return False
        try:
            return self.git("remote", "get-url", "origin", cwd=self.checkout).strip() == self.url
        except GitError:
            return False


def last_changes(root: Path, paths: Iterable[str], timeout: float = 120.0) -> dict[str, str]:
    """The committer date (ISO 8601, UTC) of the last commit that changed each of `paths` (relative
    to `root`, a folder inside a git working copy), read in one `git log` pass that stops once all
    are found; paths git does not know, or no git at all, are left out."""
    return {p: utc(when) for p, when in last_commits(root, paths, "%cI", timeout).items()}


def last_commits(
    root: Path, paths: Iterable[str], fmt: str, timeout: float = 120.0
) -> dict[str, str]:
    """`git log --format=fmt` (one line, e.g. "%cI" or "%an <%ae>") of the last commit that changed
    each of `paths` (relative to `root`), read in one pass that stops once all are found."""
    wanted = set(paths)
    found: dict[str, str] = {}
    if not wanted:
        return found
    try:
        proc = subprocess.Popen(
            ["git", "log", "-z", f"--format=%x1e{fmt}", "--name-only", "--relative", "--", "."],
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:  # no git here
        return found
    assert proc.stdout is not None
    deadline = datetime.now(UTC).timestamp() + timeout
    buffer = b""
    try:
        while wanted - found.keys() and datetime.now(UTC).timestamp() < deadline:
            block = os.read(proc.stdout.fileno(), 1 << 16)
            buffer += block
            records = buffer.split(b"\x1e")
            buffer = records.pop() if block else b""  # the last one may be incomplete
            for rec in records:
                head, _, names = rec.partition(b"\0")
                if not head:
                    continue
                value = head.decode(errors="replace").strip()
                for name in names.strip(b"\n").split(b"\0"):
                    path = name.strip(b"\n").decode(errors="replace")
                    if path in wanted and path not in found:
                        found[path] = value
            if not block:
                break
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return found


def git_line(cwd: Path, *args: str, timeout: float = 30.0) -> str:
    """What `git args` prints in `cwd`, stripped; "" when it fails, runs over or there is no
    git (a read that may find nothing: no working copy, a path never committed)."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.decode(errors="replace").strip() if out.returncode == 0 else ""


def repository_top(root: Path) -> Path | None:
    """The top folder of the git working copy `root` is in; None when it is in none."""
    top = git_line(root, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


def path_changed(top: Path, path: str) -> str | None:
    """The committer date (UTC ISO 8601) of the last commit that changed `path` (a file or folder
    relative to the working copy's top `top`, read literally); None when none did."""
    when = git_line(top, "log", "-1", "--format=%cI", "--", f":(literal){path}")
    return utc(when) if when else None


def utc(iso: str) -> str:
    """An ISO 8601 time as UTC, to the second (as the index stores times)."""
    return datetime.fromisoformat(iso).astimezone(UTC).isoformat(timespec="seconds")


def file_times(root: Path, paths: Iterable[str]) -> dict[str, str]:
    """Each file's modification time (UTC ISO 8601): a doc's last change when git cannot say."""
    out = {}
    for p in paths:
        try:
            out[p] = datetime.fromtimestamp((root / p).stat().st_mtime, UTC).isoformat(
                timespec="seconds"
            )
        except OSError:
            continue
    return out


def doc_dates(root: Path, paths: Iterable[str]) -> dict[str, str]:
    """Each doc's last change: the git commit date when `root` is in a git working copy and the
    file is committed, else the file's time."""
    paths = list(paths)
    found = last_changes(root, paths)
    return found | file_times(root, [p for p in paths if p not in found])
