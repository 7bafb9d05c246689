"""Page furniture found by statistics over the corpus, not by the words of one site: the lines
stamped on most pages (running headers and footers, a site's chrome), page numbers, and the
titles of the corpus's own sections (what a list of cross-references lists). Counted once per
index generation (index/mapped.py stores it beside the search arrays) and read by the offline
quoter (router/offline.py), which never quotes a furniture line and drops cross-references.

A page is a doc, cut further at its page-number lines (a manual converted from PDF is one doc of
many pages). A line is furniture when it is on most pages, of the corpus or of its own doc: a
one-sided binomial test rejects, at the 5% level, that it is on at most half of them. Content is
written for its page; even content reused across many docs (an included module, a shared
prerequisite) is on a minority of pages. Pages that are copies of one another (the same lines)
are one page: 40 copies of a doc are one piece of content said 40 times, not 40 pages that share
their lines. The test also says when there are too few pages to tell: a line on every one of 4
pages or fewer is never furniture.
"""

from __future__ import annotations

import hashlib
import math
import re
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

LETTER = re.compile(r"[^\W\d_]")
DIGITS = re.compile(r"\d+")
FENCE = re.compile(r"^\s*(?:```|~~~)")
LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
ALPHA = 0.05  # the binomial test's level


def normal(line: str) -> str:
    """A line as counted: whitespace collapsed, lowercase, every run of digits one symbol ("Page
    12" and "Page 13" are one line)."""
    return DIGITS.sub("0", " ".join(line.split()).lower())


def page_number(line: str) -> bool:
    """A number and no letter ("- 63 -", "12 / 40", "63"): a page number, furniture by definition.
    A line of punctuation alone ("}", "],") is no page number: it is code flattened into prose."""
    return bool(DIGITS.search(line)) and not LETTER.search(line)


def key(text: str) -> int:
    """A stable 64-bit key of a normalised text (Python's hash() differs between processes)."""
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "little", signed=True
    )


def title_key(text: str) -> int:
    """A heading, title or list item as compared with the corpus's titles: its list marker and a
    final full stop left out."""
    return key(normal(LIST_MARK.sub("", text, count=1)).rstrip(" ."))


@lru_cache(maxsize=4096)
def most_pages(pages: int) -> int:
    """The fewest of `pages` pages a line is on for a binomial test to reject, at level ALPHA,
    that it is on at most half of them (pages + 1 when no count can: 4 pages or fewer). The
    binomial tail P(X >= k), X ~ B(pages, 1/2), summed from k = pages down, in logs (no scipy.stats
    import, 60 MB, for a sum)."""
    tail = 0.0
    whole = math.lgamma(pages + 1) - pages * math.log(2)
    for k in range(pages, pages // 2, -1):
        tail += math.exp(whole - math.lgamma(k + 1) - math.lgamma(pages - k + 1))
        if tail >= ALPHA:
            return k + 1
    return pages + 1


@dataclass
class Furniture:
    """The furniture lines' keys and the corpus's titles' keys, each a sorted int64 array."""

    lines: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    titles: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def line(self, text: str) -> bool:
        """`text` (one line) is a page number or a line stamped on most pages."""
        return page_number(text) or _has(self.lines, key(normal(text)))

    def title(self, text: str) -> bool:
        """`text` is the title of a doc or section of the corpus."""
        return _has(self.titles, title_key(text))

    def arrays(self) -> dict[str, np.ndarray]:
        return {"furniture_lines": self.lines, "furniture_titles": self.titles}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Furniture:
        return cls(arrays["furniture_lines"], arrays["furniture_titles"])


def _has(keys: np.ndarray, k: int) -> bool:
    i = int(np.searchsorted(keys, k))
    return i < len(keys) and int(keys[i]) == k


class Counts:
    """Counts the lines of a corpus's chunks, streamed in (doc, chunk order); `result()` is the
    Furniture. Memory: one 8-byte key per distinct line of each page, and a counter per doc."""

    def __init__(self) -> None:
        self.keys = array("q")  # each page's distinct line keys, page after page
        self.titles: set[int] = set()
        self.pages = 0
        self.furniture: set[int] = set()  # lines on most pages of their own doc
        self.doc: str | None = None
        self.doc_pages = 0
        self.doc_counts: Counter[int] = Counter()
        self.page: set[int] = set()
        self.pages_seen: set[int] = set()  # each page's lines, as one key: a copy counts once
        # the doc offset read so far (the overlap of consecutive chunks is skipped), and whether
        # a code block is open there (the chunker cuts a long one between chunks)
        self.seen_to = 0
        self.fenced = False

    def add(
        self, doc: str, title: str, heading_path: list[str], text: str, start: int | None
    ) -> None:
        """One chunk; `start`: its offset in its doc (None: unknown, no overlap is skipped)."""
        if doc != self.doc:
            self._end_doc()
            self.doc, self.seen_to, self.fenced = doc, 0, False
            self.titles.add(title_key(title))
        if start is None:
            self.fenced = False
        self.titles.update(title_key(h) for h in heading_path)
        pos = 0
        for line in text.split("\n"):
            if start is not None and start + pos < self.seen_to:
                pos += len(line) + 1
                continue  # the overlap, read with the chunk before
            pos += len(line) + 1
            if FENCE.match(line):
                self.fenced = not self.fenced
                continue
            if self.fenced or not line.strip() or line.lstrip().startswith("|"):
                continue  # code, a blank line, a table row
            if page_number(line):
                self._end_page()
            else:
                self.page.add(key(normal(line)))
        if start is not None:
            self.seen_to = max(self.seen_to, start + len(text))

    def _end_page(self) -> None:
        lines = key(" ".join(map(str, sorted(self.page))))
        if self.page and lines not in self.pages_seen:
            self.pages_seen.add(lines)
            self.keys.extend(self.page)
            self.doc_counts.update(self.page)
            self.pages += 1
            self.doc_pages += 1
        self.page = set()

    def _end_doc(self) -> None:
        self._end_page()
        least = most_pages(self.doc_pages)
        self.furniture.update(k for k, n in self.doc_counts.items() if n >= least)
        self.doc_counts.clear()
        self.doc_pages = 0

    def result(self) -> Furniture:
        self._end_doc()
        keys, counts = np.unique(np.frombuffer(self.keys, dtype=np.int64), return_counts=True)
        self.furniture.update(keys[counts >= most_pages(self.pages)].tolist())
        return Furniture(
            np.array(sorted(self.furniture), dtype=np.int64),
            np.array(sorted(self.titles), dtype=np.int64),
        )


def count(chunks: Iterable[dict]) -> Furniture:
    """The Furniture of chunk records (doc, title, heading_path, text, start) in (doc, chunk
    order)."""
    counts = Counts()
    for c in chunks:
        counts.add(
            c.get("doc", ""),
            c.get("title") or "",
            c.get("heading_path") or [],
            c["text"],
            c.get("start"),
        )
    return counts.result()
