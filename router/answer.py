"""What an answer is made of: the decision, passages, numbered sources and checked citations,
and how a place in the docs is named ("Title › Section")."""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt

from index.clean import display
from index.links import ATTRIBUTES

ANSWER, PARTIAL, ABSTAIN = "ANSWER", "PARTIAL", "ABSTAIN"


# how a place in the docs is named (every answer, source list, abstain and progress shows it), as
# display text (index.clean.display: no invisible characters that hide or reorder it); the index
# and the quotes keep the doc's text as written.
INLINE = MarkdownIt("commonmark")
# what of a heading's markdown a name keeps as written: its code and emphasis (Slack's and MCP
# clients' markdown shows them as such); a link shows its text, an image its alt text, inline
# HTML nothing (a VitePress `<Badge text="deprecated" />`, `<code>`'s tags, not their text)
MARKED = ("code_inline", "em_open", "em_close", "strong_open", "strong_close")
SPACES = ("softbreak", "hardbreak")
MARKERS = re.compile(r"[`*_]")


@lru_cache(maxsize=4096)
def heading_shown(heading: str) -> str:
    """A title or heading as its rendered page shows it (`display`, markdown read by
    markdown-it-py as the page's renderer reads it, MARKED kept, its attribute list left out);
    router/rendered.py `shown` does the same for a section's text."""
    out = []
    for token in INLINE.parseInline(display(heading)):
        for t in token.children or []:
            if t.type in ("text", "image"):
                out.append(t.content)
            elif t.type in MARKED:
                out.append(t.markup + t.content + t.markup if t.type == "code_inline" else t.markup)
            elif t.type in SPACES:
                out.append(" ")
    return ATTRIBUTES.sub("", " ".join("".join(out).split()))


def section_path(title: str, heading_path: list[str]) -> list[str]:
    """The headings under the doc's title, as shown (a first heading that repeats the title's
    words, its markup aside, is dropped)."""
    parts = [heading_shown(h) for h in heading_path]
    same = lambda a, b: MARKERS.sub("", a).casefold() == MARKERS.sub("", b).casefold()  # noqa: E731
    if parts and same(parts[0], heading_shown(title)):
        parts = parts[1:]
    return parts


def label(title: str, heading_path: list[str]) -> str:
    """ "Title › Section › Subsection": how every answer, source list and abstain names a place in
    the docs, the title once, as shown."""
    return _label(title, tuple(heading_path))


@lru_cache(maxsize=4096)  # a question's read names its candidates' sections again and again
def _label(title: str, heading_path: tuple[str, ...]) -> str:
    return " › ".join([heading_shown(title), *section_path(title, list(heading_path))])


@dataclass
class Passage:
    chunk_id: str
    text: str
    score: float = 0.0


@dataclass
class Source:
    n: int  # 1-based number shown to the user
    chunk_id: str
    doc: str
    title: str
    heading_path: list[str]
    url: str
    updated: str = ""  # the doc's last change, UTC ISO 8601 ("" when the index does not know)
    stale: str = ""  # why the doc is stale (review overdue, a watched path changed), else ""

    @property
    def section(self) -> str:
        return " › ".join(section_path(self.title, self.heading_path)) or heading_shown(self.title)

    @property
    def label(self) -> str:
        """ "Title › Section", as everything that names this source shows it."""
        return label(self.title, self.heading_path)


@dataclass
class Citation:
    source: int  # Source.n
    doc: str
    section: str
    url: str
    cited_text: str
    verified: bool
    # the cited blocks with the blocks either side of them in their search result, what the
    # claim check reads when the section is too long to read whole: what "it" names is often
    # the block before ("You can disable it"), the example a cited sentence introduces ("pin it
    # with:") the block after
    around: tuple[str, ...] = ()


@dataclass(frozen=True)
class Progress:
    """What an answer is doing, told to the asker's `on_progress` as it goes (router/pipeline.py):
    `kind` "searching" (before retrieval), "reading" (`labels`: the "Title › Section" of each
    section about to be read by Claude or quoted offline), "checking" (before the claim check), or
    "searching_again" (a second look; `labels`: its query)."""

    kind: str
    labels: list[str] = field(default_factory=list)


@dataclass
class Trace:
    """How an answer came about, for the audit log, `--json`, eval and the footnotes: what each
    step recorded as it ran. No step reads it to decide anything."""

    offline: bool = False  # answered without Claude (no key, or a Claude step fell back)
    route: dict = field(default_factory=dict)
    hits: list[dict] = field(default_factory=list)  # the ranked chunks, with their scores
    evidence: dict = field(default_factory=dict)  # the decision's signals and probability
    dropped_passages: int = 0  # passages Claude quoted that are not in their chunk
    notes: list[str] = field(default_factory=list)  # a typo read, a fallback, the claim check
    timings_ms: dict = field(default_factory=dict)
    usage: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    prompts: dict = field(default_factory=dict)


@dataclass
class Answer:
    """What the question got: the decision, the text, its sources and checked citations."""

    question: str
    condensed: str  # the question as searched (thread context folded in, typos read)
    decision: str
    text: str
    sources: list[Source] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    # with a PARTIAL answer, the one line that says why it is partial (shown above the answer)
    caveat: str = ""
    scope: Any = None  # the router.engine.Scope searched (None: everything)
    trace: Trace = field(default_factory=Trace)
    audit_id: int | None = None

    @property
    def intents(self) -> list[str]:
        return [i["intent"] for i in self.trace.route.get("intents", [])]

    def to_json(self) -> dict:
        t = self.trace
        return {
            "question": self.question,
            "condensed": self.condensed,
            "decision": self.decision,
            "text": self.text,
            "caveat": self.caveat,
            "citations": [asdict(c) for c in self.citations],
            "sources": [asdict(s) | {"section": s.section, "label": s.label} for s in self.sources],
            "intents": self.intents,
            "routing": t.route,
            "offline": t.offline,
            "notes": t.notes,
            "timings_ms": t.timings_ms,
            "usage": t.usage,
            "evidence": t.evidence,
            "dropped_passages": t.dropped_passages,
        }


def squash(text: str) -> str:
    return " ".join(html.unescape(text).split()).lower()


def occurs_in(passage: str, source: str) -> bool:
    """Whitespace- and case-insensitive containment, HTML entities decoded on both sides (docs
    converted from HTML keep "&#8217;" where a quote may say "’"): the check every quote must
    pass."""
    p = squash(passage)
    return bool(p) and p in squash(source)
