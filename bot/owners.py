"""Who owns each doc and which docs went stale: what `doctor`, `stale`, the weekly note and an
answer's sources read.

A doc's owner is the first of: its front matter's `owner` (a Slack id or a plain name), the docs
repository's CODEOWNERS, the person who last changed it in git (index/ownership.py reads the last
two at each index run). A doc is stale when its review is due (`reviewed`, or else its last
change, plus `review_every`) or when a path it `watches` changed after it did. `stale_docs` ranks
the stale docs by damage: the answers that cited them lately, those marked 👎 first."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .since import seconds_of

# where a doc's owner came from, in the order they are asked
OWNER_SOURCES = ("front matter", "CODEOWNERS", "git")


def doc_owner(doc: dict) -> tuple[str, str]:
    """(owner, where it came from: OWNER_SOURCES) of a doc record (index.store.doc_records);
    ("", "") when nobody owns it."""
    for value, source in zip(
        (doc.get("owner"), doc.get("codeowner"), doc.get("author")), OWNER_SOURCES, strict=True
    ):
        if value:
            return value, source
    return "", ""


def review_due(doc: dict) -> str | None:
    """The date a doc's review falls due (ISO 8601): `reviewed` (else its last change) plus
    `review_every`; None without `review_every` or a date to count from."""
    every, start = doc.get("review_every"), doc.get("reviewed") or (doc.get("updated") or "")[:10]
    if not every or not start:
        return None
    try:
        days = seconds_of(every) / 86400
        due = datetime.fromisoformat(start[:10]) + timedelta(days=days)
    except ValueError:
        return None
    return due.date().isoformat()


def stale_reasons(doc: dict, now: datetime | None = None) -> list[str]:
    """Why a doc is stale, in words (none: it is fresh): its review is overdue, or a watched path
    changed after the doc did."""
    today = (now or datetime.now(UTC)).date().isoformat()
    reasons = []
    if (due := review_due(doc)) and due < today:
        since = f"reviewed {doc['reviewed']}" if doc.get("reviewed") else "never reviewed"
        reasons.append(f"review due {due} ({since}, every {doc['review_every']})")
    updated = doc.get("updated") or ""
    for path, changed in sorted((doc.get("watched") or {}).items()):
        if changed and updated and changed > updated:
            reasons.append(f"{path} changed {changed[:10]}, after the doc ({updated[:10]})")
    return reasons


def stale_notes(docs: list[dict], now: datetime | None = None) -> dict[str, str]:
    """doc path → its staleness in one short line, for the stale ones only."""
    return {d["path"]: "; ".join(r) for d in docs if (r := stale_reasons(d, now))}


@dataclass
class StaleDoc:
    path: str
    title: str
    owner: str
    owner_source: str
    reasons: list[str]
    url: str = ""
    cited: int = 0  # answers that cited it since the period began
    not_helpful: int = 0  # of those, marked 👎

    def to_json(self) -> dict:
        return {
            "doc": self.path,
            "title": self.title,
            "owner": self.owner,
            "owner_from": self.owner_source,
            "stale": self.reasons,
            "url": self.url,
            "cited": self.cited,
            "not_helpful": self.not_helpful,
        }


def cited_docs(row: dict) -> set[str]:
    """The docs an audit row's answer cited."""
    return {c.get("doc", "") for c in row.get("citations") or []} - {""}


def stale_docs(docs: list[dict], rows: list[dict], now: datetime | None = None) -> list[StaleDoc]:
    """The stale docs, the most damaging first: most answers marked 👎 that cited them, then most
    answers that cited them, in `rows` (audit rows of the period)."""
    cited: Counter = Counter()
    down: Counter = Counter()
    for row in rows:
        bad = "not_helpful" in (row.get("feedback") or {}).values()
        for doc in cited_docs(row):
            cited[doc] += 1
            down[doc] += bad
    out = []
    for d in docs:
        if reasons := stale_reasons(d, now):
            owner, source = doc_owner(d)
            out.append(
                StaleDoc(
                    d["path"],
                    d.get("title") or d["path"],
                    owner,
                    source,
                    reasons,
                    d.get("url") or "",
                    cited[d["path"]],
                    down[d["path"]],
                )
            )
    out.sort(key=lambda s: (-s.not_helpful, -s.cited, s.path))
    return out


def unowned(docs: list[dict]) -> list[str]:
    """The docs nobody owns (no front matter owner, no CODEOWNERS rule, no git history)."""
    return [d["path"] for d in docs if not doc_owner(d)[0]]


def mark_stale(sources: list[Any], notes: dict[str, str]) -> None:
    """Set each answer source's `stale` note from `notes` (doc → why it is stale)."""
    for s in sources:
        s.stale = notes.get(s.doc, "")
