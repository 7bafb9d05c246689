"""`fieldguide`: a thin command line over the library in index/ and router/."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from index.clean import SURROGATES, SafeTerminal
from index.redact import redact, redact_logs
from router.citations import label, updated_ago

if TYPE_CHECKING:
    import sqlite_utils

    from index.embedders import Embedder
    from index.indexer import RunSummary
    from router.answer import Answer

    from .wiring import DocsSource

from .settings import Settings, SettingsError
from .since import since_arg
from .wiring import embedder_for, make_anthropic, make_engine, make_pipeline


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def progress_stream():
    """Where progress bars go: the terminal itself, not through `SafeTerminal` (a bar is our own
    text, redrawn with carriage returns and cursor moves that must reach the terminal)."""
    return getattr(sys.stderr, "raw", sys.stderr)


def index_with_progress(
    db: str,
    docs_dir: DocsSource | str | Path | None,
    embedder: Embedder,
    settings: Settings,
    quiet: bool = False,
    replace: bool = False,
) -> tuple[RunSummary, dict | None]:
    """An incremental index run with a progress bar on stderr while it embeds (none when not a
    tty); with FIELDGUIDE_DATABASE_URL set, published to the fleet. Returns (summary, publish
    figures or None)."""
    from tqdm import tqdm

    from .wiring import index_docs

    bar = None

    def start(total: int):
        nonlocal bar
        if total:
            bar = tqdm(
                total=total,
                desc="Embedding",
                unit="text",
                file=progress_stream(),
                disable=quiet or None,
            )

    try:
        return index_docs(
            settings,
            db,
            docs_dir,
            embedder,
            replace=replace,
            on_embed_start=start,
            on_embedded=lambda n: bar and bar.update(n),
        )
    finally:
        if bar:
            bar.close()


@contextlib.contextmanager
def fleet_reindex_lock(settings: Settings):
    """With FIELDGUIDE_DATABASE_URL set, one index run at a time across the fleet (the lock a
    replica's /docs-reindex takes too)."""
    if not settings.database_url:
        yield
        return
    from index.pg import POOL_ERRORS, FleetError, connect, reindex_unlock, try_reindex_lock

    with connect(settings.database_url) as conn:
        if not try_reindex_lock(conn):
            raise FleetError("A reindex is already running in the fleet; try again when it ends")
        try:
            yield  # the lock ends with the connection at the latest
        finally:
            # released now: the server ends a closed connection's backend (and its locks) a
            # moment later, which a run started right after this one could still find holding it
            with contextlib.suppress(*POOL_ERRORS):  # a lost connection took the lock with it
                reindex_unlock(conn)


def cmd_index(args: argparse.Namespace, settings: Settings) -> int:
    from .wiring import docs_source

    db = args.db or settings.db
    source = docs_source(settings, db, args.docs_dir)
    with fleet_reindex_lock(settings):
        summary, published = index_with_progress(
            db, source, embedder_for(settings), settings, args.quiet, args.replace
        )
    result = {"source": source.identity, **summary.counts()}
    if published:
        result["published"] = {k: round(v, 3) for k, v in published.items()}
    if args.json:
        _print_json(result)
        return 0
    shown = source.identity if source.git else args.docs_dir or settings.docs
    print(f"Indexed {shown} into {db} ({summary.model})")
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


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
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


def cmd_intents(args: argparse.Namespace, settings: Settings) -> int:
    from index.store import load_intents, open_db

    db = open_db(args.db or settings.db, create=False)
    intents = load_intents(db)
    if args.describe:
        return describe_intents(db, intents, settings)
    if args.json:
        _print_json(intents)
        return 0
    if not intents:
        print("No intents: the index is empty. Run: fieldguide index DOCS_DIR")
        return 0
    # aligned for ordinary names; a longer one (an index built before names were checked) only
    # pushes its own line
    width = min(max(len(i["name"]) for i in intents), 24)
    print(f"{'intent':<{width}}  docs  chunks  description")
    for i in intents:
        print(f"{i['name']:<{width}}  {i['docs']:>4}  {i['chunks']:>6}  {i['description']}")
    return 0


def describe_intents(db: sqlite_utils.Database, intents: list[dict], settings: Settings) -> int:
    """Print an intents.yaml draft: intents that have a description keep theirs; the others get
    one drafted from their headings, by Claude when a key is set (FIELDGUIDE_ANSWER_MODEL)."""
    from index.store import chunk_headings
    from router.describe import draft_offline, draft_with_claude, intent_headings, to_yaml

    headings = intent_headings(chunk_headings(db))
    client = make_anthropic(settings)
    drafts = {}
    for i in intents:
        if i["description"]:
            drafts[i["name"]] = {"description": i["description"], "examples": i["examples"]}
        elif client is None:
            drafts[i["name"]] = draft_offline(headings.get(i["name"], []))
        else:
            drafts[i["name"]], note = draft_with_claude(
                client, settings.answer_model, i["name"], headings.get(i["name"], [])
            )
            if note:
                print(f"fieldguide: {note}", file=sys.stderr)
    source = "offline, from headings" if client is None else f"with {settings.answer_model}"
    print(to_yaml(drafts, source), end="")
    return 0


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


def question_of(args: argparse.Namespace) -> str:
    """The question given as arguments; ValueError when it is not valid text (Python hands over
    bytes that are not UTF-8 as lone surrogates, which no tokenizer or store takes)."""
    question = " ".join(args.question).strip()
    if bad := SURROGATES.search(question):
        code = ord(bad.group())
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise ValueError(
            f"the question is not valid UTF-8 text ({what}): check the terminal's or the"
            " script's encoding"
        )
    return question


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    question = question_of(args)
    if not question:
        print("fieldguide: the question is empty", file=sys.stderr)
        return 2
    decision = make_engine(settings, args.db).route(question, k=args.k)
    if args.json:
        _print_json(
            {
                "question": question,
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


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    from pathlib import Path

    from tqdm import tqdm

    from bot.evaluation.retrieval import ALL_MODES, format_table, load_questions, run_eval

    set_dir = Path(args.set_dir)
    qfile = Path(args.questions or set_dir / "questions.jsonl")
    if not qfile.is_file() or not (set_dir / "docs").is_dir():
        print(
            f"fieldguide: {set_dir} needs docs/ and questions.jsonl (or --questions FILE)",
            file=sys.stderr,
        )
        return 2
    questions = load_questions(qfile)
    embedder = embedder_for(settings)
    db = args.db or str(
        Path(".fieldguide/eval") / f"{set_dir.resolve().name}-{embedder.name.replace(':', '-')}.db"
    )
    summary, _ = index_with_progress(db, set_dir / "docs", embedder, settings)
    print(
        f"Index {db}: {summary.chunks} chunks ({summary.embedded} texts embedded now)",
        file=sys.stderr,
    )
    if args.answers:
        return _eval_answers(args, settings, set_dir, qfile, db)
    engine = make_engine(settings, db)
    loaded = engine.loaded()
    modes = args.modes or [m for m in ALL_MODES if m != "reranked" or engine.reranker]
    if "reranked" in modes and engine.reranker is None:
        print(
            "fieldguide: the reranked mode needs VOYAGE_API_KEY (and FIELDGUIDE_RERANK_MODEL)",
            file=sys.stderr,
        )
        return 2
    with tqdm(
        total=len(questions) * len(modes),
        desc="Scoring",
        unit="q",
        file=progress_stream(),
        disable=None,
    ) as bar2:
        result = run_eval(
            questions,
            loaded.searcher,
            embedder.embed_query,
            modes,
            loaded.router.route,
            bm25_weight=settings.bm25_weight,
            progress=bar2.update,
        )
    result = {
        "set": set_dir.resolve().name,
        **result,
        "embedder": embedder.name,
        "router": "claude" if engine.anthropic is not None else "offline",
        "reranker": engine.reranker.name if engine.reranker else None,
    }
    print(format_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nWrote {args.json}", file=sys.stderr)
    return 0


def _eval_answers(args, settings: Settings, set_dir, qfile, db: str) -> int:
    """`eval --answers`: the whole ask path on the set's questions and off-topic questions."""
    from pathlib import Path

    from tqdm import tqdm

    from bot.evaluation.answers import (
        format_summary,
        load_stopwords,
        run_answers,
        sample,
        split_offtopic,
    )
    from bot.evaluation.retrieval import load_items

    answerable, offtopic = split_offtopic(load_items(qfile))
    questions = sample(answerable, args.limit, args.seed)
    off_file = Path(args.offtopic or set_dir / "offtopic.jsonl")
    offtopic += load_items(off_file) if off_file.is_file() else []
    judge = None
    if args.judge:
        from bot.evaluation.judge import Judge

        from .wiring import make_anthropic

        client = make_anthropic(settings)
        if client is None:
            print(
                "fieldguide: --judge needs ANTHROPIC_API_KEY (Claude grades the answers)",
                file=sys.stderr,
            )
            return 2
        judge = Judge(client, args.judge_model or settings.judge_model, settings.timeout)
    pipeline = make_pipeline(settings, db)
    pipeline.state = None  # an eval run is not a user's question: nothing goes to the audit log
    pipeline.answer("warm up: load the model and the index")
    with tqdm(
        total=len(questions) + len(offtopic),
        desc="Asking",
        unit="q",
        file=progress_stream(),
        disable=None,
    ) as bar:
        result = run_answers(
            pipeline.answer,
            questions,
            offtopic,
            load_stopwords(set_dir),
            seed=args.seed,
            progress=bar.update,
            judge=judge,
        )
    name = set_dir.resolve().name
    result["summary"] = {
        "set": name,
        "sampled": args.limit is not None and args.limit < len(answerable),
        "seed": args.seed,
        "offline": pipeline.client is None,
        "embedder": pipeline.engine.embedder.name,
        "judge_model": judge.model if judge else None,
        **result["summary"],
    }
    print(format_summary(name, result["summary"]))
    if args.json:
        Path(args.json).write_text(
            json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        print(f"\nWrote {args.json}", file=sys.stderr)
    return 0


GAPS_ROWS = 100_000  # audit rows read at most by `gaps` (newest first)


def format_answer(ans: Answer) -> str:
    lines = [f"⚠ {ans.caveat}", ""] if ans.caveat else []
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


def scope_for(args: argparse.Namespace, settings: Settings):
    """The scope `ask --channel/--scope` searches (a router.engine.Scope), or None."""
    from .scopes import ScopeError
    from .wiring import make_scopes

    if not (args.channel or args.scope):
        return None
    scopes = make_scopes(settings, args.db)
    if scopes is None:
        raise ScopeError("--channel and --scope need FIELDGUIDE_SCOPES (a scopes file)")
    if args.channel:
        return scopes.for_channel(args.channel)
    found = scopes.by_key.get(args.scope) or scopes.by_key.get("#" + args.scope.lstrip("#"))
    if found is None:
        raise ScopeError(
            f"no scope {args.scope!r} in {settings.scopes}: it has {', '.join(scopes.by_key)}"
        )
    return found


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    from router.pipeline import QuestionError

    question = question_of(args)
    try:
        scope = scope_for(args, settings)
        ans = make_pipeline(settings, args.db).answer(question, scope=scope)
    except QuestionError as e:
        print(f"fieldguide: {e}", file=sys.stderr)
        return 2
    if args.json:
        out = ans.to_json()
        if args.show_context:
            out["context"] = ans.trace.hits
            out["passages"] = [p.__dict__ for p in ans.passages]
        _print_json(out)
        return 0
    if args.show_context:
        print("Retrieved:")
        for i, h in enumerate(ans.trace.hits, 1):
            print(f"  {i:>2}. {h['score']:.3f} {h['doc']} · {label(h['title'], h['heading_path'])}")
        print("Passages:")
        for p in ans.passages:
            print(f"  [{p.chunk_id}] {' '.join(p.text.split())[:160]}")
        print()
    print(format_answer(ans))
    return 0


def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    from index.store import open_db

    from .wiring import make_state

    if not settings.database_url:
        open_db(args.db or settings.db, create=False)  # a clear error when there is no index
    if args.stats:
        from .costs import format_stats, stats
        from .settings import parse_prices

        figures = stats(
            make_state(settings, args.db).usage_rows(args.since), parse_prices(settings.prices)
        )
        if args.json:
            _print_json(figures)
        else:
            print(format_stats(figures, args.since))
        return 0
    rows = make_state(settings, args.db).list_answers(args.since, args.decision, args.limit)
    if args.json:
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


def cmd_gaps(args: argparse.Namespace, settings: Settings) -> int:
    """The topics of the questions the docs did not answer well (bot/gaps.py)."""
    from index.store import load_owners

    from .gaps import find_topics
    from .gaps_report import render
    from .wiring import make_state

    engine = make_engine(settings, args.db)
    rows = make_state(settings, args.db).list_answers(args.since, None, GAPS_ROWS)
    rows_in = [r for r in rows if not args.intent or (r["intents"] or [""])[0] == args.intent]
    topics, info = find_topics(
        rows_in, engine.embedder, engine.loaded().searcher, load_owners(engine.db)
    )
    if args.html:
        title = "What the docs don't answer" + (f" · {args.intent}" if args.intent else "")
        Path(args.html).write_text(render(rows_in, topics, title), encoding="utf-8")
        print(f"Wrote {args.html}", file=sys.stderr)
    if args.json:
        _print_json({"topics": [t.to_json() for t in topics], **info})
        return 0
    print(
        f"{info['unanswered']} questions not answered well, in {len(topics)} topics"
        f" (average-linkage cut at cosine distance {info['cut']}, silhouette {info['silhouette']})"
    )
    for t in topics[: args.top]:
        print(f"\n{t.count:>4}  {t.questions[0]}")
        where = f"nearest doc {t.doc or '-'} · intent {t.intent or '-'}"
        print(f"      {where} · owner {t.owner or '-'}")
        for q in t.questions[1:]:
            print(f"        · {q}")
    return 0


def cmd_doctor(args: argparse.Namespace, settings: Settings | None) -> int:
    """One line per check; exit 1 when any check fails."""
    from .doctor import Check, run_checks

    if settings is None:  # main() could not load them: that is the finding
        checks = [Check("settings", "FAIL", str(args.settings_error))]
    else:
        checks = run_checks(settings, args.db or settings.db, args.docs or settings.docs)
    if args.json:
        _print_json([c.__dict__ for c in checks])
    else:
        for c in checks:
            print(f"{c.status:<4}  {c.name:<11}  {c.detail}")
    return 1 if any(c.status == "FAIL" for c in checks) else 0


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import logging

    from .health import Health, auth_test_slack, serve_health, socket_mode_slack
    from .logs import configure, say
    from .slack_app import SlackStartupError, build_bot, http_server

    configure(settings.log_level, settings.log_format)
    redact_logs(*settings.urls())  # the handlers configure added redact too
    # the pool would log each failed reconnection; bot/state/postgres.py says it once per outage
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    missing = [
        name
        for name, value in (
            ("SLACK_BOT_TOKEN", settings.slack_bot_token),
            (
                "SLACK_SIGNING_SECRET" if args.http else "SLACK_APP_TOKEN",
                settings.slack_signing_secret if args.http else settings.slack_app_token,
            ),
        )
        if not value
    ]
    if missing:
        print(
            f"fieldguide: set {' and '.join(missing)} (see README, 'Set up the Slack app')",
            file=sys.stderr,
        )
        return 2
    db = args.db or settings.db
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
            serve_health(health, settings.health_port, args.host)
        except OSError as e:  # in use, or a privileged port
            print(
                f"fieldguide: cannot serve /healthz on {args.host}:{settings.health_port}"
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
    if args.http:
        health.slack = auth_test_slack(app.client)
        say(f"fieldguide: serving Slack over HTTP at http://{args.host}:{args.http}/slack/events")
        http_server(app, settings.slack_signing_secret, args.host, args.http, health=health).run()
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


def cmd_calibrate(args: argparse.Namespace, settings: Settings) -> int:
    """Fit the answer decision on eval sets and write it (router/decide.py, decision.json)."""
    from pathlib import Path

    from bot.evaluation import calibrate
    from router.engine import Engine

    sets = [Path(d) for d in args.set_dirs]
    for set_dir in sets:
        if not (set_dir / "questions.jsonl").is_file() or not (set_dir / "docs").is_dir():
            print(f"fieldguide: {set_dir} needs docs/ and questions.jsonl", file=sys.stderr)
            return 2
    if len(sets) < 2:
        print(
            "fieldguide: calibrate needs two eval sets or more (one is left out)", file=sys.stderr
        )
        return 2
    embedder = embedder_for(settings)
    data = {}
    for set_dir in sets:
        name = set_dir.resolve().name
        db = str(Path(args.work) / f"{name}-{embedder.name.replace(':', '-')}.db")
        index_with_progress(db, set_dir / "docs", embedder, settings)
        print(f"Reading {name} ...", file=sys.stderr)
        engine = Engine(db, embedder)
        items = calibrate.load_set(set_dir)
        data[name] = calibrate.corpus_examples(name, items, engine, args.seed, args.headings)
    print(calibrate.report(data))
    body = calibrate.write_models(data, embedder.name, Path(args.write))
    print(f"wrote {args.write} ({sum(body['examples'].values())} examples)", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from bot.evaluation.retrieval import ALL_MODES

    p = argparse.ArgumentParser(
        prog="fieldguide",
        description=(
            "Answer questions from a folder of markdown docs, with citations;"
            " offline without API keys."
        ),
        epilog=(
            "Settings come from the environment and .env (see .env.example)."
            " Run 'fieldguide COMMAND --help' for details."
        ),
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str, func, db: bool = True):
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=func)
        if db:
            sp.add_argument(
                "--db", help="index file (default: FIELDGUIDE_DB, .fieldguide/index.db)"
            )
        return sp

    sp = add(
        "index",
        "Index a folder of markdown docs (incremental: only changed text is embedded).",
        cmd_index,
    )
    sp.add_argument(
        "docs_dir",
        metavar="DOCS_DIR",
        nargs="?",
        help="folder of *.md / *.markdown files with YAML front matter"
        " (default: FIELDGUIDE_DOCS, or the repository FIELDGUIDE_DOCS_GIT, pulled first)",
    )
    sp.add_argument(
        "--replace",
        action="store_true",
        help="index these docs even though the index was built from another source"
        " (its docs are replaced by these)",
    )
    sp.add_argument("--json", action="store_true", help="print the run summary as one JSON object")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")

    sp = add(
        "intents", "List the intents of the index with their doc and chunk counts.", cmd_intents
    )
    sp.add_argument("--json", action="store_true", help="print as JSON")
    sp.add_argument(
        "--describe",
        action="store_true",
        help="print a draft intents.yaml: descriptions from each intent's headings"
        " (written by Claude when ANTHROPIC_API_KEY is set)",
    )

    sp = add(
        "search",
        "Route a question and show the ranked chunks with their scores (no answer).",
        cmd_search,
    )
    sp.add_argument("question", nargs="+", help="the question (quote it or not)")
    sp.add_argument("--k", type=int, default=10, help="how many chunks (default 10)")
    sp.add_argument(
        "--json", action="store_true", help="print the routing decision and hits as JSON"
    )

    sp = add(
        "ask",
        "Answer a question from the docs, with numbered sources (offline without API keys).",
        cmd_ask,
    )
    sp.add_argument("question", nargs="+", help="the question (quote it or not)")
    sp.add_argument(
        "--json",
        action="store_true",
        help="print decision, text, citations, intents, offline, timings as JSON",
    )
    sp.add_argument(
        "--show-context",
        action="store_true",
        help="also show the retrieved chunks and extracted passages",
    )
    sp.add_argument(
        "--channel",
        help="answer as in this Slack channel (id, or #name) under FIELDGUIDE_SCOPES",
    )
    sp.add_argument("--scope", help="search only this entry of FIELDGUIDE_SCOPES (its key)")

    sp = add(
        "audit",
        "List recorded answers (newest first) with their decision, intent, timing and feedback.",
        cmd_audit,
    )
    sp.add_argument(
        "--since",
        type=since_arg,
        help="only answers on or after this ISO date/time (UTC unless it has a zone), e.g."
        " 2026-11-01 or 2026-11-01T09:30, or this long ago: 30m, 24h, 7d, 2w",
    )
    sp.add_argument(
        "--decision",
        choices=["ANSWER", "PARTIAL", "ABSTAIN"],
        type=str.upper,
        help="only this decision",
    )
    sp.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    sp.add_argument("--json", action="store_true", help="print the full records as JSON")
    sp.add_argument(
        "--stats",
        action="store_true",
        help="instead of the answers: questions, decisions, feedback, tokens and estimated"
        " cost by model (prices: FIELDGUIDE_PRICES) over --since",
    )

    sp = add(
        "gaps",
        "Group the questions the docs did not answer well (not in the docs, partial, 👎, handed"
        " to a person) into topics, with counts, examples, the nearest doc and its owner.",
        cmd_gaps,
    )
    sp.add_argument(
        "--since",
        type=since_arg,
        help="only questions on or after this ISO date/time (UTC unless it has a zone), or this"
        " long ago: 30m, 24h, 7d, 2w",
    )
    sp.add_argument("--intent", help="only questions routed to this intent")
    sp.add_argument("--top", type=int, default=10, help="topics printed (default 10)")
    sp.add_argument("--json", action="store_true", help="print every topic as JSON")
    sp.add_argument("--html", metavar="FILE", help="also write a self-contained report page")

    sp = add(
        "doctor",
        "Check settings, the index, the docs folder and the services whose keys are set;"
        " one line each, exit 1 if any fails.",
        cmd_doctor,
    )
    sp.add_argument(
        "--docs", help="docs folder to check (default: FIELDGUIDE_DOCS, or FIELDGUIDE_DOCS_GIT)"
    )
    sp.add_argument("--json", action="store_true", help="print the checks as JSON")

    sp = add(
        "serve",
        "Run the Slack bot: Socket Mode (SLACK_APP_TOKEN) or, with --http PORT, an HTTP endpoint.",
        cmd_serve,
    )
    sp.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="serve /slack/events on this port (signatures checked)",
    )
    sp.add_argument(
        "--host",
        default="0.0.0.0",
        help="address to bind with --http and for FIELDGUIDE_HEALTH_PORT (default 0.0.0.0)",
    )

    sp = add(
        "db",
        "PostgreSQL for a fleet (FIELDGUIDE_DATABASE_URL): create or migrate the schema.",
        cmd_db,
        db=False,
    )
    sp.add_argument("action", choices=["upgrade"], help="upgrade: apply pending migrations")

    sp = add(
        "calibrate",
        "Fit the answer decision on eval sets (leave-one-set-out figures) and write it.",
        cmd_calibrate,
        db=False,
    )
    sp.add_argument("set_dirs", nargs="+", metavar="SET_DIR", help="eval sets (shared/eval format)")
    sp.add_argument(
        "--write",
        default=str(Path(__file__).resolve().parents[1] / "router" / "decision.json"),
        help="the decision file to write (default: the package's router/decision.json)",
    )
    sp.add_argument("--seed", type=int, default=0, help="seed of the headings sampled (default 0)")
    sp.add_argument(
        "--headings", type=int, default=150, help="headings read as questions per set (default 150)"
    )
    sp.add_argument(
        "--work", default=".fieldguide/eval", help="folder of the sets' indexes (as for eval)"
    )
    sp = add(
        "eval",
        "Index an eval set (incrementally) and score retrieval and routing on its questions.",
        cmd_eval,
    )
    sp.add_argument(
        "set_dir",
        metavar="SET_DIR",
        help="a folder with docs/ and questions.jsonl (see shared/eval/README.md)",
    )
    sp.add_argument(
        "--questions", help="a questions file kept elsewhere (paths relative to SET_DIR/docs)"
    )
    sp.add_argument("--json", metavar="OUT", help="also write all figures to this JSON file")
    sp.add_argument(
        "--modes",
        nargs="+",
        metavar="MODE",
        choices=ALL_MODES,
        help=f"{' '.join(ALL_MODES)} (default: all; reranked only with VOYAGE_API_KEY)",
    )
    sp.add_argument(
        "--answers",
        action="store_true",
        help="score whole answers (the ask path) instead of retrieval: abstain and PARTIAL"
        " rates, token recall/precision, gold cited, off-topic abstain, length, latency",
    )
    sp.add_argument(
        "--offtopic",
        metavar="FILE",
        help="with --answers: off-topic questions (default: SET_DIR/offtopic.jsonl if present)",
    )
    sp.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="with --answers: N answerable questions sampled with --seed (default: all)",
    )
    sp.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed (default 0)")
    sp.add_argument(
        "--judge",
        action="store_true",
        help="with --answers (needs ANTHROPIC_API_KEY): Claude grades each answer's faithfulness"
        " to its cited passages and correctness against the reference answer",
    )
    sp.add_argument(
        "--judge-model", metavar="MODEL", help="the grading model (default: FIELDGUIDE_JUDGE_MODEL)"
    )
    return p


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
    """The `fieldguide` command. Output piped into a reader that stops early (`| head -1`) ends
    quietly, as a shell tool does, instead of with a BrokenPipeError trace."""
    try:
        try:
            args = build_parser().parse_args(argv)
            if getattr(args, "json", None) is True:  # for programs: JSON escapes what it must
                return run(args)
            # for people: text from questions, docs or the model cannot drive their terminal
            with (
                contextlib.redirect_stdout(SafeTerminal(sys.stdout)),
                contextlib.redirect_stderr(SafeTerminal(sys.stderr)),
            ):
                return run(args)
        finally:
            sys.stdout.flush()  # buffered output (argparse's --help too) meets the pipe here
    except BrokenPipeError:
        # stdout's buffer cannot be written at exit either: point it at /dev/null first
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def run(args: argparse.Namespace) -> int:
    from index.embedders import EmbeddingError
    from index.indexer import IndexError_
    from index.search import IndexChanged
    from index.store import IndexMissing, ModelMismatch

    try:
        settings = Settings.load()
    except SettingsError as e:
        if args.command != "doctor":
            print(f"fieldguide: {e}", file=sys.stderr)
            return 2
        args.settings_error = e
        return cmd_doctor(args, None)
    redact_logs(*settings.urls())  # no log line shows a URL's password
    fleet_errors: tuple[type[Exception], ...] = ()  # psycopg is loaded only in fleet mode
    if settings.database_url:
        from index.pg import FleetError

        fleet_errors = (FleetError,)
    try:
        return args.func(args, settings)
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
        print(f"fieldguide: {database_error(args.db or settings.db, e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "fieldguide: interrupted; the index still holds its last complete run", file=sys.stderr
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
