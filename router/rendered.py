"""Markdown as a reader of the rendered page reads it: what Claude is given to read
(router/context.py) leaves out markup the page does not show."""

from __future__ import annotations

import re

from .citations import FENCE

# an HTML link on one line, its attributes and its text; its target; a code span; padding
ANCHOR = re.compile(r"<a(\s[^<>]*)?>(.*?)</a>", re.I)
HREF = re.compile(r"""\bhref\s*=\s*["']?([^"'\s>]*)""", re.I)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
PADDING = re.compile(r"(?<=\S) {2,}")


def shown(text: str) -> str:
    """The text as a reader of the rendered page reads it, for what Claude reads: an HTML link
    that leads nowhere off the page (an anchor: no href, or one to "#…", as option tables put in
    every row) is its text alone, and a line that held only anchors is dropped; a table row's
    alignment padding (runs of spaces after a cell's text, a tenth of some docs' characters) is
    one space, as the rendered table shows it. Code (fenced blocks, code spans) is left as
    written, and so is a link to another page (its address is the docs' own)."""
    if "<a" not in text and "<A" not in text and "|" not in text:
        return text
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line.strip()):
            fenced = not fenced
        if fenced:
            out.append(line)
            continue
        kept = plain_anchors(line) if ANCHOR.search(line) else line
        if kept.strip() or not line.strip():
            out.append(unpadded(kept) if kept.lstrip().startswith("|") else kept)
    return "\n".join(out)


def unpadded(row: str) -> str:
    """A table row with each run of spaces after a non-space, outside code spans, as one."""
    spans = [m.span() for m in CODE_SPAN.finditer(row)]

    def one(m: re.Match) -> str:
        return m.group(0) if any(a <= m.start() < b for a, b in spans) else " "

    return PADDING.sub(one, row)


def plain_anchors(line: str) -> str:
    """A line outside code with its in-page anchors (`shown`) read as their text."""
    spans = [m.span() for m in CODE_SPAN.finditer(line)]

    def plain(m: re.Match) -> str:
        href = HREF.search(m.group(1) or "")
        coded = any(a <= m.start() < b for a, b in spans)
        return m.group(0) if coded or (href and not href.group(1).startswith("#")) else m.group(2)

    return ANCHOR.sub(plain, line)
