"""Where an answer's [n] marks go: after the text block their citations support, at the end of its
words, never inside what markdown reads as a whole.

Claude's citations come on text blocks, and a block's text can end with the blank line before
the next paragraph, or with a code block or a table its citation supports. A mark written after
the blank line opens the next paragraph ("[1]In `mise.toml` …"; "[7]- Remove …" is no longer a
list item), and one written after a closing fence or a table's last row breaks them for a
markdown reader (CommonMark closes a fence only on a line of its own; GFM reads a table row's
extra text as a cell it drops). So a mark goes before the block's trailing whitespace, and, when
the block ends with code or a table, at the end of the block's words before it; a block that is
nothing but code or a table gets its marks on the line after it, as a paragraph of its own, unless
the words just before it carry them already.

Blocks are read as one text, so where a block ends with a closing fence and the next runs on
from it on the same line ("```" then " Task `env` …"), the next starts a paragraph: CommonMark
would not close the fence there, and the rest of the answer would show as code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markdown_it import MarkdownIt

from .answer import Citation

PARSER = MarkdownIt("commonmark").enable("table")
WHOLE = ("fence", "code_block", "table_open")  # the blocks a mark must not end inside
FENCE_LINE = re.compile(r" {0,3}(?:`{3,}|~{3,})")
CLOSING_FENCE = re.compile(r" {0,3}(?:`{3,}|~{3,})[ \t]*")


def marked(blocks: Sequence[tuple[str, Sequence[Citation]]]) -> str:
    """The answer's text: each block followed by a [n] mark for each source its verified
    citations point at, placed as the module doc says."""
    blocks = separated(blocks)
    text = "".join(t for t, _ in blocks)
    wholes = _wholes(text)
    placed: dict[int, tuple[str, dict[str, None]]] = {}  # where: (a line break or not, marks)
    start = 0
    for block, cits in blocks:
        marks = dict.fromkeys(f"[{c.source}]" for c in cits if c.verified)
        where = _place(text, wholes, start, start + len(block.rstrip()), marks, placed)
        if marks and where is not None:
            at, lead, marks = where
            was_lead, run = placed.get(at, ("", {}))
            placed[at] = (was_lead or lead, run | marks)
        start += len(block)
    for at, (lead, run) in sorted(placed.items(), reverse=True):
        # marks on a line of their own end their paragraph: the words after begin another
        tail = "\n" if lead and text[at:].startswith("\n") and text[at + 1 : at + 2].strip() else ""
        text = text[:at] + lead + "".join(run) + tail + text[at:]
    return text.strip()


def fences(text: str) -> int:
    """The fence lines of `text`: an odd count ends it inside a code block."""
    return sum(1 for line in text.split("\n") if FENCE_LINE.match(line))


def ends_fence(text: str) -> bool:
    """Does `text` end with a fence that closes a code block (its last line that fence alone)?"""
    n = fences(text)
    return n > 0 and n % 2 == 0 and bool(CLOSING_FENCE.fullmatch(text.rsplit("\n", 1)[-1]))


def separated(
    blocks: Sequence[tuple[str, Sequence[Citation]]],
) -> list[tuple[str, Sequence[Citation]]]:
    """The blocks, each that runs on from a closing fence on its line starting a paragraph."""
    out: list[tuple[str, Sequence[Citation]]] = []
    text = ""
    for block, cits in blocks:
        if block[:1] not in ("", "\n") and ends_fence(text):
            block = "\n\n" + block.lstrip(" \t")
        text += block
        out.append((block, cits))
    return out


def _wholes(text: str) -> list[tuple[int, int]]:
    """The character spans of `text`'s code blocks and tables, each to the end of its last line
    (a closing fence included)."""
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    spans = []
    for tok in PARSER.parse(text):
        if tok.type in WHOLE and tok.map:
            first, last = tok.map
            end = min(starts[min(last, len(starts) - 1)], len(text))
            spans.append((starts[first], len(text[:end].rstrip("\n"))))
    return spans


def _place(
    text: str,
    wholes: list[tuple[int, int]],
    start: int,
    end: int,
    marks: dict[str, None],
    placed: dict[int, tuple[str, dict[str, None]]],
) -> tuple[int, str, dict[str, None]] | None:
    """(where in `text`, a line break before the marks or not, the marks) for the marks of the
    block whose words are `text[start:end]`, the earlier blocks' marks `placed`. A block of code or
    a table alone adds only the marks that the words before it (code and tables between aside)
    do not carry already: none, when they carry them all."""
    for first, last in wholes:
        if first < end <= last:  # the block's words end inside a code block or a table
            before = len(text[:first].rstrip())
            words = not any(f < before <= la for f, la in wholes)  # not code before code
            if words and before > start:  # its own words come before: the marks go on them
                return before, "", marks
            new = {m: None for m in marks if m not in _carried(text, wholes, first, placed)}
            return (last, "\n", new) if new else None
    return end, "", marks


def _carried(
    text: str,
    wholes: list[tuple[int, int]],
    at: int,
    placed: dict[int, tuple[str, dict[str, None]]],
) -> dict[str, None]:
    """The marks placed on the words just before `at`, or after the code blocks and tables
    that come between."""
    while True:
        before = len(text[:at].rstrip())
        if before in placed:
            return placed[before][1]
        whole = next((f for f, la in wholes if f < before <= la), None)
        if whole is None:
            return {}
        at = whole
