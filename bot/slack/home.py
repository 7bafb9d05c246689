"""The App Home tab: what an admin (FIELDGUIDE_ADMINS) or a docs owner sees when they open it —
the index (docs, chunks, the last refresh and its result), the last 7 days (questions, answered /
partial / not in the docs, 👍 / 👎), the top gaps of their intents (bot/gaps.py), and for admins a
reindex button (the same lock as /docs-reindex). Anyone else gets a short how-to."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..gaps import find_topics, top_intent
from .slack_format import escape, within_limits

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


log = logging.getLogger(__name__)


class GapsCache:
    """The Home tab's top gaps, computed once per index generation and audit state: kept while
    the generation, whose questions are seen (admin, or an owner's intents) and the newest of
    those questions stay the same; a new generation drops every entry."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self.entries: dict[tuple, list] = {}
        self.lock = threading.Lock()

    def get(self, generation: int, key: tuple, compute: Callable[[], list]) -> list:
        with self.lock:
            if generation != self.generation:
                self.generation, self.entries = generation, {}
            if key in self.entries:
                return self.entries[key]
        found = compute()
        log.debug("Home tab gaps found for generation %s, %s", generation, key[0])
        with self.lock:
            if generation == self.generation:
                self.entries[key] = found
        return found


def home_view(user: str, admin: bool, guide: Guide, cache: GapsCache | None = None) -> dict:
    """The Home tab's view for `user`: `guide`'s index, audit trail and owners (`cache`: the
    gaps already found)."""
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
    # the newest HOME_QUESTIONS only (~2 s at 500, off Bolt's threads: HomeTabs)
    loaded = engine.loaded()

    def gaps() -> list:
        topics, _ = find_topics(
            rows,
            engine.embedder,
            loaded.searcher,
            owners,
            most=HOME_QUESTIONS,
        )
        return topics

    newest = max((r.get("id") or 0 for r in rows), default=0)
    key = ("admin" if admin else tuple(sorted(mine)), len(rows), newest)
    topics = cache.get(loaded.generation, key, gaps) if cache is not None else gaps()
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
    return {"type": "home", "blocks": within_limits(blocks, MAX_BLOCKS)}


class HomeTabs:
    """Builds and publishes Home tabs on a thread of its own, one at a time, so an opened tab
    never holds one of Bolt's listener threads (an admin's tab reads the gaps, seconds of work:
    five opens held Bolt's threads and delayed the next question by 36 s, and clicks went
    unacknowledged). Opens of one user while their tab is waiting are one build."""

    def __init__(self, build: Callable[[str], dict], publish: Callable[[Any, str, dict], None]):
        self.build, self.publish = build, publish
        self.pending: dict[str, Any] = {}  # user -> the client to publish with, in open order
        self.wake = threading.Condition()
        self.closed = False
        self.thread: threading.Thread | None = None

    def open(self, client: Any, user: str) -> None:
        """Queue `user`'s tab; returns at once."""
        with self.wake:
            self.pending[user] = client
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="home-tabs", daemon=True)
                self.thread.start()
            self.wake.notify()

    def close(self) -> None:
        with self.wake:
            self.closed = True
            self.wake.notify()

    def _run(self) -> None:
        while True:
            with self.wake:
                while not self.pending and not self.closed:
                    self.wake.wait()
                if self.closed:
                    return
                user = next(iter(self.pending))
                client = self.pending.pop(user)
            started = time.monotonic()
            try:
                view = self.build(user)
            except Exception:  # one tab must not stop the others
                log.exception("could not build the Home tab for %s", user)
                continue
            log.debug("Home tab for %s built in %.2f s", user, time.monotonic() - started)
            self.publish(client, user, view)
