"""The weekly note to each docs owner, as Slack Block Kit: their docs' questions of the week with
why each was not answered well (not in the docs, partly answered, 👎, handed to a person), the
gap topics nearest their docs (with a "Won't fix" button), what went stale, and the drafts
waiting for them. Built within Slack's limits (50 blocks a message, 3,000 characters of section
text, 150 of a header); a question asked in a direct message is counted, never quoted."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .gaps import KINDS, Topic, asked_privately, evidence, unanswered
from .owners import StaleDoc, cited_docs

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
SHOWN = 8  # questions, topics, stale docs and drafts listed per part (the rest counted)
WONTFIX = "topic_wontfix"  # the button's action id (bot/slack/listeners/owners.py)
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def week_of(now: datetime) -> str:
    """The ISO week a note belongs to: "2026-W48"."""
    year, week, _ = now.isocalendar()
    return f"{year}-W{week:02d}"


def due(day: str, now: datetime) -> bool:
    """Whether this week's note is due: on or after its weekday (FIELDGUIDE_WEEKLY_NOTE)."""
    return day in WEEKDAYS and now.weekday() >= WEEKDAYS.index(day)


def period_start(now: datetime) -> str:
    return (now - timedelta(days=7)).isoformat(timespec="seconds")


@dataclass
class Note:
    owner: str
    docs: set[str]
    rows: list[dict] = field(default_factory=list)  # the week's answers citing or near their docs
    topics: list[Topic] = field(default_factory=list)
    stale: list[StaleDoc] = field(default_factory=list)
    drafts: list[dict] = field(default_factory=list)


def why(row: dict) -> str:
    """Why an answer was not a good one, in words."""
    if "not_helpful" in (row.get("feedback") or {}).values():
        return "marked 👎"
    if row.get("handoff"):
        return "handed to a person"
    return {"ABSTAIN": "not in the docs", "PARTIAL": "partly answered"}.get(row["decision"], "")


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def section(text: str, accessory: dict | None = None) -> dict:
    block: dict = {"type": "section", "text": {"type": "mrkdwn", "text": cut(text, MAX_SECTION)}}
    if accessory:
        block["accessory"] = accessory
    return block


def lines_block(title: str, lines: list[str], total: int, more: str) -> dict:
    """One section: a bold title and lines, as many as fit, then how many more and where."""
    text, shown = f"*{title}*", 0
    for line in lines:
        if len(text) + len(line) + 200 > MAX_SECTION:
            break
        text += "\n" + line
        shown += 1
    if total > shown:
        text += f"\n_…and {total - shown} more: {more}_"
    return section(text)


def questions_part(note: Note) -> list[dict]:
    # a 👎 or a hand-off (a person said it did not do) first, then refusals, then partial answers
    rows = sorted((r for r in note.rows if unanswered(r)), key=lambda r: -evidence(r))
    cited = len(note.rows)
    down = sum("not_helpful" in (r.get("feedback") or {}).values() for r in note.rows)
    summary = section(
        f"{cited} answers used your docs this week; {len(rows)} were not answered well"
        f" ({down} marked 👎)."
    )
    if not rows:
        return [summary]
    lines = []
    for r in rows[:SHOWN]:
        asked = (
            "_(asked in a direct message)_"
            if asked_privately(r)
            else f"“{escape(cut(' '.join(r['question'].split()), 200))}”"
        )
        lines.append(f"• {asked} — {why(r)}")
    return [
        summary,
        lines_block("Questions not answered well", lines, len(rows), "fieldguide audit"),
    ]


def topics_part(note: Note) -> list[dict]:
    blocks: list[dict] = []
    if not note.topics:
        return blocks
    blocks.append(section(f"*Gaps nearest your docs* ({len(note.topics)})"))
    for t in note.topics[:SHOWN]:
        place = f"{t.doc} › {t.section}" if t.section else t.doc
        text = (
            f"*{t.count}× “{escape(cut(t.questions[0], 200))}”*\n{KINDS[t.kind]}"
            + "".join(f"\n_The answer said:_ “{escape(cut(m, 200))}”" for m in t.missing[:1])
            + f"\n{escape(cut(place, 300))} · {t.state}"
        )
        button = None
        if t.topic_id is not None and t.state in ("open", "drafted"):
            button = {
                "type": "button",
                "action_id": WONTFIX,
                "text": {"type": "plain_text", "text": "Won't fix"},
                "value": str(t.topic_id),
            }
        blocks.append(section(text, button))
    if len(note.topics) > SHOWN:
        blocks.append(section(f"_…and {len(note.topics) - SHOWN} more: fieldguide gaps_"))
    return blocks


def stale_part(note: Note) -> list[dict]:
    if not note.stale:
        return []
    lines = [
        f"• {escape(s.path)} — {escape('; '.join(s.reasons))}"
        + (f" ({s.cited} answers cited it, {s.not_helpful} 👎)" if s.cited else "")
        for s in note.stale
    ]
    return [lines_block("Stale docs", lines, len(lines), "fieldguide stale")]


def drafts_part(note: Note) -> list[dict]:
    if not note.drafts:
        return []
    lines = [
        f"• {escape(d['doc'])}"
        + (f" › {escape(d['section'])}" if d["section"] else "")
        + (
            f": branch `{escape(d['branch'])}`{'' if d['pushed'] else ' (not pushed)'}"
            if d["branch"]
            else ": a patch (fieldguide drafts --json)"
        )
        for d in note.drafts
    ]
    return [lines_block("Drafts waiting for your review", lines, len(lines), "fieldguide drafts")]


def blocks(note: Note, week: str) -> list[dict]:
    """The note's blocks, at most MAX_BLOCKS."""
    out: list[dict] = [
        {
            "type": "header",
            "text": {
                "type": "plain_text",
                "text": cut(f"Your docs this week ({week})", MAX_HEADER),
            },
        },
        section(
            f"{len(note.docs)} docs are yours: " + escape(cut(", ".join(sorted(note.docs)), 600))
        ),
    ]
    for part in (questions_part, topics_part, stale_part, drafts_part):
        got = part(note)
        if got:
            out.append({"type": "divider"})
            out += got
    if len(out) > MAX_BLOCKS:
        out = out[: MAX_BLOCKS - 1] + [section("_…more in fieldguide gaps and stale_")]
    return out


def notes(
    owners_of: dict[str, str],
    rows: list[dict],
    topics: list[Topic],
    stale: list[StaleDoc],
    drafts: list[dict],
) -> list[Note]:
    """One note per owner (`owners_of`: doc → who the note goes to), with what concerns them."""
    by_owner: dict[str, Note] = {}
    for doc, owner in owners_of.items():
        by_owner.setdefault(owner, Note(owner, set())).docs.add(doc)
    for note in by_owner.values():
        mine = note.docs
        note.rows = [
            r for r in rows if cited_docs(r) & mine or (r.get("hits") or [{}])[0].get("doc") in mine
        ]
        note.topics = [t for t in topics if t.doc in mine and t.state in ("open", "drafted")]
        note.stale = [s for s in stale if s.path in mine]
        note.drafts = [d for d in drafts if d["doc"] in mine and not d.get("merged")]
    return list(by_owner.values())
