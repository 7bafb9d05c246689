"""Docs that stay fresh by themselves: a git docs source (a real bare repository made here), the
scheduled refresh, each doc's last change shown with its source, credentials kept out of every
message, and an index that refuses to swap its docs for another source's."""

import json
import logging
import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app import FieldGuide
from bot.cli import main
from bot.indexing import checkout_folder
from bot.settings import Settings
from bot.slack.reindex import Refresher, Reindexer, Reporter
from bot.state import State
from bot.state.memory import InProcess
from index.indexer import index_folder
from index.store import open_db
from router.citations import updated_ago
from tests.conftest import write_docs
from tests.standins.githttp import GitHttpServer
from tests.test_teams import ALPHA_KEYS

LOGIN = "---\nintent: authentication\n---\n# Login\n\nUse tide login to sign in.\n"
LIMITS = "---\nintent: api\n---\n# Rate limits\n\nTeam plans get 100 requests a second.\n"
PELICAN = (
    "---\nintent: operations\n---\n# Pelican drills\n\n"
    "The pelican drill rotates every ferry token on Thursdays at 06:00 UTC.\n"
)


def git(*args: str, cwd: Path | None = None, date: str | None = None) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com")
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    out = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return out.stdout.decode()


class Repo:
    """A bare repository (what FIELDGUIDE_DOCS_GIT points at) and a clone to commit docs from."""

    def __init__(self, tmp: Path):
        self.bare, self.work = tmp / "docs.git", tmp / "author"
        git("init", "-q", "--bare", "-b", "main", str(self.bare))
        git("clone", "-q", str(self.bare), str(self.work))
        git("checkout", "-q", "-b", "main", cwd=self.work)

    def commit(self, files: dict[str, str | bytes], date: datetime | None = None) -> None:
        write_docs(self.work, files)
        git("add", "-A", cwd=self.work)
        when = (date or datetime.now(UTC)).isoformat(timespec="seconds")
        git("commit", "-q", "-m", "docs", cwd=self.work, date=when)
        git("push", "-q", "origin", "main", cwd=self.work)


@pytest.fixture
def repo(tmp_path) -> Repo:
    r = Repo(tmp_path)
    r.commit({"auth/login.md": LOGIN, "api/limits.md": LIMITS})
    return r


def lock_only() -> State:
    """The state a Reindexer uses: only its reindex lock (the process's own, as on one machine)."""
    return InProcess()  # type: ignore[return-value]


def docs_reindex(settings: Settings) -> str:
    """What /docs-reindex tells the admin at the end (refused before anything is embedded)."""
    posts: list[str] = []

    def post(text: str) -> bool:
        posts.append(text)
        return True

    Reindexer(settings, None, lock_only()).run(Reporter(post, post))  # type: ignore[arg-type]
    return posts[-1]


def doc_rows(db) -> dict:
    conn = open_db(db, create=False)
    try:
        return dict(conn.execute("SELECT path, updated FROM docs").fetchall())
    finally:
        conn.conn.close()


def test_a_git_source_is_pulled_before_each_run_and_dates_come_from_its_commits(
    repo, tmp_path, monkeypatch, capsys
):
    db = str(tmp_path / "index.db")
    monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", str(repo.bare))
    monkeypatch.setenv("FIELDGUIDE_DOCS_BRANCH", "main")
    assert main(["index", "--db", db, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"Indexed {repo.bare} (branch main) into {db}" in out and "added 2" in out
    assert main(["index", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == f"{repo.bare} (branch main)"
    assert (checkout_folder(db) / "auth" / "login.md").is_file()  # beside the index

    three_days_ago = datetime.now(UTC) - timedelta(days=3, hours=1)
    repo.commit({"ops/pelican.md": PELICAN}, date=three_days_ago)
    assert main(["index", "--db", db, "--quiet"]) == 0
    assert "added 1 · changed 0 · removed 0 · unchanged 2" in capsys.readouterr().out
    dates = doc_rows(db)
    assert dates["ops/pelican.md"] == three_days_ago.isoformat(timespec="seconds")
    assert all(dates.values())

    question = "When does the pelican drill rotate ferry tokens?"
    assert main(["ask", question, "--db", db]) == 0
    answer = capsys.readouterr().out
    assert "Pelican drills" in answer and "(updated 3 days ago)" in answer
    assert main(["ask", question, "--db", db, "--json"]) == 0
    [source] = [s for s in json.loads(capsys.readouterr().out)["sources"]]
    assert source["doc"] == "ops/pelican.md"
    assert source["updated"] == three_days_ago.isoformat(timespec="seconds")

    # a doc removed upstream leaves the index on the next pull
    git("rm", "-q", "api/limits.md", cwd=repo.work)
    git("commit", "-q", "-m", "rm", cwd=repo.work, date=datetime.now(UTC).isoformat())
    git("push", "-q", "origin", "main", cwd=repo.work)
    assert main(["index", "--db", db, "--quiet"]) == 0
    assert "removed 1" in capsys.readouterr().out
    assert "api/limits.md" not in doc_rows(db)


def test_the_scheduled_refresh_answers_a_new_commit_within_one_period(
    repo, tmp_path, local_embedder, caplog
):
    db = str(tmp_path / "index.db")
    settings = Settings(db=db, docs_git=str(repo.bare), refresh_every="1s")
    reindexer = Reindexer(settings, local_embedder, lock_only())
    assert reindexer.refresh() is not None  # the first pull and index
    pipeline = FieldGuide(settings).pipeline
    question = "When does the pelican drill rotate ferry tokens?"
    assert pipeline.answer(question).decision == "ABSTAIN"  # the docs don't say it yet

    refresher = Refresher(reindexer, settings.refresh_seconds, pipeline.engine.loaded)
    caplog.set_level(logging.INFO, logger="bot.slack.reindex")
    refresher.start()
    try:
        repo.commit({"ops/pelican.md": PELICAN})
        runs_at_commit = refresher.runs
        deadline = time.monotonic() + 60
        while "ops/pelican.md" not in doc_rows(db) and time.monotonic() < deadline:
            time.sleep(0.1)
        while refresher.runs == runs_at_commit and time.monotonic() < deadline:
            time.sleep(0.05)  # the run that found it has finished (and loaded the index)
    finally:
        refresher.stop()
    # picked up by the first refresh that started after the commit (or the one running then)
    assert "ops/pelican.md" in doc_rows(db)
    assert refresher.runs - runs_at_commit <= 2
    ans = pipeline.answer(question)
    assert any(s.doc == "ops/pelican.md" for s in ans.sources) and "Thursdays" in ans.text
    assert "docs refresh: added 1, changed 0, removed 0" in caplog.text


def test_an_unreachable_repository_keeps_the_index_and_says_so_once(
    repo, tmp_path, local_embedder, caplog
):
    db = str(tmp_path / "index.db")
    settings = Settings(db=db, docs_git=str(repo.bare), git_timeout=20)
    reindexer = Reindexer(settings, local_embedder, lock_only())
    assert reindexer.refresh() is not None
    before = doc_rows(db)
    repo.bare.rename(tmp_path / "moved.git")
    caplog.set_level(logging.INFO, logger="bot.slack.reindex")
    assert reindexer.refresh() is None and reindexer.refresh() is None  # said once, not twice
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.startswith(f"docs refresh failed: could not pull {repo.bare} (branch default)")
    assert line.endswith("the index is unchanged") and "\n" not in line
    assert doc_rows(db) == before
    assert FieldGuide(settings).pipeline.answer("How do I sign in?").sources  # still answering
    (tmp_path / "moved.git").rename(repo.bare)
    assert reindexer.refresh() is not None and "docs refresh works again" in caplog.text


def test_a_git_source_that_is_not_there_is_named_with_what_is_wrong(
    repo, tmp_path, monkeypatch, capsys
):
    """git's cause, not the advice it prints last ("and the repository exists.")."""
    db = str(tmp_path / "index.db")
    missing = tmp_path / "no-such-repo.git"
    cases = [
        (Settings(db=db, docs_git=str(missing)), f"'{missing}' does not appear to be a git"),
        (
            Settings(db=db, docs_git=str(repo.bare), docs_branch="nosuch"),
            "couldn't find remote ref refs/heads/nosuch",
        ),
    ]
    for settings, said in cases:
        reindexer = Reindexer(settings, None, lock_only())  # type: ignore[arg-type]
        assert reindexer.refresh() is None
        err = reindexer.failing
        assert said in err and "repository exists" not in err, err
    # the command line says it the same way, in one line
    monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", str(missing))
    assert main(["index", "--db", db, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fieldguide: could not pull {missing} (branch default) (git fetch: '")
    assert "does not appear to be a git repository); the index is unchanged" in err
    assert err.count("\n") == 1


def test_credentials_never_appear_in_messages_logs_or_files(tmp_path, monkeypatch, capsys, caplog):
    db = tmp_path / "index.db"
    # nothing listens on port 9: the fetch fails fast
    monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", "https://alice:pa55-in-url@127.0.0.1:9/docs.git")
    monkeypatch.setenv("FIELDGUIDE_DOCS_GIT_TOKEN", "tok-very-secret")
    monkeypatch.setenv("FIELDGUIDE_GIT_TIMEOUT", "20")
    caplog.set_level(logging.DEBUG)
    assert main(["index", "--db", str(db), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "fieldguide: could not pull https://127.0.0.1:9/docs.git (branch default) (git fetch:"
    )
    assert err.rstrip().endswith("the index is unchanged") and err.count("\n") == 1
    assert main(["doctor", "--db", str(db)]) == 1
    doctor = capsys.readouterr().out
    assert "cannot reach https://127.0.0.1:9/docs.git" in doctor
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for secret in ("pa55-in-url", "tok-very-secret", "alice"):
        assert secret not in err + doctor + caplog.text
        assert secret.encode() not in stored  # not in the checkout's .git/config, nor the index


def test_another_source_is_refused_unless_replace(tmp_path, capsys):
    first = write_docs(tmp_path / "team-docs", {"auth/login.md": LOGIN, "api/limits.md": LIMITS})
    other = write_docs(tmp_path / "examples", {"ops/pelican.md": PELICAN})
    db = str(tmp_path / "index.db")
    assert main(["index", str(first), "--db", db, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["index", str(other), "--db", db, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"built from {first}" in err and f"indexing {other}" in err and "--replace" in err
    assert set(doc_rows(db)) == {"auth/login.md", "api/limits.md"}  # untouched

    # /docs-reindex never swaps, whatever FIELDGUIDE_DOCS now says
    said = docs_reindex(Settings(db=db, docs=str(other)))
    assert "never swaps" in said and str(first) in said and str(other) in said
    assert set(doc_rows(db)) == {"auth/login.md", "api/limits.md"}

    assert main(["index", str(other), "--db", db, "--quiet", "--replace"]) == 0
    assert "removed 2" in capsys.readouterr().out
    assert set(doc_rows(db)) == {"ops/pelican.md"}
    assert main(["index", str(other), "--db", db, "--quiet"]) == 0  # now its own source


def test_no_docs_setting_no_default_folder(tmp_path, capsys):
    db = str(tmp_path / "index.db")
    assert Settings.load(environ={}, dotenv=None).docs == ""
    assert main(["index", "--db", db]) == 2
    err = capsys.readouterr().err
    assert "set FIELDGUIDE_DOCS (a folder) or FIELDGUIDE_DOCS_GIT" in err
    assert not Path(db).exists()
    assert "no docs to index: set FIELDGUIDE_DOCS" in docs_reindex(Settings(db=db))
    both = Settings(db=db, docs=str(tmp_path), docs_git=str(tmp_path / "docs.git"))
    assert "FIELDGUIDE_DOCS and FIELDGUIDE_DOCS_GIT are both set" in docs_reindex(both)


def test_a_folder_doc_is_dated_by_its_file_time_and_an_old_index_gains_dates(
    tmp_path, local_embedder
):
    docs = write_docs(tmp_path / "docs", {"auth/login.md": LOGIN, "api/limits.md": LIMITS})
    old = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    os.utime(docs / "auth" / "login.md", (old.timestamp(), old.timestamp()))
    db = tmp_path / "index.db"
    index_folder(db, docs, local_embedder)
    assert doc_rows(db)["auth/login.md"] == "2026-01-02T03:04:05+00:00"
    # an index written before the column existed: it comes back, filled on the next run
    conn = open_db(db)
    conn.execute("ALTER TABLE docs DROP COLUMN updated")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm003_doc_updated'")  # nor its record
    conn.conn.commit()
    conn.conn.close()
    summary = index_folder(db, docs, local_embedder)
    assert summary.unchanged == ["api/limits.md", "auth/login.md"] and summary.embedded == 0
    assert doc_rows(db)["auth/login.md"] == "2026-01-02T03:04:05+00:00"


def test_updated_ago_reads_as_people_say_it():
    now = datetime(2026, 11, 24, 12, tzinfo=UTC)
    said = [
        updated_ago((now - delta).isoformat(), now)
        for delta in (
            timedelta(hours=3),
            timedelta(days=1, hours=2),
            timedelta(days=3),
            timedelta(days=95),
            timedelta(days=800),
        )
    ]
    assert said == [
        "updated today",
        "updated yesterday",
        "updated 3 days ago",
        "updated 3 months ago",
        "updated 2 years ago",
    ]
    assert updated_ago("") == "" and updated_ago("not a date") == ""


def test_an_https_token_goes_as_a_header_and_nowhere_else(
    repo, tmp_path, monkeypatch, capsys, caplog
):
    server = GitHttpServer(repo.bare.parent, token="tok-very-secret", user="alice")
    try:
        db = str(tmp_path / "index.db")
        url = f"{server.url}/docs.git"
        monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", url)
        caplog.set_level(logging.DEBUG)
        assert main(["index", "--db", db, "--quiet"]) == 2  # no token: refused, said in one line
        assert "could not pull" in capsys.readouterr().err and not Path(db).exists()

        # the username in the URL, the token from the environment
        with_user = server.url.replace("//", "//alice@")
        monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", f"{with_user}/docs.git")
        monkeypatch.setenv("FIELDGUIDE_DOCS_GIT_TOKEN", "tok-very-secret")
        assert main(["index", "--db", db, "--quiet"]) == 0
        out = capsys.readouterr().out
        assert f"Indexed {url} (branch default)" in out and "added 2" in out
        repo.commit({"ops/pelican.md": PELICAN})
        # a password written in the URL works too, and is kept out of everything as well
        monkeypatch.delenv("FIELDGUIDE_DOCS_GIT_TOKEN")
        with_password = server.url.replace("//", "//alice:tok-very-secret@")
        monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", f"{with_password}/docs.git")
        assert main(["index", "--db", db, "--quiet"]) == 0
        assert "added 1" in capsys.readouterr().out
        assert {r["user"] for r in server.requests} == {None, "alice"}
        assert not any("tok-very-secret" in r["path"] for r in server.requests)
        stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
        assert b"tok-very-secret" not in stored and b"alice" not in stored
        assert "tok-very-secret" not in caplog.text
    finally:
        server.close()


def test_in_a_fleet_only_the_lock_holder_refreshes_and_publishes_changes_only(
    pg_url, repo, tmp_path, local_embedder
):
    from bot.state.postgres import PostgresState
    from bot.state.postgres.schema import upgrade
    from index.pg import connect
    from index.publish import newest

    def published() -> int | None:
        with connect(pg_url) as conn:
            top = newest(conn)
        return top[0] if top else None

    upgrade(pg_url)
    states = [PostgresState(pg_url), PostgresState(pg_url)]
    one, two = (
        Reindexer(
            Settings(db=str(tmp_path / f"{name}.db"), docs_git=str(repo.bare), database_url=pg_url),
            local_embedder,
            state,
        )
        for name, state in zip(("one", "two"), states, strict=True)
    )
    try:
        with states[0].reindex_lock() as mine:  # replica one is reindexing
            assert mine and two.refresh() is None
        assert published() is None
        assert two.refresh() is not None and published() == 1
        # replica one takes the published index first: nothing changed, nothing published
        s = one.refresh()
        assert s is not None and not (s.added or s.changed) and published() == 1
        repo.commit({"ops/pelican.md": PELICAN})
        s = one.refresh()
        assert s is not None and s.added == ["ops/pelican.md"] and published() == 2
    finally:
        for state in states:
            state.close()


def test_the_ci_example_publishes_a_merge_to_the_fleet(pg_url, repo, tmp_path, monkeypatch):
    """examples/ci/publish-docs.yml's own steps, run with its environment: the GitHub expressions
    replaced by this machine's repository and database."""
    import shlex

    import yaml

    from bot.indexing import sync_published
    from index.publish import local_generation
    from tests.conftest import ROOT

    workflow = yaml.safe_load((ROOT / "examples" / "ci" / "publish-docs.yml").read_text())
    job = workflow["jobs"]["publish"]
    here = {
        "${{ secrets.FIELDGUIDE_DATABASE_URL }}": pg_url,
        "${{ secrets.VOYAGE_API_KEY }}": "",
        "${{ github.server_url }}/${{ github.repository }}.git": str(repo.bare),
        "${{ secrets.GITHUB_TOKEN }}": "",
    }
    monkeypatch.chdir(tmp_path)
    for name, value in job["env"].items():
        if name != "FIELDGUIDE_MODEL_DIR":  # this machine's exported model
            monkeypatch.setenv(name, here.get(value, value))
    repo.commit({"docs/ops/pelican.md": PELICAN, "README.md": "# Not a doc of the bot\n"})
    steps = {s.get("name"): s for s in job["steps"]}
    for name in ("Migrate the fleet's schema (idempotent)", "Index and publish"):
        argv = shlex.split(steps[name]["run"])
        assert argv[0] == "fieldguide" and main(argv[1:]) == 0, name
    replica = tmp_path / "replica.db"
    generation = sync_published(Settings.load(dotenv=None).at(replica))
    assert generation == local_generation(replica) == 1
    assert set(doc_rows(replica)) == {"ops/pelican.md"}  # FIELDGUIDE_DOCS_GIT_PATH: docs/ only
    assert all(doc_rows(replica).values())  # dated by their commits
    # the next merge: only what changed is indexed, and published as the next generation
    repo.commit({"docs/ops/heron.md": PELICAN.replace("pelican", "heron")})
    assert main(["index", "--quiet"]) == 0
    assert sync_published(Settings.load(dotenv=None).at(replica)) == 2
    assert set(doc_rows(replica)) == {"ops/pelican.md", "ops/heron.md"}


def test_slack_sources_say_when_each_doc_last_changed():
    from bot.slack.slack_format import plain_pieces, sources_markdown
    from router.answer import Answer, Source

    when = (datetime.now(UTC) - timedelta(days=3, hours=2)).isoformat(timespec="seconds")
    sources = [
        Source(
            1,
            "c1",
            "ops/pelican.md",
            "Pelican drills",
            ["Pelican drills"],
            "https://x.example/p",
            when,
        ),
        Source(2, "c2", "auth/login.md", "Login", ["Login"], "auth/login.md"),  # date unknown
    ]
    markdown = sources_markdown(sources)
    assert "- [1] [Pelican drills](https://x.example/p) · _updated 3 days ago_" in markdown
    assert "- [2] Login\n" in markdown + "\n"
    answer = Answer("q", "q", "ANSWER", "The drill runs on Thursdays [1].", sources=sources)
    assert "[1] Pelican drills https://x.example/p (updated 3 days ago)" in plain_pieces(answer)[0]


def test_the_refresh_period_is_a_duration():
    from bot.settings import SettingsError

    assert (
        Settings.load(environ={"FIELDGUIDE_REFRESH_EVERY": "15m"}, dotenv=None).refresh_seconds
        == 900
    )
    assert Settings(refresh_every="1h").refresh_seconds == 3600 and Settings().refresh_seconds == 0
    for bad in ("soon", "15", "0.5s", "-1m"):
        with pytest.raises(SettingsError, match="FIELDGUIDE_REFRESH_EVERY"):
            Settings(refresh_every=bad)


def test_a_commit_is_answered_in_slack_after_the_next_refresh(repo, tmp_path, local_embedder):
    """The real Bolt app over signed HTTP, its schedule on (FIELDGUIDE_REFRESH_EVERY=1s)."""
    from bot.app import FieldGuide
    from tests.standins.slack import SlackMock
    from tests.standins.slack_harness import Harness, answer_in, mention, wait

    db = str(tmp_path / "index.db")
    settings = Settings(
        db=db,
        docs_git=str(repo.bare),
        refresh_every="1s",
        slack_signing_secret="test-signing-secret",
    )
    assert Reindexer(settings, local_embedder, lock_only()).refresh() is not None
    mock = SlackMock()
    harness = Harness("http", FieldGuide(settings, embedder=local_embedder), mock)
    try:
        refresher = harness.bot.refresher
        assert refresher is not None
        repo.commit({"ops/pelican.md": PELICAN}, date=datetime.now(UTC) - timedelta(days=2))
        runs = refresher.runs
        wait(lambda: refresher.runs >= runs + 2, timeout=60)  # a whole run began after the commit
        acked, _ = harness.event(mention("When does the pelican drill rotate ferry tokens?"), "Ev1")
        assert acked
        [answer] = answer_in(mock, "C1")
        text = json.dumps(answer)  # the words, and the sources the stream ends with
        assert "Thursdays" in text and "Pelican drills" in text and "updated 2 days ago" in text
    finally:
        harness.close()
        mock.close()


def test_docs_reindex_pulls_first(repo, tmp_path, local_embedder):
    db = str(tmp_path / "index.db")
    settings = Settings(db=db, docs_git=str(repo.bare), docs_branch="main")
    Reindexer(settings, local_embedder, lock_only()).refresh()
    repo.commit({"ops/pelican.md": PELICAN})
    posts: list[str] = []

    def post(text: str) -> bool:
        posts.append(text)
        return True

    Reindexer(settings, local_embedder, lock_only()).run(Reporter(post, post))
    assert posts[0].startswith(f"Reindexing `{repo.bare} (branch main)`")
    assert "added 1, changed 0, removed 0, unchanged 2" in posts[-1]


@pytest.mark.parametrize(
    "value",
    [
        "--upload-pack=touch PWNED;://x",
        "-c core.sshCommand=touch PWNED",
        "ext::sh -c touch% PWNED",
        "ssh://-oProxyCommand=touch PWNED/x",
    ],
)
def test_no_docs_repository_setting_runs_a_command(value, repo, tmp_path, monkeypatch, capsys):
    """Where an operator often stands, a checkout with a reachable remote: `doctor` and `index`
    refuse the value with one line, and git never reads it as an option or a transport."""
    here = tmp_path / "checkout"
    git("clone", "-q", str(repo.bare), str(here))
    monkeypatch.chdir(here)
    monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", value)
    db = str(tmp_path / "index.db")
    main(["doctor", "--db", db])
    out = capsys.readouterr().out
    docs = next(line for line in out.splitlines() if line.split()[1:2] == ["docs"])
    assert docs.startswith("FAIL") and "FIELDGUIDE_DOCS_GIT" in docs, docs
    assert main(["index", "--db", db, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "FIELDGUIDE_DOCS_GIT" in err and err.count("\n") == 1, err
    assert not list(tmp_path.rglob("PWNED")) and not (here / "PWNED").exists()


# -- 3. credentials in a git URL, reserved characters and all ------------------------------------


def test_credentials_with_reserved_characters_are_split_off_and_decoded():
    from index.gitsource import split_credentials

    assert split_credentials("http://alice:tok#SECRET/123@host/docs.git")[:3] == (
        "http://host/docs.git",
        "alice",
        "tok#SECRET/123",
    )
    assert split_credentials("https://alice:tok%23SECRET@host:8443/d.git")[:3] == (
        "https://host:8443/d.git",
        "alice",
        "tok#SECRET",
    )
    # the user part ends at the authority's last '@'
    found = split_credentials("https://bob:p@ss@host/d.git")[:3]
    assert found == ("https://host/d.git", "bob", "p@ss")
    # an '@' in the path, with no user part, is no credential
    assert split_credentials("https://host/team@corp/docs.git")[:3] == (
        "https://host/team@corp/docs.git",
        "",
        "",
    )


@pytest.mark.parametrize("written", ["tok#SECRET/123", "tok%23SECRET%2F123"])
def test_a_password_with_reserved_characters_authenticates_and_is_never_shown(
    written, tmp_path, monkeypatch, capsys, caplog
):
    import logging

    from bot.cli import main
    from tests.standins.githttp import GitHttpServer
    from tests.test_freshness import Repo, docs_reindex

    repo = Repo(tmp_path)
    repo.commit({"auth/login.md": ALPHA_KEYS})
    server = GitHttpServer(repo.bare.parent, token="tok#SECRET/123", user="alice")
    caplog.set_level(logging.DEBUG)
    try:
        db = str(tmp_path / "index.db")
        host = server.url.removeprefix("http://")
        monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", f"http://alice:{written}@{host}/docs.git")
        assert main(["index", "--db", db, "--quiet"]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert f"Indexed {server.url}/docs.git (branch default)" in out
        assert {r["user"] for r in server.requests} == {"alice"}  # every request authenticated
        # unreachable now: the index error, doctor and /docs-reindex's reply say so without it
        unreachable = f"http://alice:{written}@127.0.0.1:9/docs.git"
        monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", unreachable)
        assert main(["index", "--db", db, "--quiet", "--replace"]) == 2
        assert main(["doctor", "--db", db]) == 1
        from bot.settings import Settings

        said = docs_reindex(Settings(db=db, docs_git=unreachable, git_timeout=20))
        shown = capsys.readouterr()
        text = shown.out + shown.err + said + caplog.text
        assert "could not pull http://127.0.0.1:9/docs.git" in text
        stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
        for secret in ("SECRET", "tok#", "tok%23", "alice:"):
            assert secret not in text
        assert b"SECRET" not in stored and b"alice" not in stored
    finally:
        server.close()


# -- 10. a failing pull is shown as failing, and since when --------------------------------------


def test_failing_pulls_show_in_status_and_app_home_with_since_when(tmp_path, local_embedder):
    from bot.app import FieldGuide
    from bot.settings import Settings
    from bot.slack.home import home_view
    from bot.slack.reindex import Reindexer
    from index.store import open_db

    repo = Repo(tmp_path)
    repo.commit({"alpha/keys.md": ALPHA_KEYS})
    db = str(tmp_path / "index.db")
    settings = Settings(db=db, docs_git=str(repo.bare), git_timeout=20)
    reindexer = Reindexer(settings, local_embedder, lock_only())
    assert reindexer.refresh() is not None
    assert "(ok)" in reindexer.status()
    repo.bare.rename(tmp_path / "moved.git")  # the repository is gone
    assert reindexer.refresh() is None
    with open_db(db).conn as conn:
        (since,) = conn.execute("SELECT max(started) FROM runs").fetchone()
    assert reindexer.refresh() is None and reindexer.refresh() is None
    status = reindexer.status()
    assert "(ok)" not in status and f"failing since {since}" in status
    assert "could not pull" in status and "last good run" in status
    guide = FieldGuide(Settings(db=db), embedder=local_embedder)
    home = json.dumps(home_view("UADMIN", True, guide))
    assert "*ok*" not in home and "*failing*" in home and f"since {since}" in home
    assert "could not pull" in home
    with open_db(db).conn as conn:  # one row for the whole streak, not one per try
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    (tmp_path / "moved.git").rename(repo.bare)
    assert reindexer.refresh() is not None
    assert "(ok)" in reindexer.status() and "failing" not in reindexer.status()
