"""`fieldguide mcp`'s tools for the docs' owners, read-only like the others: `gaps` (what the docs
don't answer, as topics with what to do, their state and owner) and `stale_docs` (the stale docs,
the most damaging first). Each sees only the deployment's scope: a topic whose nearest doc is
outside it, a stale doc outside it, is not listed; a question asked in a direct message is never
quoted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from .gaps import KINDS, asked_privately
from .mcp_results import (
    MAX_EXAMPLE_CHARS,
    MAX_RESULT_CHARS,
    GapList,
    GapTopic,
    StaleDocResult,
    StaleList,
    cut,
    name,
    size,
    within_budget,
)

if TYPE_CHECKING:
    from router.engine import Scope

    from .app import FieldGuide

PERIODS = "a duration back from now: 7d, 30d, 12w"


class OwnerTools:
    def __init__(self, guide: FieldGuide, scope: Scope | None, fail_closed, visible):
        self.guide, self.scope = guide, scope
        self.where = scope.name if scope else "everything"
        self._fail_closed, self._visible = fail_closed, visible

    def gaps(
        self,
        since: Annotated[str, Field(description=f"the period: {PERIODS}")] = "30d",
    ) -> GapList:
        """List what this team's documentation does not answer: the questions people asked that
        got no good answer, grouped into topics, likeliest missing docs first, each with what its
        owner can do (write it up, check the closest section, nothing: off-topic), its state and
        the nearest doc and owner. For reviewing the docs, not for answering a question."""
        from .topics import gap_topics

        start = period(since)

        def read() -> tuple[list, dict, dict[int, dict]]:
            topics, info, rows = gap_topics(self.guide, start)
            return topics, info, {r["id"]: r for r in rows}

        topics, info, rows = self._fail_closed(read)
        shown = [t for t in topics if self._visible(self.scope, t.intent, t.doc)]
        listed = (
            GapTopic(
                count=t.count,
                kind=t.kind,
                action=KINDS[t.kind],
                state=t.state,
                questions=[
                    cut(q, MAX_EXAMPLE_CHARS)
                    for q in t.questions
                    if q not in private_questions(t.ids, rows)
                ],
                doc=name(t.doc),
                section=name(t.section),
                url=name(t.url),
                owner=name(t.owner),
                answered_before=t.before,
                answered_after=t.after,
                missing=[cut(m, MAX_EXAMPLE_CHARS) for m in t.missing],
            )
            for t in shown
        )
        kept, left = within_budget(listed, size, MAX_RESULT_CHARS)
        return GapList(
            topics=kept, unanswered=sum(t.count for t in shown), left_out=left, scope=self.where
        )

    def stale_docs(
        self,
        since: Annotated[str, Field(description=f"count answers over: {PERIODS}")] = "30d",
    ) -> StaleList:
        """List this team's docs that may be out of date (their review is overdue, or what they
        describe changed after them), the most damaging first: most answers marked 👎 that cited
        them, then most answers that cited them."""
        from .owners import stale_docs

        start = period(since)

        def read() -> tuple[list, list[dict]]:
            docs = self.guide.docs()
            rows = self.guide.state.list_answers(start, None, 100_000)
            return stale_docs(docs, rows), docs

        found, docs = self._fail_closed(read)
        intents = {d["path"]: d["intent"] for d in docs}
        listed = (
            StaleDocResult(
                doc=name(s.path),
                title=name(s.title),
                url=name(s.url),
                owner=name(s.owner),
                stale=[cut(r, MAX_EXAMPLE_CHARS) for r in s.reasons],
                cited=s.cited,
                not_helpful=s.not_helpful,
            )
            for s in found
            if self._visible(self.scope, intents.get(s.path, ""), s.path)
        )
        kept, left = within_budget(listed, size, MAX_RESULT_CHARS)
        return StaleList(docs=kept, left_out=left, scope=self.where)


def period(since: str) -> str:
    """The period's start as stored, or a ToolError saying what `since` may be."""
    from mcp.server.mcpserver.exceptions import ToolError

    from .since import parse_since

    try:
        return parse_since(since[:100])
    except ValueError as e:
        raise ToolError(f"since: {e}") from None


def private_questions(ids: list[int], rows: dict[int, dict]) -> set[str]:
    """The questions among `ids` asked in a direct message: counted, never shown."""
    return {
        " ".join(rows[i]["question"].split()) for i in ids if i in rows and asked_privately(rows[i])
    }
