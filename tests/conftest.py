import os
import shutil
import uuid
from pathlib import Path

# the tests' own onnxruntime writes no usage record outside the project either (bot/cli.py's main
# sets this for the command; here it is set before anything below imports onnxruntime)
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import numpy as np
import pytest

from bot.app import FieldGuide
from bot.settings import Settings
from index.embedders import make_embedder
from index.search import Searcher
from tests.standins.server import StubServer
from tests.standins.slack import SlackMock
from tests.standins.slack_harness import Harness

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "docs"
# shared/eval beside the checkout (CI's clone), or beside a folder holding it (a worktree), as the
# benchmarks find it (bench/harness.py)
SHARED_EVAL = next(
    (p / "shared" / "eval" for p in ROOT.parents if (p / "shared" / "eval").is_dir()),
    ROOT.parent / "shared" / "eval",
)
# a skip whose reason names a path outside the repository fails instead (tests/skip_reasons.py)
pytest_plugins = ["tests.skip_reasons"]


@pytest.fixture(scope="session")
def local_embedder():
    """The default offline embedder (int8 ONNX all-MiniLM-L6-v2)."""
    return make_embedder()


@pytest.fixture(scope="session")
def examples_template(tmp_path_factory, local_embedder) -> Path:
    """examples/docs indexed once for the session with the local model; tests get copies of it."""
    from index.indexer import index_folder

    db = tmp_path_factory.mktemp("examples") / "template.db"
    index_folder(db, EXAMPLES, local_embedder)
    return db


@pytest.fixture
def examples_db(examples_template, tmp_path) -> str:
    """A private copy of the indexed example docs: a test may write to it (answers, feedback, a
    reindex) without another test seeing it."""
    db = tmp_path / "examples.db"
    shutil.copyfile(examples_template, db)
    return str(db)


@pytest.fixture
def stub():
    server = StubServer()
    yield server
    server.close()


def write_docs(root: Path, files: dict[str, str | bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def clean_settings(monkeypatch, tmp_path_factory):
    """Tests never see a developer's keys or .env: every setting starts at its default."""
    from bot.settings import describe

    for env, _, _ in describe():
        monkeypatch.delenv(env, raising=False)
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


def record(i, intent, doc=None, path=None, text=""):
    """A chunk record for a Searcher built in memory."""
    return {
        "id": f"c{i}",
        "doc": doc or f"d{i}.md",
        "heading_path": path or [f"S{i}"],
        "text": text,
        "search_text": text,
        "start": 0,
        "end": len(text),
        "title": "T",
        "intent": intent,
        "url": None,
    }


def small_searcher():
    """Five one-line chunks in three intents, each with its own unit vector."""
    texts = [
        ("auth", "rotate api key secret"),
        ("auth", "login with sso"),
        ("billing", "invoice refund plan"),
        ("billing", "plan price upgrade"),
        ("api", "pagination cursor limit"),
    ]
    recs = [record(i, intent, text=t) for i, (intent, t) in enumerate(texts)]
    vecs = np.eye(5, 8, dtype=np.float32)
    return Searcher(recs, vecs), vecs


@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL server for the session (tests/standins/pgserver.py). Without the
    server binaries the PostgreSQL tests are skipped with the reason, except where
    FIELDGUIDE_REQUIRE_POSTGRES=1 (CI): there they fail."""
    from tests.standins.pgserver import PgServer, PgUnavailable

    try:
        server = PgServer()
    except PgUnavailable as e:
        if os.environ.get("FIELDGUIDE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required here (FIELDGUIDE_REQUIRE_POSTGRES=1): {e}")
        pytest.skip(f"no PostgreSQL to test against: {e}")
    yield server
    server.close()


@pytest.fixture
def pg_url(pg_server) -> str:
    """A fresh database on the session's server, its schema upgraded."""
    from bot.state.postgres.schema import upgrade

    url = pg_server.create_database("t_" + uuid.uuid4().hex[:12])
    upgrade(url)
    return url


@pytest.fixture
def make_harness(examples_db, local_embedder):
    """A Bolt app over signed HTTP (or Socket Mode) on the examples index, against a SlackMock:
    `make(transport, anthropic_client, db, channels, **settings)`."""
    made = []
    docs = EXAMPLES  # the source examples_db was built from (/docs-reindex never swaps)

    def make(transport="http", anthropic_client=None, db=None, channels=None, **overrides):
        db = db or examples_db
        mock = SlackMock()
        mock.channels = channels or {}
        if anthropic_client is not None:  # model ids the Messages API stand-in knows
            overrides = {
                "classify_model": "claude-haiku-4-5",
                "condense_model": "claude-haiku-4-5",
                "check_model": "claude-haiku-4-5",
                "answer_model": "claude-sonnet-4-6",
            } | overrides
        settings = Settings(
            db=db,
            docs=str(docs),
            slack_signing_secret="test-signing-secret",
            admins="UADMIN",
            **overrides,
        )
        guide = FieldGuide(settings, embedder=local_embedder, anthropic=anthropic_client)
        h = Harness(transport, guide, mock)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()
        h.mock.close()
