"""Gap topics with their state, as every part of the owners' loop reads them (`fieldguide gaps`,
MCP's `gaps`, a draft made in Slack, the replay after a reindex, the weekly note): bot/gaps.py's
topics of the audit trail, each given the state kept for the questions it holds
(bot/state/loop.py), its owner the nearest doc's (bot/owners.py), else its intent's."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gaps import Topic

# `guide`: fieldguide as bot/slack/guide.py's Guide declares it (FieldGuide, or the Slack runtime's)
Guide = Any

ROWS = 100_000  # audit rows read at most (newest first)


def owners_shown(guide: Guide) -> tuple[dict[str, str], dict[str, str]]:
    """({doc: owner}, {intent: owner}) as an owner's report shows them: each doc's own (front
    matter, CODEOWNERS, git: bot/owners.py), else its intent's (intents.yaml). Who Slack sends a
    doc's hand-offs to is Guide.owners' (FIELDGUIDE_DOC_OWNERS)."""
    from .owners import doc_owner

    docs = {d["path"]: owner for d in guide.docs() if (owner := doc_owner(d)[0])}
    return docs, guide.owners()[1]


def stored_topics(guide: Guide) -> list[dict]:
    """The gap topics kept with a state; none where the audit's tables cannot be read (a
    read-only index made before them)."""
    try:
        return guide.state.loop.topics()
    except sqlite3.OperationalError:
        return []


def gap_topics(
    guide: Guide, since: str | None = None, intent: str | None = None
) -> tuple[list[Topic], dict, list[dict]]:
    """(topics, the clustering's figures, the audit rows read) of the questions since `since`
    (stored form: bot/since.py), only `intent`'s topics when given; each topic with its state."""
    from .gaps import find_topics, match_states

    rows = guide.state.list_answers(since, None, ROWS)
    topics, info = find_topics(
        rows,
        guide.embedder,
        guide.engine.loaded().searcher,
        owners_shown(guide),
        intent=intent,
        base_url=guide.settings.docs_base_url,
    )
    match_states(topics, stored_topics(guide))
    return topics, info, rows


def keep(guide: Guide, topic: Topic, state: str, **figures: str) -> int:
    """Store `topic` with `state` (and `before` / `after` figures): its id."""
    topic.state = state
    topic.topic_id = guide.state.loop.save_topic(
        {
            "id": topic.topic_id,
            "state": state,
            "ids": topic.ids,
            "doc": topic.doc,
            "section": topic.section,
            "owner": topic.owner,
            "title": topic.questions[0],
            **figures,
        }
    )
    return topic.topic_id


def topic_holding(guide: Guide, answer_id: int) -> Topic | None:
    """The gap topic that holds the question of audit row `answer_id` now; None."""
    topics, _, _ = gap_topics(guide)
    return next((t for t in topics if answer_id in t.ids), None)
