"""Sources, links, labels and citation checks: how an answer points back into the docs."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from index.links import section_anchor

from .answer import Citation, Passage, Source, label, section_path

__all__ = [  # label and section_path are re-exported: callers name places through this module
    "check",
    "label",
    "link_for",
    "number_sources",
    "search_results",
    "section_path",
]


def updated_ago(iso: str, now: datetime | None = None) -> str:
    """ "updated 3 days ago" for a doc's last change (UTC ISO 8601); "" when it is not known."""
    try:
        then = datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return ""
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    days = ((now or datetime.now(UTC)) - then).days
    if days < 1:
        return "updated today"
    if days == 1:
        return "updated yesterday"
    if days < 60:
        return f"updated {days} days ago"
    if days < 730:
        return f"updated {days // 30} months ago"
    return f"updated {days // 365} years ago"


def link_for(chunk: dict, base_url: str = "") -> str:
    """The doc's front-matter url, else base_url + path (or the bare path), plus the section
    anchor: the index's record gives it, numbered among its page's headings (index/links.py
    Anchors); else its heading's own. A page's first heading gets one too (the heading path does
    not say whether it is the page's H1 or, on a page without one, an H2; an H1's anchor is the
    page's top anyway)."""
    section = chunk.get("anchor", section_anchor(chunk["heading_path"]))
    frag = f"#{section}" if section else ""
    if chunk.get("url"):
        return chunk["url"].split("#")[0] + frag
    if base_url:
        return base_url.rstrip("/") + "/" + chunk["doc"] + frag
    return chunk["doc"] + frag


def number_sources(passages: list[Passage], chunks: dict[str, dict], base_url: str) -> dict:
    """chunk id → Source, numbered 1, 2, ... in the order the passages first cite each chunk."""
    by_chunk: dict[str, Source] = {}
    for p in passages:
        if p.chunk_id not in by_chunk:
            c = chunks[p.chunk_id]
            by_chunk[p.chunk_id] = Source(
                len(by_chunk) + 1,
                c["id"],
                c["doc"],
                c["title"],
                c["heading_path"],
                link_for(c, base_url),
                c.get("updated") or "",
            )
    return by_chunk


def search_results(passages: list[Passage], by_chunk: dict[str, Source]) -> list[dict]:
    """The passages as the Messages API's search_result blocks: one per source, in source order,
    one text block per passage (the smallest unit a citation can point at). A result's source is
    its number: the model writes no links (the sources are linked for it), and a link would cost
    some twenty tokens a section of every question's read; its title names the page and
    section."""
    return [
        {
            "type": "search_result",
            "source": str(src.n),
            "title": src.label,
            "content": [{"type": "text", "text": p.text} for p in passages if p.chunk_id == cid],
            "citations": {"enabled": True},
        }
        for cid, src in by_chunk.items()
    ]


def same_text(a: str, b: str) -> bool:
    """Equal once whitespace is left out: the API joins the cited blocks as they were sent, so
    only spacing at the joins may differ."""
    return "".join(a.split()) == "".join(b.split())


def check(cit: Any, results: list[dict], sources: list[Source]) -> Citation | None:
    """A search_result_location citation checked by its indices against the blocks that were
    sent (each block a passage already verified against its chunk at extraction) and by its
    content: verified when the search result and the block range exist and `cited_text` is the
    text of those blocks (whitespace aside). An unverified citation keeps the `cited_text` the API
    gave. None for a citation of another type."""
    if getattr(cit, "type", "") != "search_result_location":
        return None
    i, start, end = cit.search_result_index, cit.start_block_index, cit.end_block_index
    ok = (
        isinstance(i, int)
        and 0 <= i < len(results)
        and isinstance(start, int)
        and isinstance(end, int)
        and 0 <= start < end <= len(results[i]["content"])
    )
    if not ok:
        return Citation(0, "", "", "", str(cit.cited_text), False)
    src, blocks = sources[i], [b["text"] for b in results[i]["content"]]
    if not same_text(str(cit.cited_text or ""), "".join(blocks[start:end])):  # another text
        return Citation(src.n, src.doc, src.section, src.url, str(cit.cited_text), False)
    # the blocks are paragraphs: kept apart as they were in the doc
    sent = "\n\n".join(blocks[start:end])
    around = tuple(blocks[max(0, start - 1) : end + 1])
    return Citation(src.n, src.doc, src.section, src.url, sent, True, around)


FENCE = re.compile(r"^(```|~~~)", re.M)


def paragraphs(text: str) -> list[str]:
    """A chunk's paragraphs (blank-line separated; a fenced code block whole): the smallest units
    the answer's citations point at."""
    out: list[str] = []
    current: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if FENCE.match(line.strip()):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                out.append("\n".join(current))
            current = []
            continue
        current.append(line)
    if current:
        out.append("\n".join(current))
    return [p for p in out if p.strip()]


def cited_passages(passages: list[Passage], written: Any) -> list[Passage]:
    """The paragraphs Claude's answer (a compose.Written) cites: the cite path's passages; the
    passages as they are for quotes written offline."""
    if written.by != "claude":
        return passages
    cited = [c.cited_text for c in written.citations if c.verified]
    return [p for p in passages if any(p.text in c for c in cited)]
