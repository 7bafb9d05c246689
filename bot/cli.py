"""`fieldguide`: a thin command line over bot/api.py. Each command reads its arguments, calls the
API and prints what it returns; its help is written once, in the decorators below."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bot.evaluation.retrieval import ALL_MODES
from index.clean import SURROGATES, SafeTerminal
from index.redact import redact, redact_logs
from router.citations import label, updated_ago

from . import api
from .settings import Settings, SettingsError
from .since import parse_since

if TYPE_CHECKING:
    from router.answer import Answer


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def progress_stream():
    """Where progress bars go: the terminal itself, not through `SafeTerminal` (a bar is our own
    text, redrawn with carriage returns and cursor moves that must reach the terminal)."""
    return getattr(sys.stderr, "raw", sys.stderr)


@contextlib.contextmanager
def progress_bars(quiet: bool = False) -> Iterator[api.Progress]:
    """The API's progress on stderr: a bar for each counted stage (none when stderr is not a tty,
    or `quiet`), closed as the next stage starts; news without a count is a line."""
    from tqdm import tqdm

    bars: list[tqdm] = []

    def stage(name: str, total: int) -> Callable[[int], object]:
        while bars:
            bars.pop().close()
        if not total:
            print(name, file=sys.stderr)
            return lambda n: None
        unit = "text" if name == "Embedding" else "q"
        bar = tqdm(total=total, desc=name, unit=unit, file=progress_stream(), disable=quiet or None)
        bars.append(bar)
        return bar.update

    try:
        yield stage
    finally:
        while bars:
            bars.pop().close()


# -- how the commands are declared ---------------------------------------------------------------


class Commands(click.Group):
    """`fieldguide --help` lists the commands in the order they are declared, not sorted."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(
    cls=Commands,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Settings come from the environment and .env (see .env.example)."
    " Run 'fieldguide COMMAND --help' for details.",
)
# the installed distribution's version (its metadata), as `llm --version` and `sqlite-utils
# --version` print theirs
@click.version_option(
    package_name="fieldguide", prog_name="fieldguide", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Answer questions from a folder of markdown docs, with citations; offline without API keys."""


def command(
    summary: str, db: bool | str = True, **attrs: Any
) -> Callable[[Callable[..., int]], Any]:
    """A fieldguide command named after the function (less a trailing _), `summary` its help and
    its line in `fieldguide --help`; with `--db` unless `db` is False (a string: `--db`'s help,
    where the command's index is not FIELDGUIDE_DB). The function is called with the Settings and
    the arguments (see `guarded`) and returns the exit status."""

    def make(f: Callable[..., int]) -> click.Command:
        with_db = option("--db", help=db) if isinstance(db, str) else db_option
        run = with_db(guarded(f)) if db else guarded(f)
        name = f.__name__.rstrip("_")
        return cli.command(name, help=summary, short_help=summary, **attrs)(run)

    return make


def option(*decls: str, **attrs: Any) -> Callable:
    """click.option naming its value as argparse did: `--limit LIMIT`, not `--limit INTEGER`."""
    if not attrs.get("is_flag"):
        attrs.setdefault("metavar", decls[0].lstrip("-").upper().replace("-", "_"))
    return click.option(*decls, **attrs)


db_option = option("--db", help="index file (default: FIELDGUIDE_DB, .fieldguide/index.db)")


def json_flag(help: str) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help=help)


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--since as bot/since.py reads it; anything else is a usage error naming the option."""
    try:
        return None if value is None else parse_since(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def since_option(help: str) -> Callable:
    return option("--since", callback=_since, help=help)


question_argument = click.argument(
    "question", nargs=-1, required=True, help="the question (quote it or not)"
)


def guarded(f: Callable[..., int]) -> Callable[..., int]:
    """The command `f(settings, **arguments)` as every command runs: what it prints made safe for
    a terminal (unless it prints JSON), then `run`."""

    @functools.wraps(f)
    def safe(**params: Any) -> int:
        if params.get("as_json") is True:  # for programs: JSON escapes what it must
            return run(f, params)
        # for people: text from questions, docs or the model cannot drive their terminal
        with (
            contextlib.redirect_stdout(SafeTerminal(sys.stdout)),
            contextlib.redirect_stderr(SafeTerminal(sys.stderr)),
        ):
            return run(f, params)

    return safe


def run(f: Callable[..., int], params: dict[str, Any]) -> int:
    """`f` given the settings (doctor is given the SettingsError when they cannot be loaded); what
    the API raises becomes one line on stderr and exit 2, an interrupt exit 130."""
    from index.embedders import EmbeddingError
    from index.indexer import IndexError_
    from index.search import IndexChanged
    from index.store import IndexMissing, ModelMismatch

    try:
        settings = Settings.load()
    except SettingsError as e:
        if f.__name__ != "doctor":
            print(f"fieldguide: {e}", file=sys.stderr)
            return 2
        return f(e, **params)
    redact_logs(*settings.urls())  # no log line shows a URL's password
    fleet_errors: tuple[type[Exception], ...] = ()  # psycopg is loaded only in fleet mode
    if settings.database_url:
        from index.pg import FleetError

        fleet_errors = (FleetError,)
    try:
        return f(settings, **params)
    except (
        IndexError_,
        IndexMissing,
        ModelMismatch,
        EmbeddingError,
        IndexChanged,
        ValueError,
    ) as e:
        print(f"fieldguide: {e}", file=sys.stderr)
        return 2
    except fleet_errors as e:
        print(f"fieldguide: {redact(str(e), *settings.urls())}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as e:
        db = params.get("db") or settings.db
        print(f"fieldguide: {database_error(db, e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "fieldguide: interrupted; the index still holds its last complete run", file=sys.stderr
        )
        return 130


# -- the commands --------------------------------------------------------------------------------


@command("Index a folder of markdown docs (incremental: only changed text is embedded).")
@click.argument(
    "docs_dir",
    required=False,
    help="folder of *.md / *.markdown files with YAML front matter"
    " (default: FIELDGUIDE_DOCS, or the repository FIELDGUIDE_DOCS_GIT, pulled first)",
)
@option(
    "--replace",
    is_flag=True,
    help="index these docs even though the index was built from another source"
    " (its docs are replaced by these)",
)
@json_flag("print the run summary as one JSON object")
@option("--quiet", is_flag=True, help="no progress bar")
def index(
    settings: Settings, docs_dir: str | None, replace: bool, as_json: bool, quiet: bool, db: str
) -> int:
    with progress_bars(quiet) as progress:
        done = api.index(docs_dir, db, replace=replace, settings=settings, progress=progress)
    if as_json:
        _print_json(done.to_json())
        return 0
    summary, published = done.summary, done.published
    shown = done.source.identity if done.source.git else docs_dir or settings.docs
    print(f"Indexed {shown} into {db or settings.db} ({summary.model})")
    print(
        f"  added {len(summary.added)} · changed {len(summary.changed)}"
        f" · removed {len(summary.removed)} · unchanged {len(summary.unchanged)}"
        f" · skipped {len(summary.skipped)}"
    )
    print(
        f"  {summary.chunks} chunks · {summary.embedded} texts embedded · {summary.seconds:.1f} s"
    )
    for s in summary.skipped:
        print(f"  skipped {s['path']}: {s['reason']}")
    for w in summary.warnings:
        print(f"  warning {w['path']}: {w['warning']}")
    if published:
        print(
            f"Published generation {published['generation']} to PostgreSQL:"
            f" {published['bytes'] / 1e6:.1f} MB ({published['stored'] / 1e6:.1f} MB stored)"
            f" in {published['seconds']:.1f} s"
        )
    return 0


@command("List the intents of the index with their doc and chunk counts.")
@json_flag("print as JSON")
@option(
    "--describe",
    is_flag=True,
    help="print a draft intents.yaml: descriptions from each intent's headings"
    " (written by Claude when ANTHROPIC_API_KEY is set)",
)
def intents(settings: Settings, as_json: bool, describe: bool, db: str) -> int:
    if describe:
        draft, notes = api.draft_intents(db, settings=settings)
        for note in notes:
            print(f"fieldguide: {note}", file=sys.stderr)
        print(draft, end="")
        return 0
    found = api.intents(db, settings=settings)
    if as_json:
        _print_json(found)
        return 0
    if not found:
        print("No intents: the index is empty. Run: fieldguide index DOCS_DIR")
        return 0
    # aligned for ordinary names; a longer one (an index built before names were checked) only
    # pushes its own line
    width = min(max(len(i["name"]) for i in found), 24)
    print(f"{'intent':<{width}}  docs  chunks  description")
    for i in found:
        print(f"{i['name']:<{width}}  {i['docs']:>4}  {i['chunks']:>6}  {i['description']}")
    return 0


def question_of(words: tuple[str, ...]) -> str:
    """The question given as arguments; ValueError when it is not valid text (Python hands over
    bytes that are not UTF-8 as lone surrogates, which no tokenizer or store takes)."""
    question = " ".join(words).strip()
    if bad := SURROGATES.search(question):
        code = ord(bad.group())
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise ValueError(
            f"the question is not valid UTF-8 text ({what}): check the terminal's or the"
            " script's encoding"
        )
    return question


def _hit_json(rank: int, h) -> dict:
    c = h.chunk
    return {
        "rank": rank,
        "chunk_id": c["id"],
        "doc": c["doc"],
        "title": c["title"],
        "intent": c["intent"],
        "heading_path": c["heading_path"],
        "bm25": round(h.bm25, 4),
        "vector": round(h.vector, 4),
        "score": round(h.score, 4),
        "text": c["text"],
    }


@command("Route a question and show the ranked chunks with their scores (no answer).")
@question_argument
@option("--k", type=int, default=10, help="how many chunks (default 10)")
@json_flag("print the routing decision and hits as JSON")
def search(settings: Settings, question: tuple[str, ...], k: int, as_json: bool, db: str) -> int:
    text = question_of(question)
    decision = api.search(text, db, k=k, settings=settings)
    if as_json:
        _print_json(
            {
                "question": text,
                "routing": decision.to_dict(),
                "hits": [_hit_json(i, h) for i, h in enumerate(decision.hits, 1)],
            }
        )
        return 0
    ranked = ", ".join(f"{i} {s:.2f}" for i, s in decision.ranked[:3]) or "none"
    searched = "everything" if decision.searched is None else ", ".join(decision.searched)
    print(f"Routing ({decision.classifier}): {ranked} → {decision.reason}; searched {searched}")
    if decision.note:
        print(f"Note: {decision.note}")
    for i, h in enumerate(decision.hits, 1):
        c = h.chunk
        print(
            f"{i:>2}. {h.score:.3f}  {c['doc']} · {label(c['title'], c['heading_path'])}"
            f"  [{c['intent']}]"
        )
        print(
            f"      bm25 {h.bm25:.2f} · vector {h.vector:.3f}   {' '.join(c['text'].split())[:110]}"
        )
    return 0


def answer_json(ans: Answer, show_context: bool = False) -> dict:
    out = ans.to_json()
    if show_context:
        out["context"] = ans.trace.hits
        out["passages"] = [p.__dict__ for p in ans.passages]
    return out


def format_answer(ans: Answer, show_context: bool = False) -> str:
    lines = []
    if show_context:
        lines.append("Retrieved:")
        for i, h in enumerate(ans.trace.hits, 1):
            lines.append(
                f"  {i:>2}. {h['score']:.3f} {h['doc']} · {label(h['title'], h['heading_path'])}"
            )
        lines.append("Passages:")
        lines += [f"  [{p.chunk_id}] {' '.join(p.text.split())[:160]}" for p in ans.passages]
        lines.append("")
    lines += [f"⚠ {ans.caveat}", ""] if ans.caveat else []
    lines += [ans.text, ""]
    if ans.sources:
        lines.append("Sources:")
        for s in ans.sources:
            ago = updated_ago(s.updated)
            lines.append(f"  [{s.n}] {s.label} — {s.url}" + (f" ({ago})" if ago else ""))
    intent = ans.intents[0] if ans.intents else "none"
    stages = " · ".join(f"{k} {v:.0f}" for k, v in ans.trace.timings_ms.items())
    lines.append(f"({ans.decision} · intent {intent} · {stages} ms)")
    lines += [f"Note: {n}" for n in ans.trace.notes]
    if ans.scope is not None:
        lines.append(f"Note: searched only the scope {ans.scope.describe()}")
    return "\n".join(lines)


@command("Answer a question from the docs, with numbered sources (offline without API keys).")
@question_argument
@json_flag("print decision, text, citations, intents, offline, timings as JSON")
@option(
    "--show-context",
    is_flag=True,
    help="also show the retrieved chunks and extracted passages",
)
@option("--channel", help="answer as in this Slack channel (id, or #name) under FIELDGUIDE_SCOPES")
@option("--scope", help="search only this entry of FIELDGUIDE_SCOPES (its key)")
def ask(
    settings: Settings,
    question: tuple[str, ...],
    as_json: bool,
    show_context: bool,
    channel: str | None,
    scope: str | None,
    db: str,
) -> int:
    text = question_of(question)
    ans = api.ask(text, db, channel=channel, scope=scope, settings=settings)
    if as_json:
        _print_json(answer_json(ans, show_context))
    else:
        print(format_answer(ans, show_context))
    return 0


@command("List recorded answers (newest first) with their decision, intent, timing and feedback.")
@since_option(
    "only answers on or after this ISO date/time (UTC unless it has a zone), e.g."
    " 2026-11-01 or 2026-11-01T09:30, or this long ago: 30m, 24h, 7d, 2w"
)
@option(
    "--decision",
    type=click.Choice(["ANSWER", "PARTIAL", "ABSTAIN"], case_sensitive=False),
    metavar="[ANSWER|PARTIAL|ABSTAIN]",
    help="only this decision",
)
@option("--limit", type=int, default=50, help="at most this many (default 50)")
@json_flag("print the full records as JSON")
@option(
    "--stats",
    is_flag=True,
    help="instead of the answers: questions, decisions, feedback, tokens and estimated"
    " cost by model (prices: FIELDGUIDE_PRICES) over --since",
)
def audit(
    settings: Settings,
    since: str | None,
    decision: str | None,
    limit: int,
    as_json: bool,
    stats: bool,
    db: str,
) -> int:
    if stats:
        from .costs import format_stats

        figures = api.audit_stats(db, since=since, settings=settings)
        if as_json:
            _print_json(figures)
        else:
            print(format_stats(figures, since))
        return 0
    rows = api.audit(db, since=since, decision=decision, limit=limit, settings=settings)
    if as_json:
        _print_json(rows)
        return 0
    for r in rows:
        fb = " ".join(f"{u}:{v}" for u, v in (r["feedback"] or {}).items())
        where = f" · {r['channel']}/{r['user']}" if r["channel"] else ""
        print(
            f"#{r['id']} {r['created']} {r['decision']:<8} {(r['intents'] or ['-'])[0]:<18} "
            f"{r['timings_ms'].get('total', 0):>7.0f} ms{where}{' · feedback ' + fb if fb else ''}"
            f"{' · handed to ' + r['handoff'] if r.get('handoff') else ''}"
        )
        print(f"    Q: {r['question'][:100]}")
    if not rows:
        print("No answers recorded yet.")
    return 0


@command(
    "Group the questions the docs did not answer well (not in the docs, partial, 👎, handed"
    " to a person) into topics, with counts, examples, the nearest doc and its owner."
)
@since_option(
    "only questions on or after this ISO date/time (UTC unless it has a zone), or this"
    " long ago: 30m, 24h, 7d, 2w"
)
@option("--intent", help="only the topics of this intent (a topic's intent is its nearest doc's)")
@option("--top", type=int, default=10, help="topics printed (default 10)")
@json_flag("print every topic as JSON")
@option("--html", metavar="FILE", help="also write a self-contained report page")
def gaps(
    settings: Settings,
    since: str | None,
    intent: str | None,
    top: int,
    as_json: bool,
    html: str | None,
    db: str,
) -> int:
    found = api.gaps(db, since=since, intent=intent, settings=settings)
    topics, info = found.topics, found.info
    if html:
        from .gaps_report import render

        title = "What the docs don't answer" + (f" · {intent}" if intent else "")
        page = render(found.rows, topics, title, info, since)
        Path(html).write_text(page, encoding="utf-8")
        print(f"Wrote {html}", file=sys.stderr)
    if as_json:
        _print_json({"topics": [t.to_json() for t in topics], **info})
        return 0
    from .gaps_report import plural

    print(
        f"{plural(info['unanswered'], 'question')} not answered well, in"
        f" {plural(len(topics), 'topic')} (average-linkage cut at cosine distance {info['cut']},"
        f" silhouette {info['silhouette']})"
    )
    if info["small_talk"]:
        print(f"({plural(info['small_talk'], 'message')} of small talk left out)")
    for t in topics[:top]:
        print(f"\n{t.count:>4}  {t.questions[0]}")
        doc = t.doc + (f" › {t.section}" if t.section else "") if t.doc else "-"
        where = f"nearest doc {doc} · intent {t.intent or '-'} · owner {t.owner or '-'}"
        print(f"      {where}" + (f"\n      {t.url}" if t.url and t.url != t.doc else ""))
        for q in t.questions[1:]:
            print(f"        · {q}")
    return 0


@command(
    "Check settings, the index, the docs folder and the services whose keys are set;"
    " one line each, exit 1 if any fails."
)
@option("--docs", help="docs folder to check (default: FIELDGUIDE_DOCS, or FIELDGUIDE_DOCS_GIT)")
@json_flag("print the checks as JSON")
def doctor(
    settings: Settings | SettingsError | None, docs: str | None, as_json: bool, db: str
) -> int:
    from .doctor import run_checks, settings_problems

    if isinstance(settings, SettingsError):  # they could not be loaded: each is a finding
        checks, settings = settings_problems(settings)
    else:
        checks = []
    if settings is not None:
        found = run_checks(settings, db or settings.db, docs or settings.docs)
        # with bad settings, "valid" would contradict the lines above (a mode warning stays)
        checks += [c for c in found if not (checks and c.name == "settings" and c.status == "ok")]
    if as_json:
        _print_json([c.__dict__ for c in checks])
    else:
        for c in checks:
            print(f"{c.status:<4}  {c.name:<11}  {c.detail}")
    return 1 if any(c.status == "FAIL" for c in checks) else 0


@command("Run the Slack bot: Socket Mode (SLACK_APP_TOKEN) or, with --http PORT, an HTTP endpoint.")
@option(
    "--http", type=int, metavar="PORT", help="serve /slack/events on this port (signatures checked)"
)
@option(
    "--host",
    default="0.0.0.0",
    help="address to bind with --http and for FIELDGUIDE_HEALTH_PORT (default 0.0.0.0)",
)
def serve(settings: Settings, http: int | None, host: str, db: str) -> int:
    from .logs import configure, unconfigure

    configure(settings.log_level, settings.log_format)
    try:
        return run_bot(settings, http, host, db)
    finally:
        unconfigure()


def run_bot(settings: Settings, http: int | None, host: str, db: str) -> int:
    """serve's work, its logging configured: the bot until it is stopped, or why it cannot
    start."""
    import logging

    from .health import Health, auth_test_slack, serve_health, socket_mode_slack
    from .logs import say
    from .slack_app import SlackStartupError, build_bot, http_server
    from .wiring import make_pipeline

    redact_logs(*settings.urls())  # the handlers configure added redact too
    # the pool would log each failed reconnection; bot/state/postgres.py says it once per outage
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    # the tokens' shapes first: a wrong one would otherwise be found after the index has loaded
    # and Slack has been asked (and, unreachable, retried for FIELDGUIDE_SLACK_STARTUP_SECONDS)
    if problems := settings.slack_token_problems(http=bool(http)):
        print(
            f"fieldguide: {'; '.join(problems)} (see README, 'Slack in five steps')",
            file=sys.stderr,
        )
        return 2
    db = db or settings.db
    if settings.database_url:
        from .wiring import start_follower, sync_published

        held = sync_published(settings, db)
        say(
            f"fieldguide: fleet mode, serving published index generation {held}"
            if held is not None
            else "fieldguide: fleet mode, nothing published yet: serving the local index"
        )
    pipeline = make_pipeline(settings, db)
    pipeline.engine.warm()  # the index, the model and the docs' words now, not on a question
    if settings.database_url:
        start_follower(settings, db, pipeline.engine)
    health = Health(pipeline.engine, settings.database_url)
    if settings.health_port:  # up before Slack is reached: a probe sees why it is not ready
        try:
            serve_health(health, settings.health_port, host)
        except OSError as e:  # in use, or a privileged port
            print(
                f"fieldguide: cannot serve /healthz on {host}:{settings.health_port}"
                f" (FIELDGUIDE_HEALTH_PORT): {e.strerror or e}",
                file=sys.stderr,
            )
            return 1
    try:
        bot = build_bot(settings, pipeline)
    except SlackStartupError as e:
        print(f"fieldguide: {e}", file=sys.stderr)
        return 1
    app = bot.app
    if http:
        health.slack = auth_test_slack(app.client)
        say(f"fieldguide: serving Slack over HTTP at http://{host}:{http}/slack/events")
        http_server(app, settings.slack_signing_secret, host, http, health=health).run()
    else:
        from slack_bolt.adapter.socket_mode import SocketModeHandler
        from slack_bolt.util.utils import get_boot_message
        from slack_sdk.errors import SlackApiError

        handler = SocketModeHandler(app, settings.slack_app_token)
        health.slack = socket_mode_slack(handler.client)
        try:
            handler.connect()
        except SlackApiError as e:
            print(
                f"fieldguide: Slack refused SLACK_APP_TOKEN ({e.response.get('error', '?')}):"
                " check the app-level token (xapp-…, with connections:write) and that Socket"
                " Mode is on",
                file=sys.stderr,
            )
            return 1
        say("fieldguide: connected to Slack over Socket Mode")
        app.logger.info(get_boot_message())  # what SocketModeHandler.start() does after connect()
        threading.Event().wait()
    return 0


@command(
    "PostgreSQL for a fleet (FIELDGUIDE_DATABASE_URL): create or migrate the schema.", db=False
)
@click.argument("action", type=click.Choice(["upgrade"]), help="upgrade: apply pending migrations")
def db_(settings: Settings, action: str) -> int:
    from index.pg import upgrade

    if not settings.database_url:
        print("fieldguide: set FIELDGUIDE_DATABASE_URL=postgresql://… first", file=sys.stderr)
        return 2
    before, after = upgrade(settings.database_url)
    if before == after:
        print(f"PostgreSQL schema already at version {after}; nothing to do")
    else:
        print(f"PostgreSQL schema upgraded from version {before} to {after}")
    return 0


@command("Fit the answer decision on eval sets (leave-one-set-out figures) and write it.", db=False)
@click.argument(
    "set_dirs", nargs=-1, required=True, metavar="SET_DIR...", help="eval sets (shared/eval format)"
)
@option("--write", help="the decision file to write (default: the package's router/decision.json)")
@option("--seed", type=int, default=0, help="seed of the headings sampled (default 0)")
@option("--headings", type=int, help="headings read as questions per set (default 150)")
@option("--work", default=str(api.EVAL_WORK), help="folder of the sets' indexes (as for eval)")
def calibrate(
    settings: Settings,
    set_dirs: tuple[str, ...],
    write: str | None,
    seed: int,
    headings: int | None,
    work: str,
) -> int:
    with progress_bars() as progress:
        report, body = api.calibrate(
            list(set_dirs),
            write=write,
            work=work,
            seed=seed,
            headings=headings,
            settings=settings,
            progress=progress,
        )
    print(report)
    written = write or "router/decision.json"
    print(f"wrote {written} ({sum(body['examples'].values())} examples)", file=sys.stderr)
    return 0


class ModesCommand(click.Command):
    """Reads `--modes hybrid routed` as argparse's nargs="+" did: every word after --modes up to
    the next option is a mode (a click option takes one value at a time)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        spread: list[str] = []
        modes = False
        for arg in args:
            if arg.startswith("-"):
                modes = arg == "--modes"
            elif modes and spread[-1] != "--modes":
                spread.append("--modes")
            spread.append(arg)
        return super().parse_args(ctx, spread)


@command(
    "Index an eval set (incrementally) and score retrieval and routing on its questions.",
    db="the set's own index, kept between runs (default: .fieldguide/eval/SET-EMBEDDER.db,"
    " e.g. .fieldguide/eval/examples-local-all-MiniLM-L6-v2-int8.db; not FIELDGUIDE_DB)",
    cls=ModesCommand,
)
@click.argument(
    "set_dir",
    help="a folder with docs/ and questions.jsonl (see shared/eval/README.md)",
)
@option("--questions", help="a questions file kept elsewhere (paths relative to SET_DIR/docs)")
@json_flag("print every figure as one JSON object instead of the tables")
@option("--output", "-o", metavar="FILE", help="also write every figure to this JSON file")
@option(
    "--modes",
    multiple=True,
    type=click.Choice(ALL_MODES),
    metavar="MODE [MODE ...]",
    help=f"{' '.join(ALL_MODES)} (default: all; reranked only with VOYAGE_API_KEY)",
)
@option(
    "--answers",
    is_flag=True,
    help="score whole answers (the ask path) instead of retrieval: abstain and PARTIAL"
    " rates, token recall/precision, gold cited, off-topic abstain, length, latency",
)
@option(
    "--offtopic",
    metavar="FILE",
    help="with --answers: off-topic questions (default: SET_DIR/offtopic.jsonl if present)",
)
@option(
    "--limit",
    type=int,
    metavar="N",
    help="with --answers: N answerable questions sampled with --seed (default: all)",
)
@option("--seed", type=int, default=0, help="sampling and bootstrap seed (default 0)")
@option(
    "--judge",
    is_flag=True,
    help="with --answers (needs ANTHROPIC_API_KEY): Claude grades each answer's faithfulness"
    " to its cited passages and correctness against the reference answer",
)
@option(
    "--judge-model", metavar="MODEL", help="the grading model (default: FIELDGUIDE_JUDGE_MODEL)"
)
def eval_(
    settings: Settings,
    set_dir: str,
    questions: str | None,
    as_json: bool,
    output: str | None,
    modes: tuple[str, ...],
    answers: bool,
    offtopic: str | None,
    limit: int | None,
    seed: int,
    judge: bool,
    judge_model: str | None,
    db: str,
) -> int:
    from bot.evaluation.answers import format_summary
    from bot.evaluation.retrieval import format_table

    with progress_bars() as progress:
        figures = api.evaluate(
            set_dir,
            db,
            questions=questions,
            modes=list(modes) or None,
            answers=answers,
            offtopic=offtopic,
            limit=limit,
            seed=seed,
            judge=judge,
            judge_model=judge_model,
            settings=settings,
            progress=progress,
        )
    if output:
        text = json.dumps(figures, indent=2, ensure_ascii=False)
        Path(output).write_text(text + "\n", encoding="utf-8")
        print(f"Wrote {output}", file=sys.stderr)
    if as_json:
        _print_json(figures)
    elif answers:
        print(format_summary(figures["summary"]["set"], figures["summary"]))
    else:
        print(format_table(figures))
    return 0


# -- running it ----------------------------------------------------------------------------------


def database_error(db: str, e: sqlite3.DatabaseError) -> str:
    """What went wrong with the index file, truthfully: a write that failed (full disk, read-only
    file or folder, locked) leaves the index as it was, and removing it would throw away a good
    index and its embeddings; only a file that is not an index, or a damaged one, needs
    rebuilding."""
    code = getattr(e, "sqlite_errorname", "") or ""
    if code == "SQLITE_FULL":
        return (
            f"the disk is full (or a file size limit was hit) writing {db}: the index is unchanged"
        )
    if code.startswith("SQLITE_READONLY"):
        what = "its folder is" if code == "SQLITE_READONLY_DIRECTORY" else "the file is"
        return f"{db} cannot be written ({what} read-only): the index is unchanged"
    if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return f"{db} is locked by another process (a reindex?): the index is unchanged; try again"
    if code == "SQLITE_IOERR_WRITE":
        return (
            f"writing {db} failed (a full disk, a file size limit or a disk fault): the index is"
            " unchanged"
        )
    if code.startswith("SQLITE_IOERR"):
        return f"disk error on {db} ({e}): the index is unchanged"
    if code.startswith("SQLITE_CANTOPEN"):
        return f"cannot open {db} (a missing or unreadable folder or file): {e}"
    if code in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
        what = "is not an index" if code == "SQLITE_NOTADB" else "is damaged"
        return f"{db} {what} ({e}); move it away and run fieldguide index to build a new one"
    return f"{db}: {e}"


def main(argv: list[str] | None = None) -> int:
    """The `fieldguide` command: the exit status (a usage error exits 2 through SystemExit, after
    saying what is wrong). Output piped into a reader that stops early (`| head -1`) ends quietly,
    as a shell tool does, instead of with a BrokenPipeError trace."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            with cli.make_context("fieldguide", args) as ctx:
                return cli.invoke(ctx)
        except click.exceptions.Exit as e:  # --help, after printing it
            return e.exit_code
        except click.ClickException as e:
            e.show()
            raise SystemExit(e.exit_code) from None
        finally:
            sys.stdout.flush()  # buffered output (--help too) meets the pipe here
    except BrokenPipeError:
        # stdout's buffer cannot be written at exit either: point it at /dev/null first
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
