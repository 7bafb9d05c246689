"""Where an answer's [n] marks go: after the text block their citations support, at the end of its
words, never inside what markdown reads as a whole.

Claude's citations come on text blocks, and a block's text can end with the blank line before
the next paragraph, or with a code block or a table its citation supports. A mark written after
the blank line opens the next paragraph ("[1]In `mise.toml` …"; "[7]- Remove …" is no longer a
list item), and one written after a closing fence or a table's last row breaks them for a
markdown reader (CommonMark closes a fence only on a line of its own; GFM reads a table row's
extra text as a cell it drops). So a mark goes before the block's trailing whitespace, and, when
the block ends with code or a table, at the end of the block's words before it; a block that is
nothing but code or a table gets its marks on the line after it, unless the words just before it
carry them already.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it import MarkdownIt

from .answer import Citation

PARSER = MarkdownIt("commonmark").enable("table")
WHOLE = ("fence", "code_block", "table_open")  # the blocks a mark must not end inside


def marked(blocks: Sequence[tuple[str, Sequence[Citation]]]) -> str:
    """The answer's text: each block followed by a [n] mark for each source its verified
    citations point at, placed as the module doc says."""
    text = "".join(t for t, _ in blocks)
    wholes = _wholes(text)
    placed: dict[int, tuple[str, dict[str, None]]] = {}  # where: (a line break or not, marks)
    start = 0
    for block, cits in blocks:
        marks = dict.fromkeys(f"[{c.source}]" for c in cits if c.verified)
        if marks:
            at, lead = _place(text, wholes, start, start + len(block.rstrip()), marks, placed)
            was_lead, run = placed.get(at, ("", {}))
            placed[at] = (was_lead or lead, run | marks)
        start += len(block)
    for at, (lead, run) in sorted(placed.items(), reverse=True):
        text = text[:at] + lead + "".join(run) + text[at:]
    return text.strip()


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
) -> tuple[int, str]:
    """(where in `text`, a line break before the marks or not) for the marks of the block whose
    words are `text[start:end]`, the earlier blocks' marks `placed`. A block of code or a table
    alone whose marks the words just before it already carry adds none."""
    for first, last in wholes:
        if first < end <= last:  # the block's words end inside a code block or a table
            before = len(text[:first].rstrip())
            if any(f < before <= la for f, la in wholes):
                return last, "\n"
            if before > start or marks.keys() <= placed.get(before, ("", {}))[1].keys():
                return before, ""
            return last, "\n"
    return end, ""
