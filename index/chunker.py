"""Split a markdown doc into chunks along its heading hierarchy.

The blocks come from markdown-it-py (CommonMark with GFM tables): its block tokens carry their
source line ranges, so every chunk is one contiguous slice of the source file (`start`/`end` are
offsets into the decoded file) and any passage quoted from a chunk can be checked against the file.
A section (text under an H1-H4 heading, ATX `#` or setext `===`/`---`, up to the next one) is one
chunk when it fits in `max_chars`; a larger one is packed from blocks (paragraphs, fenced code,
tables, lists with their nested lists), splitting a block only when it alone is too big: paragraphs
at sentences, tables, lists and code at lines. Consecutive pieces overlap by one small unit so a
sentence cut from its neighbour keeps its context. Chunking is linear in the file's length and
holds one piece at a time of an oversize block (a 50 MB code block is cut as it is read).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .loader import Doc
from .markdown import BLOCKS, MARKUP_LINE, section_heading

OVERLAP_CHARS = 300
SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+(?=\S)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
NEWLINE = re.compile(r"\r\n?|\n")  # markdown-it's line breaks (it normalises \r\n and \r)
LINE = re.compile(r"[^\r\n]*")

_KINDS = {
    "fence": "code",
    "table_open": "table",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
}  # anything else (paragraph, blockquote, html, indented code, rule) is read as prose: "para"


@dataclass
class Chunk:
    id: str
    doc: str
    ord: int
    heading_path: list[str]
    text: str
    start: int
    end: int
    search_text: str  # title + heading path + text: what BM25 and the embedder see

    @property
    def section(self) -> str:
        return self.heading_path[-1] if self.heading_path else ""


@dataclass
class _Block:
    start: int
    end: int
    kind: str  # heading | para | code | table | list
    text: str  # the text the offsets point into

    @property
    def lines(self) -> list[tuple[int, int]]:
        """(start, end) of each line, without its newline."""
        return list(_line_spans(self.text, self.start, self.end))


def _line_spans(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    pos = start
    while pos <= end:
        m = LINE.match(text, pos, end)
        assert m is not None  # LINE matches the empty string
        yield pos, m.end()
        nl = NEWLINE.match(text, m.end(), end)
        if nl is None:
            return
        pos = nl.end()


class _LineStarts:
    """The offset where each source line starts, asked in increasing order (markdown-it's token
    maps come in order): found by reading forward, without a table of every line."""

    def __init__(self, text: str, offset: int) -> None:
        self._breaks = NEWLINE.finditer(text, offset)
        self._end = len(text)
        self.line, self.pos = 0, offset

    def __call__(self, line: int) -> int:
        while self.line < line:
            m = next(self._breaks, None)
            self.pos = m.end() if m else self._end
            self.line += 1
        return self.pos


def _trim(text: str, start: int, end: int) -> int:
    """`end` moved back over the blank lines and the newline a block's line range ends with."""
    while end > start and text[end - 1] in " \t\r\n":
        end -= 1
    return end


class _Reader:
    """The blocks of the current section, read from markdown-it's tokens in order."""

    def __init__(self, text: str, offset: int) -> None:
        self.text = text
        self.line_start = _LineStarts(text, offset)
        self.blocks: list[_Block] = []
        self.open_list: tuple[int, int] | None = None  # (start, last line) of an unclosed list

    def span(self, first: int, last: int) -> tuple[int, int]:
        start = self.line_start(first)
        return start, _trim(self.text, start, self.line_start(last))

    def add(self, start: int, end: int, kind: str, after_blank: bool) -> None:
        prev = self.blocks[-1] if self.blocks else None
        if prev and not after_blank and kind == "para" and prev.kind in ("para", "list"):
            prev.end = end  # lines with no blank between read on as one block
        elif end > start:
            self.blocks.append(_Block(start, end, kind, self.text))

    def close_list(self) -> None:
        if self.open_list is not None:
            start, last = self.open_list
            self.add(start, _trim(self.text, start, self.line_start(last)), "list", True)
            self.open_list = None

    def nested(self, kind: str, first: int, last: int) -> None:
        """A code block or table inside the open list: a block of its own."""
        if self.open_list is not None:
            start, list_last = self.open_list
            inner, end = self.span(first, last)
            self.add(start, _trim(self.text, start, inner), "list", True)
            self.blocks.append(_Block(inner, end, kind, self.text))
            self.open_list = (self.line_start(last), list_last)


def _sections(doc: Doc):
    """Yield (heading_path, blocks) for each H1-H4 section. A list is cut around the code blocks
    and tables nested in it, so they are quoted and packed as code and tables."""
    tokens = BLOCKS.parse(doc.text[doc.body_start :])
    reader = _Reader(doc.text, doc.body_start)
    path: list[tuple[int, str]] = []
    prev_end_line = 0
    for i, token in enumerate(tokens):
        if token.map is None or token.nesting == -1:
            continue
        first, last = token.map
        if token.level > 0:
            if token.type in ("fence", "table_open"):
                reader.nested(_KINDS[token.type], first, last)
            continue
        reader.close_list()
        after_blank = first == 0 or first > prev_end_line
        prev_end_line = last
        heading = section_heading(tokens, i, after_blank)
        kind = "heading" if heading else _KINDS.get(token.type, "para")
        if heading:
            yield [t for _, t in path], reader.blocks
            level, title = heading
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, title))
            reader.blocks = [_Block(*reader.span(first, last), kind, doc.text)]
        elif kind == "list":
            reader.open_list = (reader.line_start(first), last)
        else:
            reader.add(*reader.span(first, last), kind, after_blank)
    reader.close_list()
    yield [t for _, t in path], reader.blocks


def _units(block: _Block, text: str, max_chars: int) -> Iterator[tuple[int, int]]:
    """Spans a block may be cut into: itself when it fits, else lines (tables, lists, code) or
    sentences. Read lazily, so an oversize block is never held as a list of its lines."""
    if block.end - block.start <= max_chars or block.kind == "heading":
        yield block.start, block.end
        return
    if block.kind in ("table", "list", "code"):
        for s, e in _line_spans(text, block.start, block.end):
            if text[s:e].strip():
                yield from _cut(text, s, e, max_chars)
        return
    pos = block.start
    for m in SENTENCE_END.finditer(text, block.start, block.end):
        yield from _cut(text, pos, m.start(), max_chars)
        pos = m.end()
    yield from _cut(text, pos, block.end, max_chars)


def _cut(text: str, s: int, e: int, max_chars: int) -> Iterator[tuple[int, int]]:
    """A span still too long (a sentence, a line) cut at spaces."""
    while e - s > max_chars:
        cut = text.rfind(" ", s, s + max_chars)
        cut = cut if cut > s else s + max_chars
        yield s, cut
        s = cut + 1
    yield s, e


def _pack(units: Iterable[tuple[int, int]], max_chars: int) -> Iterator[tuple[int, int]]:
    """Consecutive units packed into pieces of at most `max_chars`; a new piece starts with the
    previous piece's last unit when that is small (the overlap). Streams: one piece held."""
    start = -1
    last = (0, 0)
    count = 0
    for unit in units:
        if count and unit[1] - start <= max_chars:
            last, count = unit, count + 1
            continue
        if count:
            yield start, last[1]
            if count > 1 and last[1] - last[0] <= OVERLAP_CHARS and unit[1] - last[0] <= max_chars:
                start, last, count = last[0], unit, 2
                continue
        start, last, count = unit[0], unit, 1
    if count:
        yield start, last[1]


# an AsciiDoc description-list term ("Type:: array", "Description::") starts a block of its own
DESCRIPTION_TERM = re.compile(r"^[^\s:][^:]*::(?:\s|$)")
# the ">" of a blockquote (and of a quote inside it) before a line's text
QUOTE_PREFIX = re.compile(r"^[ \t]*>(?:[ \t]*>)*[ \t]?")


def _text_blocks(
    text: str, kind: str, lines: list[tuple[int, int]]
) -> list[tuple[str, list[tuple[int, int]]]]:
    """A paragraph or list cut at its markup lines (left out) and description-list terms; the
    lines of a blockquote become kind "quote", each line's span starting after its ">"."""
    out: list[tuple[str, list[tuple[int, int]]]] = []
    # a blockquote starts its block (a ">" inside a paragraph is a menu path's, "Sound > EQ")
    quote = bool(QUOTE_PREFIX.match(text[lines[0][0] : lines[0][1]]))
    for s, e in lines:
        if quote and (prefix := QUOTE_PREFIX.match(text[s:e])):
            s += prefix.end()
        body = text[s:e]
        if MARKUP_LINE.match(body) or not body.strip():
            out.append(("", []))  # a boundary
            continue
        term = DESCRIPTION_TERM.match(body)
        if not out or not out[-1][1] or term:
            new = "quote" if quote else "list" if LIST_ITEM.match(body) else "para"
            out.append((new, [(s, e)]))
        else:
            out[-1][1].append((s, e))
        if term and not body[term.end() :].strip():
            out.append(("", []))  # a term alone on its line: what follows is its description
    return [(k, ls) for k, ls in out if ls]


def block_spans(text: str) -> list[tuple[str, list[tuple[int, int]]]]:
    """(kind, line spans) of each paragraph, list, blockquote, table and code block of a markdown
    text, its H1-H4 headings left out: offsets into `text`, for quoting parts of a block verbatim.
    Markup lines (MARKUP_LINE) are left out and end the block they stand in."""
    doc = Doc(path="", title="", intent="", text=text, body_start=0, hash="")
    out: list[tuple[str, list[tuple[int, int]]]] = []
    for b in (b for _, section in _sections(doc) for b in section):
        lines = b.lines
        if b.kind == "para" and all(text[s:e].lstrip().startswith("|") for s, e in lines):
            b.kind = "table"  # rows without their header: a piece of a table cut at lines
        if b.kind in ("para", "list"):
            out += _text_blocks(text, b.kind, lines)
        elif b.kind == "table":
            out.append((b.kind, [(s, e) for s, e in lines if text[s:e].strip()]))
        elif b.kind != "heading":
            out.append((b.kind, lines))
    return out


def context_header(title: str, heading_path: list[str]) -> str:
    parts = list(heading_path)
    if not parts or parts[0].strip().lower() != title.strip().lower():
        parts.insert(0, title)
    return " > ".join(parts)


def chunk_doc(doc: Doc, max_chars: int = 2000) -> list[Chunk]:
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for path, blocks in _sections(doc):
        if not any(b.kind != "heading" for b in blocks):
            continue  # a heading with nothing under it: its subsections carry it in their path
        units = (u for b in blocks for u in _units(b, doc.text, max_chars))
        for start, end in _pack(units, max_chars):
            text = doc.text[start:end].replace("\r\n", "\n").strip()
            digest = hashlib.sha1(f"{doc.path}\n{' > '.join(path)}\n{text}".encode()).hexdigest()[
                :16
            ]
            cid = digest if digest not in seen else f"{digest}-{len(chunks)}"
            seen.add(cid)
            header = context_header(doc.title, path)
            chunks.append(
                Chunk(cid, doc.path, len(chunks), path, text, start, end, f"{header}\n\n{text}")
            )
    return chunks
