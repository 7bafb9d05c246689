"""`fieldguide doctor`: is this installation ready to answer? Each check is one line with "ok" (or
"warn", "skip") or what is wrong; a check that fails makes the command exit non-zero.

Checks only read: the index is opened read-only and the services get one cheap call each with a
short timeout (Claude: list one model; Voyage: embed one word; Slack: auth.test).
"""

from __future__ import annotations

import sqlite3
import stat
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from index.links import claimed, shared_warnings
from index.loader import MAX_DOC_BYTES
from index.schema import INDEX_MIGRATIONS, IndexMissing, newer_message, unknown_migrations
from index.store import doc_records, examine, open_read_only, writable

from .settings import Settings, SettingsError

TIMEOUT = 5.0  # seconds for each service call


@dataclass
class Check:
    name: str
    status: str  # ok | warn | skip | FAIL
    detail: str


def settings_problems(error: SettingsError) -> tuple[list[Check], Settings | None]:
    """A failed check for each bad setting, and the settings with those at their defaults, so
    every other check still runs (None when even that cannot be read, e.g. .env is not UTF-8)."""
    checks = [Check("settings", "FAIL", p) for p in error.problems]
    if not error.bad:
        return checks, None
    given = {k: v for k, v in Settings.sources().items() if k not in error.bad}
    try:
        rest = Settings.load(environ=given, dotenv=None)
    except SettingsError:
        return checks, None
    names = ", ".join(error.bad)
    checks.append(Check("settings", "warn", f"the checks below ran with the default {names}"))
    return checks, rest


def check_settings(settings: Settings, dotenv: Path) -> Check:
    if not dotenv.is_file():
        return Check("settings", "ok", "valid (environment only: no .env here)")
    if stat.S_IMODE(dotenv.stat().st_mode) & 0o077:
        return Check("settings", "warn", f"valid, but {dotenv} is readable by others: chmod 600")
    return Check("settings", "ok", f"valid (environment and {dotenv})")


def cut(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def newer_tables(conn: sqlite3.Connection, db: str) -> str:
    """What a newer fieldguide wrote into the index file (its migrations, of the index's tables
    or the audit trail's), as the commands refuse it; "" when nothing."""
    import sqlite_utils

    from .state.sqlite import AUDIT_MIGRATIONS

    found = sqlite_utils.Database(conn, execute_plugins=False)
    for migrations, what in ((INDEX_MIGRATIONS, db), (AUDIT_MIGRATIONS, f"{db}'s audit trail")):
        if newer := unknown_migrations(found, migrations):
            return newer_message(what, newer)
    return ""


def check_index(db: str, model: str, fleet: bool = False) -> list[Check]:
    """The index file: readable, whole, of this fieldguide's version or older, embedded with the
    model in use, private; on a read-only volume, that the audit trail is off (`fleet`: the
    audit trail is PostgreSQL's)."""
    path = Path(db)
    if not path.is_file():
        return [Check("index", "FAIL", f"no index at {db}: run fieldguide index DOCS_DIR")]
    checks = []
    try:
        with closing(open_read_only(path)) as conn:
            if newer := newer_tables(conn, db):
                return [Check("index", "FAIL", newer)]
            found = examine(conn)
    except IndexMissing as e:
        return [Check("index", "FAIL", str(e))]
    except sqlite3.DatabaseError as e:
        return [Check("index", "FAIL", f"{db} cannot be read as an index: {e}")]
    integrity, meta, last = found["integrity"], found["meta"], found["last_run"]
    docs, chunks = found["docs"], found["chunks"]
    if integrity != "ok":
        checks.append(Check("index", "FAIL", f"{db} is damaged: {integrity}; rebuild it"))
    else:
        run = f" · last run {last[0]} {last[1]}" if last else ""
        detail = f"{db}: integrity ok · generation {meta.get('generation', 0)}"
        source = f" · from {meta['docs_source']}" if meta.get("docs_source") else ""
        checks.append(
            Check("index", "ok", f"{detail} · {docs} docs · {chunks} chunks{source}{run}")
        )
    indexed = meta.get("embed_model")
    if indexed is None:
        checks.append(Check("model", "FAIL", "the index is empty: run fieldguide index DOCS_DIR"))
    elif indexed != model:
        checks.append(
            Check(
                "model",
                "FAIL",
                f"the index was embedded with {indexed} but {model} is in use: reindex,"
                " or restore the settings it was built with",
            )
        )
    else:
        checks.append(Check("model", "ok", f"{model}, as the index"))
    if shared := found["shared"]:
        named = "; ".join(
            f"{url} ({', '.join(p for p, _ in docs)})" for url, docs in shared.items()
        )
        checks.append(
            Check(
                "links",
                "warn",
                f"{len(shared)} page{'s' if len(shared) > 1 else ''} claimed by more than one doc's"
                f" url, none cited under it (each links to its own path): {cut(named)}",
            )
        )
    if not fleet and not writable(path):
        why = "answers, feedback and hand-offs are not kept"
        checks.append(Check("audit", "warn", f"{db} is read-only: the audit trail is off ({why})"))
    if integrity == "ok":
        with closing(open_read_only(path)) as conn:
            checks.append(check_owners(doc_records(conn)))
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        checks.append(
            Check(
                "privacy",
                "warn",
                f"{db} is readable by other users (it holds every question asked): chmod 600 {db}",
            )
        )
    return checks


SHOWN_UNOWNED = 10  # docs named by the owners check; the rest counted


def check_owners(docs: list[dict]) -> Check:
    """The docs nobody owns: no front matter `owner`, no CODEOWNERS rule, no git history."""
    from .owners import unowned

    nobody = unowned(docs)
    if not docs:
        return Check("owners", "skip", "no docs")
    if not nobody:
        return Check("owners", "ok", f"every doc has an owner ({len(docs)} docs)")
    named = ", ".join(nobody[:SHOWN_UNOWNED]) + (
        f" and {len(nobody) - SHOWN_UNOWNED} more" if len(nobody) > SHOWN_UNOWNED else ""
    )
    return Check(
        "owners",
        "warn",
        f"{len(nobody)} of {len(docs)} docs have no owner (front matter 'owner', CODEOWNERS or"
        f" git history): {named}",
    )


def check_git_docs(settings: Settings) -> Check:
    """The git docs source answers (`git ls-remote`, within the checks' timeout)."""
    from index.gitsource import GitError, GitSource

    try:  # the value checked as index checks it: git never reads it as an option
        git = GitSource(
            settings.docs_git, settings.docs_branch, Path("."), token=settings.docs_git_token
        )
    except GitError as e:
        return Check("docs", "FAIL", str(e))
    git.timeout = TIMEOUT
    try:
        heads = git.git("ls-remote", "--heads", "--", git.url)
    except GitError as e:
        return Check("docs", "FAIL", f"cannot reach {git.identity}: {e}")
    branch = git.branch
    if branch and f"refs/heads/{branch}" not in heads.split():
        return Check("docs", "FAIL", f"{git.url} has no branch {branch} (FIELDGUIDE_DOCS_BRANCH)")
    return Check("docs", "ok", f"{git.identity}: reachable")


def check_docs(docs: str, max_bytes: int = MAX_DOC_BYTES) -> Check:
    from index.indexer import too_large
    from index.loader import DocError, load_intents_yaml, parse_doc, walk_docs

    if not docs:
        return Check(
            "docs",
            "warn",
            "FIELDGUIDE_DOCS and FIELDGUIDE_DOCS_GIT are not set: /docs-reindex has nothing to"
            " index (an index built elsewhere, e.g. by CI, is served as it is)",
        )
    root = Path(docs)
    if not root.is_dir():
        return Check("docs", "FAIL", f"{docs} is not a folder (FIELDGUIDE_DOCS)")
    walk = walk_docs(root)
    if not walk.files:
        return Check("docs", "FAIL", f"no markdown files (*.md, *.markdown) under {docs}")
    problems = [f"{s['path']}: {s['reason']}" for s in walk.skipped]
    left_out: list[str] = []  # optional fields an index run leaves out, the doc indexed
    urls: list[tuple[str, str | None]] = []
    for path in walk.files:
        try:
            if (size := path.stat().st_size) > max_bytes:  # skipped unread by an index run too
                problems.append(
                    f"{path.relative_to(root).as_posix()}: {too_large(size, max_bytes)}"
                )
                continue
            doc = parse_doc(path.relative_to(root).as_posix(), path.read_bytes())
            left_out += [f"{doc.path}: {w}" for w in doc.warnings]
            urls.append((doc.path, doc.url))
        except (DocError, OSError) as e:
            problems.append(f"{path.relative_to(root).as_posix()}: {e}")
    left_out += [f"{w['path']}: {w['warning']}" for w in shared_warnings(claimed(urls))]
    try:
        load_intents_yaml(root)
    except (DocError, OSError) as e:
        problems.append(f"intents.yaml: {e}")
    detail = f"{docs}: {len(walk.files)} markdown files"
    if not problems and not left_out:
        return Check("docs", "ok", f"{detail}, all readable")
    if problems:
        shown = "; ".join(problems[:3]) + ("; …" if len(problems) > 3 else "")
        detail += f", {len(problems)} would be skipped: {shown}"
    if left_out:
        shown = "; ".join(left_out[:3]) + ("; …" if len(left_out) > 3 else "")
        detail += f", {len(left_out)} front-matter fields would be left out: {shown}"
    return Check("docs", "warn", detail)


def check_local_model(settings: Settings) -> Check:
    if settings.voyage_api_key:
        return Check("local model", "skip", "VOYAGE_API_KEY is set: Voyage embeds")
    from index.onnx_model import DEFAULT_DIR, INT8, MANIFEST

    folder = Path(settings.model_dir or DEFAULT_DIR)
    if (folder / INT8).is_file() and (folder / MANIFEST).is_file():
        return Check("local model", "ok", f"int8 ONNX model in {folder}")
    return Check(
        "local model",
        "FAIL",
        f"no exported model in {folder}: run python -m index.onnx_model (needs the export"
        " extra), point FIELDGUIDE_MODEL_DIR at one, or set VOYAGE_API_KEY",
    )


def _why(e: Exception) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:200]


def check_claude(settings: Settings) -> Check:
    if not settings.anthropic_api_key:
        return Check("claude", "skip", "no ANTHROPIC_API_KEY: every step runs offline")
    import anthropic

    from .wiring import make_anthropic

    client = make_anthropic(settings)  # the bot's own client (key, base URL)
    assert client is not None  # a key is set
    try:
        client.with_options(timeout=TIMEOUT, max_retries=0).models.list(limit=1)
    except anthropic.AuthenticationError:
        return Check("claude", "FAIL", "ANTHROPIC_API_KEY was rejected (401)")
    except anthropic.APIError as e:
        return Check("claude", "FAIL", f"cannot reach the Messages API: {_why(e)}")
    return Check("claude", "ok", "reachable, key accepted")


def configured_models(settings: Settings) -> dict[str, list[str]]:
    """model id → the steps configured to use it."""
    steps = {
        "condense": settings.condense_model,
        "classify": settings.classify_model,
        "answer": settings.answer_model,
        "check": settings.check_model,
        "judge": settings.judge_model,
    }
    out: dict[str, list[str]] = {}
    for step, model in steps.items():
        out.setdefault(model, []).append(step)
    return out


def check_claude_models(settings: Settings) -> Check:
    """Each configured model id answers a one-line request (a retired or mistyped id is a 404,
    which would otherwise send that step offline on every question); a model with no price is
    named (audit --stats cannot cost it)."""
    if not settings.anthropic_api_key:
        return Check("claude models", "skip", "no ANTHROPIC_API_KEY")
    import anthropic

    from .costs import unpriced
    from .wiring import make_anthropic

    client = make_anthropic(settings)
    assert client is not None  # a key is set
    quick = client.with_options(timeout=TIMEOUT, max_retries=0)
    failed = []
    models = configured_models(settings)
    for model, steps in models.items():
        try:
            quick.messages.create(
                model=model, max_tokens=16, messages=[{"role": "user", "content": "ping"}]
            )
        except anthropic.APIError as e:
            failed.append(f"{model} ({', '.join(steps)}): {_why(e)}")
    if failed:
        return Check("claude models", "FAIL", "; ".join(failed))
    no_price = unpriced(settings)
    if no_price:
        return Check(
            "claude models",
            "warn",
            f"{len(models)} answer; no price for {', '.join(no_price)}: add it to"
            " FIELDGUIDE_PRICES for audit --stats",
        )
    return Check("claude models", "ok", f"{', '.join(models)} answer")


def check_voyage(settings: Settings) -> Check:
    if not settings.voyage_api_key:
        return Check("voyage", "skip", "no VOYAGE_API_KEY: the local model embeds")
    import voyageai
    import voyageai.error as verr

    client = voyageai.Client(
        api_key=settings.voyage_api_key,
        base_url=settings.voyage_base_url or None,
        timeout=TIMEOUT,
        max_retries=0,
    )
    try:
        result = client.embed(["ping"], model=settings.voyage_model, input_type="query")
    except verr.AuthenticationError:
        return Check("voyage", "FAIL", "VOYAGE_API_KEY was rejected")
    except (verr.VoyageError, OSError) as e:
        return Check("voyage", "FAIL", f"cannot embed with {settings.voyage_model}: {_why(e)}")
    dims = len(result.embeddings[0])
    return Check("voyage", "ok", f"reachable, {settings.voyage_model} embeds ({dims} dims)")


def check_slack(settings: Settings) -> Check:
    if not settings.slack_bot_token:
        return Check("slack", "skip", "no SLACK_BOT_TOKEN: fieldguide serve needs one")
    shapes = [p for p in settings.slack_token_problems() if "is not set" not in p]
    if shapes:  # Slack would only say invalid_auth
        return Check("slack", "FAIL", "; ".join(shapes))
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    client = WebClient(
        token=settings.slack_bot_token, base_url=settings.slack_api_base_url, timeout=int(TIMEOUT)
    )
    try:
        auth = client.auth_test()
    except SlackApiError as e:
        return Check("slack", "FAIL", f"SLACK_BOT_TOKEN was refused: {e.response.get('error')}")
    except Exception as e:  # noqa: BLE001 - urllib raises many kinds; each is "unreachable"
        return Check("slack", "FAIL", f"cannot reach Slack: {_why(e)}")
    return Check("slack", "ok", f"bot token accepted ({auth.get('user')} in {auth.get('team')})")


def check_scopes(settings: Settings, db: str) -> Check:
    """FIELDGUIDE_SCOPES read and checked against the index, as the bot will at start-up (channel
    names are resolved then, with Slack)."""
    from .scopes import ScopeError, scopes_for_index

    if not settings.scopes:
        return Check("scopes", "skip", "no FIELDGUIDE_SCOPES: every channel searches everything")
    try:
        with closing(open_read_only(db)) as conn:
            scopes = scopes_for_index(settings.scopes, conn)
    except (ScopeError, sqlite3.DatabaseError) as e:
        return Check("scopes", "FAIL", str(e))
    names = scopes.names()
    later = f"; {', '.join(names)} resolved with Slack when the bot starts" if names else ""
    return Check("scopes", "ok", f"{len(scopes.by_key)} channel scopes, all known{later}")


def check_mcp(settings: Settings, db: str) -> Check:
    """What `fieldguide mcp` would serve: the scope it sees (FIELDGUIDE_MCP_SCOPE, an entry of
    FIELDGUIDE_SCOPES, checked against the index) and whether --http can start (its token)."""
    from .scopes import DEFAULT, ScopeError, scopes_for_index

    http = (
        "--http needs FIELDGUIDE_MCP_TOKEN"
        if not settings.mcp_token
        else "--http requires its bearer token"
    )
    if not settings.scopes:
        if settings.mcp_scope:
            why = f"FIELDGUIDE_MCP_SCOPE={settings.mcp_scope} needs FIELDGUIDE_SCOPES (a file)"
            return Check("mcp", "FAIL", why)
        return Check("mcp", "ok", f"sees everything; {http}")
    try:
        with closing(open_read_only(db)) as conn:
            scopes = scopes_for_index(settings.scopes, conn)
    except (ScopeError, sqlite3.DatabaseError) as e:
        return Check("mcp", "FAIL", f"its scope cannot be read: {e}")
    key = settings.mcp_scope
    if key:
        scope = scopes.by_key.get(key) or scopes.by_key.get("#" + key.lstrip("#"))
        if scope is None:
            known = ", ".join(scopes.by_key)
            return Check("mcp", "FAIL", f"FIELDGUIDE_MCP_SCOPE={key} is no entry of {known}")
    else:
        scope = scopes.by_key.get(DEFAULT)
    sees = f"sees {scope.describe()}" if scope else "sees everything (no default entry)"
    return Check("mcp", "ok", f"{sees}; {http}")


def check_decision(path: Path | None = None) -> Check:
    """The answer decision's file (router/decision.json, written by `fieldguide calibrate`) loads
    and each model can decide (router/decide.py's checks)."""
    from router import decide

    path = path or decide.MODEL_FILE
    try:
        models = decide.load_models(path)
    except decide.DecisionFileError as e:
        return Check("decision", "FAIL", str(e))
    return Check("decision", "ok", f"{path}: models {', '.join(sorted(models))}")


def run_checks(settings: Settings, db: str, docs: str, dotenv: Path = Path(".env")) -> list[Check]:
    from .wiring import embedder_for

    return [
        check_settings(settings, dotenv),
        *check_index(db, embedder_for(settings).name, bool(settings.database_url)),
        check_git_docs(settings)
        if settings.docs_git and not docs
        else check_docs(docs, settings.max_doc_bytes),
        check_scopes(settings, db),
        check_mcp(settings, db),
        check_decision(),
        check_local_model(settings),
        check_claude(settings),
        check_claude_models(settings),
        check_voyage(settings),
        check_slack(settings),
    ]
