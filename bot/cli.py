"""`fieldguide`: a thin command line over bot/api.py. Each command reads its arguments, calls the
API and prints what it returns; its help is written once, in the decorators below. How a command
runs (safe output, settings, errors as exit statuses, progress) is bot/cli_run.py; how answers and
hits print, bot/cli_text.py."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from bot.evaluation import ALL_MODES
from index.clean import display
from router.citations import label

from . import api
from .cli_owners import drafts, print_gaps, stale
from .cli_run import (
    ModesCommand,
    db_option,
    guarded,
    json_flag,
    option,
    print_json,
    progress_bars,
    question_argument,
    since_option,
)
from .cli_text import answer_json, format_answer, hit_json, question_of
from .settings import Settings, SettingsError

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
        print_json(done.to_json())
        return 0
    summary, published = done.summary, done.published
    shown = done.source.identity if done.source.git else docs_dir or settings.docs
    print(f"Indexed {shown} into {settings.at(db).db} ({summary.model})")
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
    for t in done.replayed or []:
        print(
            f"  gap topic #{t['topic_id']} “{t['title'][:60]}”: answered {t['before']} before,"
            f" {t['after']} now" + (" — fixed" if t["fixed"] else "")
        )
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
        print_json(found)
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


@command("Route a question and show the ranked chunks with their scores (no answer).")
@question_argument
@option("--k", type=int, default=10, help="how many chunks (default 10)")
@json_flag("print the routing decision and hits as JSON")
def search(settings: Settings, question: tuple[str, ...], k: int, as_json: bool, db: str) -> int:
    text = question_of(question)
    decision = api.search(text, db, k=k, settings=settings)
    if as_json:
        print_json(
            {
                "question": text,
                "routing": decision.to_dict(),
                "hits": [hit_json(i, h) for i, h in enumerate(decision.hits, 1)],
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
            f"{i:>2}. {h.score:.3f}  {display(c['doc'])} · {label(c['title'], c['heading_path'])}"
            f"  [{c['intent']}]"
        )
        print(
            f"      bm25 {h.bm25:.2f} · vector {h.vector:.3f}   {' '.join(c['text'].split())[:110]}"
        )
    return 0


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
    from .logs import configured

    with configured(settings.log_level, settings.log_format):
        reply = api.reply(
            question_of(question), db, channel=channel, scope=scope, settings=settings
        )
    ans = reply.answer
    if reply.talk:  # "thanks", "hello": nothing looked up, nothing recorded
        print_json({"small_talk": reply.talk, "text": ans.text}) if as_json else print(ans.text)
        return 0
    if as_json:
        print_json(answer_json(ans, show_context))
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
            print_json(figures)
        else:
            print(format_stats(figures, since))
        return 0
    rows = api.audit(db, since=since, decision=decision, limit=limit, settings=settings)
    if as_json:
        print_json(rows)
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
        print_json({"topics": [t.to_json() for t in topics], **info})
        return 0
    print_gaps(topics, info, top)
    return 0


cli.add_command(stale)
cli.add_command(drafts)


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
        settings = settings.at(db)
        found = run_checks(settings, settings.db, docs or settings.docs)
        # with bad settings, "valid" would contradict the lines above (a mode warning stays)
        checks += [c for c in found if not (checks and c.name == "settings" and c.status == "ok")]
    if as_json:
        print_json([c.__dict__ for c in checks])
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
    help="address to bind with --http (default 0.0.0.0; the health port binds"
    " FIELDGUIDE_HEALTH_HOST)",
)
def serve(settings: Settings, http: int | None, host: str, db: str) -> int:
    from .app import FieldGuide
    from .logs import configured
    from .slack.serve import CannotServe

    try:
        with configured(settings.log_level, settings.log_format):
            FieldGuide.open(settings, db).serve(http, host)
    except CannotServe as e:
        print(f"fieldguide: {e}", file=sys.stderr)
        return e.status
    return 0


@command("Serve the docs to MCP hosts (Claude Code, Cursor...) over stdio, or with --http PORT.")
@option("--http", type=int, metavar="PORT", help="Streamable HTTP at /mcp (FIELDGUIDE_MCP_TOKEN)")
@option(
    "--host", default="127.0.0.1", help="address for --http (default 127.0.0.1; containers 0.0.0.0)"
)
@option("--scope", help="see only this FIELDGUIDE_SCOPES entry (default: FIELDGUIDE_MCP_SCOPE)")
def mcp(settings: Settings, http: int | None, host: str, scope: str | None, db: str) -> int:
    from .app import FieldGuide
    from .logs import configured
    from .mcp_server import run

    with configured(settings.log_level, settings.log_format):
        run(FieldGuide.open(settings, db), http, host, scope)
    return 0


@command(
    "PostgreSQL for a fleet (FIELDGUIDE_DATABASE_URL): create or migrate the schema.", db=False
)
@click.argument("action", type=click.Choice(["upgrade"]), help="upgrade: apply pending migrations")
def db_(settings: Settings, action: str) -> int:
    from bot.state.postgres.schema import upgrade

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


@command(
    "Index an eval set (incrementally) and score retrieval and routing on its questions.",
    db="the set's own index, kept between runs (default: .fieldguide/eval/SET-EMBEDDER.db,"
    " e.g. .fieldguide/eval/examples-local-all-MiniLM-L6-v2-int8.db; not FIELDGUIDE_DB)",
    cls=ModesCommand,
)
@click.argument(
    "set_dir",
    help="a folder with docs/ and questions.jsonl (format: docs/quality.md, 'Eval sets')",
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
        print_json(figures)
    elif answers:
        print(format_summary(figures["summary"]["set"], figures["summary"]))
    else:
        print(format_table(figures))
    return 0


# onnxruntime (the local model's runtime) writes a usage record outside the project on every run
# (~/.cache/Microsoft/DeveloperTools/.onnxruntime/, a session file in the temp folder) unless this
# is set when it is imported: no session option or call reaches it, its telemetry starts with the
# import. Set by the command, never by the library; a program using bot.api sets it itself (or
# not): docs/configuration.md.
NO_RUNTIME_TELEMETRY = ("ORT_DISABLE_TELEMETRY", "1")


def main(argv: list[str] | None = None) -> int:
    """The `fieldguide` command: the exit status (a usage error exits 2 through SystemExit, after
    saying what is wrong). Output piped into a reader that stops early (`| head -1`) ends quietly,
    as a shell tool does, instead of with a BrokenPipeError trace."""
    os.environ.setdefault(*NO_RUNTIME_TELEMETRY)  # before anything imports onnxruntime
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
