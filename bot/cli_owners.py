"""`fieldguide gaps`' text, `fieldguide stale` and `fieldguide drafts`: what a docs owner reads at
the command line (bot/cli.py adds the commands)."""

from __future__ import annotations

import click

from . import api
from .cli_run import db_option, guarded, json_flag, print_json, since_option
from .gaps import KINDS, Topic
from .gaps_report import plural
from .settings import Settings


def print_gaps(topics: list[Topic], info: dict, top: int) -> None:
    """The topics as an owner reads them: count, what to do, nearest doc, owner, state."""
    print(
        f"{plural(info['unanswered'], 'question')} not answered well, in"
        f" {plural(len(topics), 'topic')} (questions about the same thing grouped together),"
        " the likeliest missing docs first"
    )
    if info["small_talk"]:
        print(f"({plural(info['small_talk'], 'message')} of small talk left out)")
    for t in topics[:top]:
        print(f"\n{t.count:>4}  {t.questions[0]}")
        answered = t.count - t.unsure
        counts = f"{plural(answered, 'question')} the docs did not answer" + (
            f", {t.unsure} answered unsure" if t.unsure else ""
        )
        print(f"      {counts}: {KINDS[t.kind]}")
        for said in t.missing:
            print(f"      the answer said: “{said}”")
        doc = t.doc + (f" › {t.section}" if t.section else "") if t.doc else "-"
        near = "closest section" if t.kind in ("missed", "unsure") else "nearest doc"
        state = t.state + (f" (answered {t.before} before, {t.after} after)" if t.after else "")
        where = f"{near} {doc} · intent {t.intent or '-'} · owner {t.owner or '-'} · {state}"
        print(f"      {where}" + (f"\n      {t.url}" if t.url and t.url != t.doc else ""))
        for q in t.questions[1:]:
            print(f"        · {q}")


@click.command(
    "stale",
    help="List the stale docs (review overdue, or a watched path changed after them), the"
    " most damaging first: answers that cited them lately, 👎 first.",
    short_help="List stale docs, the most damaging first.",
)
@since_option("count the answers since this ISO date/time or this long ago (default 30d)")
@json_flag("print the stale docs as JSON")
@db_option
@guarded
def stale(settings: Settings, since: str | None, as_json: bool, db: str) -> int:
    found = api.stale(db, since=since, settings=settings)
    if as_json:
        print_json([s.to_json() for s in found])
        return 0
    if not found:
        print("No stale docs.")
        return 0
    print(f"{'👎':>3} {'cited':>5}  doc · owner · why it is stale")
    for s in found:
        owner = f"{s.owner} ({s.owner_source})" if s.owner else "nobody"
        print(f"{s.not_helpful:>3} {s.cited:>5}  {s.path} · {owner}")
        for reason in s.reasons:
            print(f"            {reason}")
    return 0


@click.command(
    "drafts",
    help="List the doc changes drafted from people's answers in hand-off threads: the branch"
    " (pushed or not) or the patch kept, the doc and section, who made it.",
    short_help="List the doc changes drafted from hand-off replies.",
)
@json_flag("print the drafts as JSON (patches whole)")
@db_option
@guarded
def drafts(settings: Settings, as_json: bool, db: str) -> int:
    found = api.drafts(db, settings=settings)
    if as_json:
        print_json(found)
        return 0
    if not found:
        print("No drafts yet.")
        return 0
    for d in found:
        where = (
            f"branch {d['branch']}" + (" (pushed)" if d["pushed"] else " (not pushed: patch kept)")
            if d["branch"]
            else "patch kept (no git working copy)"
        )
        section = f" › {d['section']}" if d["section"] else ""
        print(f"#{d['id']} {d['created'][:10]}  {d['doc']}{section}  {where}  by {d['by_user']}")
    return 0
