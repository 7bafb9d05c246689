"""The owners' loop in Slack: a person's reply in a hand-off thread offered to the owner as a doc
draft (one button: bot/drafts.py), the askers told once their question's topic is fixed (after
bot/closure.py's replay), and the weekly note to each owner (bot/weekly.py), sent once per owner
and week across a fleet (a row claimed in the audit's database: bot/state/loop.py). `OwnersWorker`
runs the replay after a reindex that changed docs, and the notes and the telling on a schedule."""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import UTC, datetime
from typing import Any

from slack_sdk import WebClient

from index.loader import is_slack_owner
from index.store import owner_of

from ..closure import changed_section, replay
from ..drafts import DraftError, make_draft
from ..owners import stale_docs
from ..topics import gap_topics, keep, topic_holding
from ..weekly import blocks, due, notes, period_start, week_of
from .answers import SLACK_FAILURES
from .guide import Guide
from .slack_format import escape, safe_url
from .slack_rules import is_user_message, plain_text

log = logging.getLogger(__name__)

DRAFT_ACTION = "draft_from_reply"
CHECK_SECONDS = 3600.0  # how often the worker looks for notes due and askers to tell
# a button's value: answer id | channel | thread ts
DRAFT_VALUE = re.compile(r"([1-9][0-9]{0,17})\|([A-Z0-9]{2,30})\|([0-9]{1,12}\.[0-9]{1,8})")
OFFER = (
    "{owner}: {replier} answered this question here. Turn the answer into a draft change to the"
    " docs ({place})? It goes on a branch for review, never straight into the docs."
)
NOT_OWNER = "Only the owner of these docs ({owner}) or an admin can turn this answer into a draft."
NO_REPLY = "I found no answer from a person in this thread to draft from."


def who(owner: str) -> str:
    """How Slack shows an owner: <@U…>, <!subteam^S…>, <#C…> or #name (a plain name as it is)."""
    if not is_slack_owner(owner):
        return owner
    if owner[0] in "UW":
        return f"<@{owner}>"
    if owner[0] == "S":
        return f"<!subteam^{owner}>"
    return owner if owner.startswith("#") else f"<#{owner}>"


def answered_handoff(guide: Guide, event: dict, bot_user: str) -> dict | None:
    """The hand-off whose thread this message answers: a person other than the asker replying in
    the asker's thread, or in the thread of the hand-off's message in the owners' channel."""
    thread, channel = event.get("thread_ts") or "", event.get("channel") or ""
    if not thread or thread == event.get("ts") or not is_user_message(event, bot_user):
        return None
    found = guide.state.loop.handoff_in_thread(channel, thread)
    if found is None or found["user"] == event.get("user"):
        return None
    return found


def place_of(row: dict) -> str:
    hits = row.get("hits") or []
    if not hits:
        return "the nearest doc"
    return hits[0]["doc"] + (f" › {hits[0]['section']}" if hits[0].get("section") else "")


def offer_draft(client: WebClient, guide: Guide, event: dict, handoff: dict) -> None:
    """Offer the owner, once per hand-off, a button that drafts a doc change from this reply."""
    loop, answer_id = guide.state.loop, handoff["answer_id"]
    if not loop.claim("offer", str(answer_id)):
        return
    row = guide.state.get_answer(answer_id) or {}
    channel, thread = event["channel"], event["thread_ts"]
    text = OFFER.format(
        owner=who(handoff["owner"]), replier=f"<@{event['user']}>", place=escape(place_of(row))
    )
    try:
        client.chat_postMessage(
            channel=channel,
            thread_ts=thread,
            text=text,
            blocks=[
                {"type": "section", "text": {"type": "mrkdwn", "text": text}},
                {
                    "type": "actions",
                    "block_id": f"draft-{answer_id}",
                    "elements": [
                        {
                            "type": "button",
                            "action_id": DRAFT_ACTION,
                            "style": "primary",
                            "text": {"type": "plain_text", "text": "Draft a doc change"},
                            "value": f"{answer_id}|{channel}|{thread}",
                        }
                    ],
                },
            ],
        )
    except SLACK_FAILURES as e:
        log.warning("could not offer a draft for answer %s: %s", answer_id, e)
        loop.release("offer", str(answer_id))


def replies_in(
    client: WebClient, channel: str, thread: str, asker: str, bot_user: str
) -> list[str]:
    """The people's replies in the thread: every message after its first from someone other than
    the asker and the bot, as they typed it."""
    out: list[str] = []
    cursor = None
    for _ in range(5):  # 5 pages of 200: more than any hand-off thread
        page = client.conversations_replies(channel=channel, ts=thread, limit=200, cursor=cursor)
        for m in page.get("messages") or []:
            person = is_user_message(m, bot_user) and m.get("user") != asker
            if m.get("ts") != thread and person and (text := plain_text(m.get("text", ""))):
                out.append(text)
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            break
    return out


def draft_from_reply(client: WebClient, guide: Guide, value: str, user: str, bot_user: str) -> str:
    """The draft button's click: the draft made and stored, its topic marked drafted; what to tell
    the clicker."""
    m = DRAFT_VALUE.fullmatch(value)
    if not m:
        return "That button is no longer valid."
    answer_id, channel, thread = int(m[1]), m[2], m[3]
    handoff = guide.state.loop.handoff_in_thread(channel, thread)
    row = guide.state.get_answer(answer_id)
    if handoff is None or handoff["answer_id"] != answer_id or row is None:
        return "That question is no longer on record, so I can't draft from it."
    owner = handoff["owner"]
    admin = user in guide.settings.admin_ids
    # a person owner presses it themselves; of a group or channel, whoever answered for them
    if not admin and (owner[0] in "UW" and user != owner or user == handoff["user"]):
        return NOT_OWNER.format(owner=who(owner))
    replies = replies_in(client, channel, thread, handoff["user"] or "", bot_user)
    if not replies:
        return NO_REPLY
    hits = row.get("hits") or []
    if not hits:
        return "The answer looked at no doc, so I don't know which doc to change."
    try:
        draft = make_draft(
            guide.settings, row, hits[0].get("section") or "", hits[0]["doc"], replies,
            guide.anthropic,
        )  # fmt: skip
    except DraftError as e:
        return f":warning: {e}"
    topic = topic_holding(guide, answer_id)
    topic_id = keep(guide, topic, "drafted") if topic is not None else None
    guide.state.loop.record_draft(
        {
            "topic_id": topic_id,
            "answer_id": answer_id,
            "doc": draft.doc,
            "section": draft.section,
            "branch": draft.branch,
            "commit_sha": draft.commit_sha,
            "pushed": int(draft.pushed),
            "patch": draft.patch,
            "by_user": user,
            "replier": "",
        }
    )
    if draft.pushed:
        return (
            f"Drafted: branch `{draft.branch}` pushed to the docs repository, changing"
            f" {escape(draft.doc)}. Review it and merge it; the next reindex checks the topic."
        )
    if draft.branch:
        return (
            f"Drafted on branch `{draft.branch}`, but I may not push to the docs repository:"
            " the patch is kept (`fieldguide drafts --json`)."
        )
    return "Drafted as a patch of the docs folder (`fieldguide drafts --json`)."


def tell(client: WebClient, guide: Guide) -> int:
    """Tell the askers (and whoever marked the answer 👎) of every fixed topic's questions, once
    each across a fleet, in their thread, with a link to the section that changed; how many."""
    loop, told = guide.state.loop, 0
    for t in loop.topics():
        if t["state"] != "fixed":
            continue
        section = changed_section(loop.replays(t["id"]))
        if section is None:
            continue
        url = safe_url(section["url"])
        where = f"<{url}|{escape(section['section'])}>" if url else escape(section["section"])
        for answer_id in t["ids"]:
            row = guide.state.get_answer(answer_id)
            if row is None or not reachable(row) or not loop.claim("told", str(answer_id)):
                continue
            down = [u for u, v in (row.get("feedback") or {}).items() if v == "not_helpful"]
            people = " ".join(f"<@{u}>" for u in dict.fromkeys([row.get("user") or "", *down]) if u)
            asked = escape(" ".join(row["question"].split())[:300])
            try:
                client.chat_postMessage(
                    channel=row["channel"],
                    thread_ts=None if row["channel"][0] == "D" else row["thread_ts"],
                    text=f"{people} The docs now answer “{asked}”: see {where}.".strip(),
                    unfurl_links=False,
                )
                told += 1
            except SLACK_FAILURES as e:
                log.warning("could not tell the asker of answer %s: %s", answer_id, e)
                loop.release("told", str(answer_id))
    return told


def reachable(row: dict) -> bool:
    """Asked in Slack, where the asker can be told: a channel's thread or a DM."""
    channel = row.get("channel") or ""
    return channel[:1] in ("C", "G") and bool(row.get("thread_ts")) or channel[:1] == "D"


def send_weekly(client: WebClient, guide: Guide, now: datetime | None = None) -> int:
    """This week's note to each owner Slack can reach (a person by DM, a channel in it; a user
    group cannot be), once per owner and week across a fleet; how many were sent."""
    now = now or datetime.now(UTC)
    if not due(guide.settings.weekly_note, now):
        return 0
    week, loop, owners, docs = week_of(now), guide.state.loop, guide.owners(), guide.docs()
    owners_of = {
        d["path"]: o
        for d in docs
        if (o := owner_of(owners, d["path"], d["intent"])) and is_slack_owner(o) and o[0] != "S"
    }
    if not owners_of:
        return 0
    rows = guide.state.list_answers(period_start(now), None, 100_000)
    topics = [t for t in gap_topics(guide)[0] if t.doc in owners_of]
    for t in topics:
        if t.topic_id is None:  # kept, so its "Won't fix" button names it
            keep(guide, t, t.state)
    sent = 0
    for note in notes(owners_of, rows, topics, stale_docs(docs, rows, now), loop.drafts()):
        if not loop.claim("note", f"{week}:{note.owner}"):
            continue
        made = blocks(note, week)
        try:
            client.chat_postMessage(
                channel=note.owner, text=f"Your docs this week ({week})", blocks=made
            )
            sent += 1
        except SLACK_FAILURES as e:
            log.warning("could not send the weekly note to %s: %s", note.owner, e)
            loop.release("note", f"{week}:{note.owner}")
    return sent


def set_wontfix(guide: Guide, value: str, user: str) -> str:
    """The "Won't fix" button: the topic's state, set by its owner (or an admin)."""
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        return "That button is no longer valid."
    topic = next((t for t in guide.state.loop.topics() if t["id"] == int(value)), None)
    if topic is None:
        return "That topic is no longer on record."
    admin = user in guide.settings.admin_ids
    if (
        not admin
        and topic["owner"] != user
        and owner_of(guide.owners(), topic["doc"], None) != user
    ):
        return NOT_OWNER.format(owner=who(topic["owner"] or "its owner"))
    guide.state.loop.set_state(int(value), "wontfix")
    return "Marked won't fix: it leaves your weekly note; `fieldguide gaps` still lists it."


class OwnersWorker:
    """One background thread: after a reindex that changed docs, the replay and the telling;
    every CHECK_SECONDS (the first one period after the start), the weekly notes due and any
    asker not told yet."""

    def __init__(self, client: WebClient, guide: Guide, every: float = CHECK_SECONDS):
        self.client, self.guide, self.every = client, guide, every
        self._changed: set[str] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="owners", daemon=True)

    def start(self) -> OwnersWorker:
        self._thread.start()
        return self

    def after_reindex(self, changed: set[str]) -> None:
        """A reindex changed these docs: replay the open topics soon."""
        with self._lock:
            self._changed |= changed
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        last = time.monotonic()  # the first scheduled turn comes one period after the start
        while not self._stop.is_set():
            self._wake.wait(max(0.0, self.every - (time.monotonic() - last)))
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                changed, self._changed = self._changed, set()
            scheduled = time.monotonic() - last >= self.every
            try:
                if changed:
                    replay(self.guide, changed)
                    tell(self.client, self.guide)
                if scheduled:
                    last = time.monotonic()
                    tell(self.client, self.guide)
                    send_weekly(self.client, self.guide)
            except Exception:  # the next turn tries again
                log.exception("the owners' loop failed a turn")


def summary_changed(summary: Any) -> set[str]:
    """The docs an index run added or changed."""
    return set(summary.added) | set(summary.changed)
