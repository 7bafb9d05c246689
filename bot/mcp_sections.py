"""The sections MCP serves (bot/mcp_server.py's `read_section` and resources): read by id or URL
from the index file, inside the deployment's scope, each call on a read-only snapshot."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from index.links import Anchors, claimants, section_anchor
from index.store import (
    all_sections,
    chunk_place,
    doc_intents,
    doc_sections,
    doc_urls,
    read_snapshot,
    section_chunks,
)
from router.answer import label
from router.citations import link_for

from .mcp_results import MAX_SECTION_CHARS, name

if TYPE_CHECKING:
    from router.engine import Scope

MAX_RESOURCES = 1_000  # sections listed as resources (every one can be read by its URL)
MAX_SAME_URL = 20  # sections at one URL read (a page that gives two headings one id)
SEAM_MIN, SEAM_REACH = 12, 1_000  # the overlap a section's consecutive chunks share, found back
RESOURCE_SCHEME = "fieldguide:///"  # a section without an absolute URL, as a resource


@dataclass
class Found:
    """A section read from the index: its first chunk's fields and its text (at most the limit)."""

    id: str
    doc: str
    title: str
    heading_path: list[str]
    intent: str
    url: str
    text: str
    chars: int


def visible(scope: Scope | None, intent: str, doc: str) -> bool:
    """Whether a chunk of `doc` (of `intent`) is inside `scope`, as Engine.corpus masks it."""
    return scope is None or intent in scope.intents or doc.startswith(scope.folders)


def resource_uri(url: str) -> str:
    """A section's link as a resource URI: itself when absolute, else under fieldguide:///."""
    return url if re.match(r"[a-z][a-z0-9+.-]*://", url, re.I) else RESOURCE_SCHEME + url


def joined(prev: str, nxt: str) -> str:
    """Two consecutive chunks of a section, the unit the chunker repeats at their seam once."""
    tail = prev[-SEAM_REACH:]
    for k in range(min(len(tail), len(nxt)), SEAM_MIN - 1, -1):
        if tail.endswith(nxt[:k]):
            return prev + nxt[k:]
    return prev + "\n\n" + nxt


def page_anchors(conn: sqlite3.Connection, doc: str) -> dict[str, str]:
    """Each section of `doc` (heading path JSON) by its anchor on the page, as the index's
    records name it (index/links.py Anchors)."""
    anchors = Anchors()
    return {
        path: section_anchor(h, anchors.repeat(doc, h))
        for path in doc_sections(conn, doc)
        for h in [json.loads(path)]
    }


class Sections:
    """Sections read by id or URL from the index file, each call on its own read-only
    connection in one read transaction: one generation, whatever a reindex commits meanwhile."""

    def __init__(self, db: str, base_url: str, scope: Scope | None):
        self.db, self.base_url, self.scope = db, base_url, scope

    def _read(
        self, conn: sqlite3.Connection, doc: str, path: str, limit: int, at: str | None = None
    ) -> Found | None:
        """The section of `doc` at heading `path` (JSON); `at`: its anchor, where known."""
        first, text, chars = None, "", 0
        for cid, part, length, title, intent, url in section_chunks(conn, doc, path, limit + 1):
            if not visible(self.scope, intent, doc):
                return None
            if first is None:
                first = (cid, title, intent, url)
            chars += length
            if len(text) <= limit:
                text = joined(text, part) if text else part
        if first is None:
            return None
        cid, title, intent, url = first
        heading_path = json.loads(path)
        if at is None:
            at = page_anchors(conn, doc).get(path, section_anchor(heading_path))
        link = link_for(
            {"doc": doc, "heading_path": heading_path, "url": url, "anchor": at}, self.base_url
        )
        return Found(cid, doc, title, heading_path, intent, link, text, max(chars, len(text)))

    def find(self, ref: str, limit: int = MAX_SECTION_CHARS) -> list[Found]:
        """The sections `ref` names: a section's (or any of its chunks') id, or its URL."""
        ref = ref.strip()
        with read_snapshot(self.db) as conn:
            place = chunk_place(conn, ref)
            if place:
                found = self._read(conn, *place, limit)
                return [found] if found else []
            url = ref.removeprefix(RESOURCE_SCHEME)
            out: list[Found] = []
            for doc, doc_url in doc_urls(conn):
                top: dict = {"doc": doc, "heading_path": [], "url": doc_url}
                if link_for(top, self.base_url) != url.split("#")[0]:
                    continue
                for path, at in page_anchors(conn, doc).items():
                    chunk: dict = {"doc": doc, "heading_path": [], "url": doc_url, "anchor": at}
                    if link_for(chunk, self.base_url) == url and len(out) <= MAX_SAME_URL:
                        found = self._read(conn, doc, path, limit, at)
                        out += [found] if found else []
            return out

    def claimed(self, ref: str) -> list[str]:
        """The docs inside the scope that claim the page `ref` names, when two or more docs of
        the index do (it then names none of them: store.DOC_URL); [] otherwise."""
        url = ref.strip().removeprefix(RESOURCE_SCHEME)
        with read_snapshot(self.db) as conn:
            docs = claimants(conn, url)
            intents = dict(doc_intents(conn))
        return [d for d in docs if visible(self.scope, intents.get(d, ""), d)]

    def missing(self, ref: str) -> str:
        """Why `ref` names no section: a page several docs claim (ambiguous), or none."""
        if docs := self.claimed(ref):
            return (
                f"{name(ref)} is claimed by more than one doc ({name(', '.join(docs))}), so it"
                " names none of them: read a section by its id or its doc's own link, from search"
            )
        return f"no section {ref[:200]!r} here: use an id or URL from search"

    def listed(self, limit: int = MAX_RESOURCES) -> list[tuple[str, str, str]]:
        """(resource URI, label, doc) of each section inside the scope, in doc order, once per
        URI, at most `limit`."""
        out: dict[str, tuple[str, str, str]] = {}
        with read_snapshot(self.db) as conn:
            rows = all_sections(conn)
        anchors = Anchors()
        for doc, path, title, intent, url in rows:
            if len(out) >= limit:
                break
            heading_path = json.loads(path)
            at = section_anchor(heading_path, anchors.repeat(doc, heading_path))
            if visible(self.scope, intent, doc):
                chunk = {"doc": doc, "heading_path": heading_path, "url": url, "anchor": at}
                uri = resource_uri(link_for(chunk, self.base_url))
                out.setdefault(uri, (uri, name(label(title, heading_path)), name(doc)))
        return list(out.values())
