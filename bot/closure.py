"""Closure proven: after a reindex that changed docs, the questions of the open and drafted gap
topics are asked again, offline, and recorded apart from the askers' audit trail (the `replays`
table); each topic keeps how many were answered before (well, as asked) and after. A question
counts as answered now when its answer cites a doc the reindex added or changed — confidently
(ANSWER) or with a caveat (PARTIAL, quoting it): an answer from an unchanged doc is what its asker
already had, and one quoting the change is what it was made for. A topic most of whose questions
are answered now is marked fixed; its askers are then told (bot/slack/owners.py `tell`)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from .gaps import unanswered
from .topics import gap_topics, keep

# `guide`: fieldguide as bot/slack/guide.py's Guide declares it (FieldGuide, or the Slack runtime's)
Guide = Any

log = logging.getLogger(__name__)

REPLAY_MAX = 500  # questions asked again after one reindex, the likeliest gaps first
REPLAYED = ("open", "drafted")


def replay(guide: Guide, changed: set[str]) -> list[dict]:
    """Ask the open and drafted topics' questions again (docs `changed` by the reindex); store
    each topic's figures and the fixed ones' state. Returns the topics replayed: {"topic_id",
    "title", "before", "after", "fixed"}."""
    from .wiring import make_offline_pipeline

    if not changed:
        return []
    topics, _, rows = gap_topics(guide)
    by_id = {r["id"]: r for r in rows}
    pipeline = make_offline_pipeline(guide.settings, guide.engine)
    budget, done = REPLAY_MAX, []
    for t in topics:
        if t.state not in REPLAYED or t.kind == "offtopic" or budget < len(t.ids):
            continue
        budget -= len(t.ids)
        results = []
        for i in t.ids:
            question = by_id[i]["question"]
            ans = pipeline.answer(question)
            cited = [
                {"doc": s.doc, "section": s.label, "url": s.url}
                for s in ans.sources
                if any(c.source == s.n for c in ans.citations)
            ]
            answered = ans.decision != "ABSTAIN" and any(c["doc"] in changed for c in cited)
            results.append(
                {"answer_id": i, "question": question, "decision": ans.decision}
                | {"cited": cited, "answered": answered}
            )
        before = sum(not unanswered(by_id[i]) for i in t.ids)
        after = sum(r["answered"] for r in results)
        fixed = after * 2 > len(t.ids)
        n = len(t.ids)
        keep(guide, t, "fixed" if fixed else t.state, before=f"{before}/{n}", after=f"{after}/{n}")
        assert t.topic_id is not None
        guide.state.loop.record_replays(t.topic_id, results)
        done.append(
            {"topic_id": t.topic_id, "title": t.questions[0]}
            | {"before": f"{before}/{n}", "after": f"{after}/{n}", "fixed": fixed}
        )
        log.info("gap topic %s replayed: %s answered before, %s now", t.topic_id, before, after)
    return done


def changed_section(replays: list[dict]) -> dict | None:
    """The section most of a topic's replayed answers cited ({"doc", "section", "url"})."""
    cited = Counter(
        (c["doc"], c["section"], c["url"]) for r in replays if r["answered"] for c in r["cited"][:1]
    )
    if not cited:
        return None
    (doc, section, url), _ = cited.most_common(1)[0]
    return {"doc": doc, "section": section, "url": url}
