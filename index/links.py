"""Where the docs are cited: each doc's front-matter url as every reader takes it (`DOC_URL`),
and the pages two or more docs claim. A doc cannot take another's link: when two claim one page,
neither is cited under it (each links to its own path), the index run warns (index/indexer.py) and
`fieldguide doctor` says so.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable

import sqlite_utils

Reader = sqlite_utils.Database | sqlite3.Connection

# A doc's front-matter url as every reader takes it: none when two or more docs claim that page
# (the index run lists their urls in meta `shared_urls`, `share_urls`): then neither is cited
# under it, each links to its own path. An index written before has no such list: every url holds.
DOC_URL = (
    "CASE WHEN d.url IN (SELECT value FROM json_each(coalesce((SELECT value FROM meta"
    " WHERE key = 'shared_urls'), '[]'))) THEN NULL ELSE d.url END"
)


# A heading's attribute list, as Pandoc, kramdown, Python-Markdown's attr_list and VitePress write
# it after the heading's text ("Using `BackgroundTasks` { #using-backgroundtasks }", "Setup {: .tip
# #setup}"), is markup, not a name; its "#id" is the heading's anchor (`anchor`). A
# brace without "#" or "." ("GET /users/{id}") is the heading's own text.
ATTRIBUTES = re.compile(r"\s*\{:?\s*[#.][^{}]*\}\s*$")
OWN_ID = re.compile(r"[\s{:]#([\w.:-]+)")  # the "#id" inside a heading's attributes


def anchor(heading: str, repeat: int = 0) -> str:
    """The heading's anchor: the id its attributes give it ("{#id}"), else GitHub's slug of it,
    numbered when earlier headings of its page have the same slug (`repeat` of them, `Anchors`):
    "options", "options-1", "options-2"."""
    attributes = ATTRIBUTES.search(heading)
    own = OWN_ID.search(attributes.group()) if attributes else None
    if own:
        return own.group(1)
    slug = re.sub(r"[^\w\- ]", "", ATTRIBUTES.sub("", heading).strip().lower())
    slug = re.sub(r" ", "-", slug)
    return f"{slug}-{repeat}" if repeat else slug


def section_anchor(heading_path: list[str], repeat: int = 0) -> str:
    """A section's anchor (its last heading's), "" for text before a page's first heading."""
    return anchor(heading_path[-1], repeat) if heading_path else ""


class Anchors:
    """How many earlier headings of its page share the slug of a section's heading: fed each
    page's sections in order (by heading path), it counts the headings each one opens, those
    past the path it shares with the section before (a heading with no text of its own still
    opens the ones under it, and takes its number)."""

    def __init__(self) -> None:
        self.doc: str | None = None
        self.path: list[str] = []
        self.slugs: Counter[str] = Counter()

    def repeat(self, doc: str, heading_path: list[str]) -> int:
        """The `repeat` of the section of `doc` at `heading_path`, the next one in page order."""
        if doc != self.doc:
            self.doc, self.path, self.slugs = doc, [], Counter()
        shared = 0
        while shared < min(len(heading_path), len(self.path)):
            if heading_path[shared] != self.path[shared]:
                break
            shared += 1
        n = 0
        for heading in heading_path[shared:]:
            slug = anchor(heading)
            n = self.slugs[slug]
            self.slugs[slug] += 1
        self.path = list(heading_path)
        return n


def page_of(url: str) -> str:
    """The page a url names, as two claims of it are compared: without its #fragment (a
    section's anchor is added to it) or a final slash, scheme and host in lowercase."""
    page = url.split("#")[0].rstrip("/")
    scheme, sep, rest = page.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme.lower()}{sep}{host.lower()}{slash}{path}" if sep else page


def claimed(docs: Iterable[tuple[str, str | None]]) -> dict[str, list[tuple[str, str]]]:
    """Each page (`page_of`) that two or more of these (path, url) claim: [(path, url as
    written)] of those docs, by path."""
    pages: dict[str, list[tuple[str, str]]] = {}
    for path, url in sorted((p, u) for p, u in docs if u):
        pages.setdefault(page_of(url), []).append((path, url))
    return {page: found for page, found in pages.items() if len(found) > 1}


def claimed_pages(conn: Reader) -> dict[str, list[tuple[str, str]]]:
    """`claimed` of the index's docs, their front-matter urls as written."""
    return claimed(conn.execute("SELECT path, url FROM docs WHERE url IS NOT NULL"))


def shared_warnings(pages: dict[str, list[tuple[str, str]]]) -> list[dict]:
    """A warning of the run ({"path", "warning"}) for each doc of a page others claim too."""
    return [
        {
            "path": path,
            "warning": f"front matter 'url' {url} is claimed by {len(docs) - 1} other doc"
            f"{'s' if len(docs) > 2 else ''} too ({', '.join(p for p, _ in docs if p != path)}):"
            " none of them is cited under it, each links to its own path",
        }
        for docs in pages.values()
        for path, url in docs
    ]


def share_urls(db: sqlite_utils.Database) -> list[dict]:
    """Inside an index run's commit: meta `shared_urls` set to the urls of the pages two or more
    docs claim (DOC_URL reads it); the run's warnings about them (`shared_warnings`)."""
    shared = claimed_pages(db)
    urls = sorted({url for docs in shared.values() for _, url in docs})
    db.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('shared_urls', ?)", [json.dumps(urls)]
    )
    return shared_warnings(shared)


def claimants(conn: Reader, url: str) -> list[str]:
    """The docs that claim the page `url` names when two or more do (a link that names none of
    them: DOC_URL); [] otherwise."""
    return [path for path, _ in claimed_pages(conn).get(page_of(url), [])]
