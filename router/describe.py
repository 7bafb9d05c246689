"""What each intent is about, from its own docs: a few of its headings (for Claude's routing
prompt), and drafts of the `intents.yaml` descriptions a team without one can start from
(`fieldguide intents --describe`: offline from the headings, or written by Claude)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

import yaml

from prompts import render

from .claude import MessagesClient
from .messages import data, structured

log = logging.getLogger(__name__)

HEADINGS = 8  # how many headings stand for an intent


def intent_headings(records: Iterable[dict], n: int = HEADINGS) -> dict[str, list[str]]:
    """intent → up to n of its headings: the titles of its docs, biggest doc first (a long doc is
    usually a central one), then its docs' top-level section headings when titles are few."""
    sizes: dict[str, Counter] = {}
    sections: dict[str, Counter] = {}
    for r in records:
        sizes.setdefault(r["intent"], Counter())[r["title"]] += 1
        if r["heading_path"]:
            sections.setdefault(r["intent"], Counter())[r["heading_path"][0]] += 1
    out: dict[str, list[str]] = {}
    for intent, titles in sizes.items():
        chosen: list[str] = []
        for counts in (titles, sections.get(intent, Counter())):
            for heading, _ in sorted(counts.items(), key=lambda x: (-x[1], x[0])):
                if heading and heading not in chosen and len(chosen) < n:
                    chosen.append(heading)
        out[intent] = chosen
    return out


def draft_offline(headings: list[str]) -> dict:
    """A description listing what the intent's biggest docs are titled; no example questions
    (inventing them from headings would only restate the headings)."""
    if not headings:
        return {"description": "", "examples": []}
    named = headings[:6]
    text = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    return {"description": f"Docs on {text}.", "examples": []}


def _describe_schema() -> dict:
    """The reply's JSON schema (structured outputs take no maxItems: the examples are cut to 5
    after)."""
    return {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "examples": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["description", "examples"],
    }


def draft_with_claude(
    client: MessagesClient, model: str, intent: str, headings: list[str]
) -> tuple[dict, str]:
    """(draft, note): Claude's description and example questions for one intent, from its name
    and headings; the offline draft and a note when Claude fails or answers out of shape."""
    import anthropic

    try:
        reply, _ = structured(
            client,
            model,
            render("describe"),
            data("intent", intent)
            + "\n"
            + data("headings", "\n" + "\n".join(f"- {h}" for h in headings) + "\n"),
            _describe_schema(),
            1500,
        )
        if not isinstance(reply.get("description"), str):
            raise ValueError("no description in the answer")
        examples = [e.strip() for e in reply.get("examples") or [] if isinstance(e, str)]
        return {"description": " ".join(reply["description"].split()), "examples": examples[:5]}, ""
    except anthropic.APIError as e:
        note = f"Claude unavailable ({type(e).__name__})"
    except ValueError as e:
        note = f"Claude's answer was unusable ({e})"
    log.warning("%s; %s described from its headings", note, intent)
    return draft_offline(headings), f"{intent}: {note}; drafted from its headings"


def to_yaml(drafts: dict[str, dict], source: str) -> str:
    """The drafts as an intents.yaml, with a header saying where they came from."""
    header = (
        f"# intents.yaml drafted by `fieldguide intents --describe` ({source}).\n"
        "# Review and edit, then save it at the root of the docs folder and reindex.\n"
    )
    body = yaml.safe_dump(drafts, sort_keys=False, allow_unicode=True, width=100)
    return header + body
