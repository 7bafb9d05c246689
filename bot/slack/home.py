"""The App Home tab: what an admin (FIELDGUIDE_ADMINS) or a docs owner sees when they open it —
the index (docs, chunks, the last refresh and its result), the last 7 days (questions, answered /
partial / not in the docs, 👍 / 👎), the top gaps of their intents (bot/gaps.py), and for admins a
reindex button (the same lock as /docs-reindex). Anyone else gets a short how-to."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ..gaps import find_topics, top_intent
from .slack_format import escape

if TYPE_CHECKING:
    from .guide import Guide

REINDEX_ACTION = "home_reindex"
DAYS = 7
TOP_GAPS = 5
MAX_BLOCKS = 100  # Slack's limit for a view
HOME_QUESTIONS = 500  # unanswered questions clustered for the tab (bench/gaps.py)
HOW_TO = (
    "Mention me in a channel, or send me a direct message, with a question about the docs:"
    " I answer from them only, with links to the sections I used."
)


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


def owned_intents(user: str, owners: tuple[dict[str, str], dict[str, str]]) -> set[str]:
    """The intents whose owner (intents.yaml's, the deployment's) is `user`. Owning a doc gives
    none: any doc may join any intent, so its front matter cannot make its author see the
    questions of an intent it joins."""
    return {i for i, o in owners[1].items() if o == user}


def figures(rows: list[dict]) -> dict:
    decisions = Counter(r["decision"] for r in rows)
    votes = Counter(v for r in rows for v in (r.get("feedback") or {}).values())
    return {
        "questions": len(rows),
        "answered": decisions["ANSWER"],
        "partial": decisions["PARTIAL"],
        "not_in_docs": decisions["ABSTAIN"],
        "helpful": votes["helpful"],
        "not_helpful": votes["not_helpful"],
    }


def home_view(user: str, admin: bool, guide: Guide) -> dict:
    """The Home tab's view for `user`: `guide`'s index, audit trail and owners."""
    state, engine = guide.state, guide.engine
    owners = guide.owners()
    mine = owned_intents(user, owners)
    if not admin and not mine:
        return {"type": "home", "blocks": [section(f"*fieldguide*\n{HOW_TO}")]}
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": "fieldguide"}},
        section(HOW_TO),
        {"type": "divider"},
    ]
    docs, chunks, run = guide.index_status()
    if run is None:
        last = "never refreshed"
    elif run["status"] != "ok":
        last = (
            f"last refresh {run['finished']}: *failing* since {run['failing_since']}"
            f" ({escape(run['error'] or 'no reason recorded')}); answering from the last good"
            f" refresh ({run['last_ok'] or 'none yet'})"
        )
    else:
        last = (
            f"last refresh {run['finished']}: *ok* (added {run['added']},"
            f" changed {run['changed']}, removed {run['removed']})"
        )
    blocks.append(section(f"*The index*\n{docs} docs · {chunks} chunks · {last}"))
    since = (datetime.now(UTC) - timedelta(days=DAYS)).isoformat(timespec="seconds")
    rows = state.list_answers(since, None, 100_000)
    if not admin:  # an owner sees the questions of their intents
        rows = [r for r in rows if top_intent(r) in mine]
    f = figures(rows)
    yours = "" if admin else f" (your intents: {', '.join(sorted(mine))})"
    blocks.append(
        section(
            f"*The last {DAYS} days*{yours}\n"
            f"{f['questions']} questions · {f['answered']} answered · {f['partial']} partial ·"
            f" {f['not_in_docs']} not in the docs · 👍 {f['helpful']} · 👎 {f['not_helpful']}"
        )
    )
    # the newest HOME_QUESTIONS only: the tab is built while its opener waits (~2 s at 500)
    searcher = engine.loaded().searcher
    topics, _ = find_topics(
        rows,
        engine.embedder,
        searcher,
        owners,
        most=HOME_QUESTIONS,
        names_weight=engine.bm25_weight,
    )
    if topics:
        lines = [
            f"• *{t.count}* × “{escape(t.questions[0])}” — {escape(t.doc or '-')}"
            f" ({escape(t.intent or '-')})"
            for t in topics[:TOP_GAPS]
        ]
        blocks.append(section("*Top gaps*\n" + "\n".join(lines)))
    else:
        blocks.append(section("*Top gaps*\nNone: every question was answered."))
    if admin:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": REINDEX_ACTION,
                        "text": {"type": "plain_text", "text": "Reindex the docs"},
                        "style": "primary",
                    }
                ],
            }
        )
    return {"type": "home", "blocks": blocks[:MAX_BLOCKS]}
