"""Split a markdown doc into chunks along its heading hierarchy.

Every chunk is one contiguous slice of the source file (`start`/`end` are offsets into the decoded
file), so any passage quoted from a chunk can be checked against the file. A section (text under an
H1-H4 heading, up to the next one) is one chunk when it fits in `max_chars`; a larger one is packed
from blocks (paragraphs, fenced code, tables, lists), splitting a block only when it alone is too
big: paragraphs at sentences, tables and lists at lines, code never. Consecutive pieces overlap by
one small unit so a sentence cut from its neighbour keeps its context.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .loader import FENCE, HEADING, Doc

SPLIT_LEVELS = 4  # H1-H4 start a chunk; H5/H6 stay inside their section
OVERLAP_CHARS = 300
SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+(?=\S)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


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
    lines: list[tuple[int, int]]  # (start, end) of each line, without its newline


def _lines(text: str, offset: int):
    """(start, end_without_newline, line) for each line of text[offset:]."""
    pos = offset
    for raw in text[offset:].splitlines(keepends=True):
        line = raw.rstrip("\r\n")
        yield pos, pos + len(line), line
        pos += len(raw)


def _sections(doc: Doc):
    """Yield (heading_path, blocks) for each H1-H4 section; code fences are never split."""
    path: list[tuple[int, str]] = []
    blocks: list[_Block] = []
    current: _Block | None = None
    fence: str | None = None

    def close():
        nonlocal current
        if current is not None:
            blocks.append(current)
            current = None

    for start, end, line in _lines(doc.text, doc.body_start):
        if fence is not None:
            assert current is not None  # an open fence always belongs to the current code block
            current.lines.append((start, end))
            current.end = end
            m = FENCE.match(line)
            if (
                m
                and m.group(1)[0] == fence[0]
                and len(m.group(1)) >= len(fence)
                and not line.strip()[len(m.group(1)) :].strip()
            ):
                fence = None
                close()
            continue
        heading = HEADING.match(line)
        if heading and len(heading.group(1)) <= SPLIT_LEVELS and heading.group(2).strip():
            close()
            yield [t for _, t in path], blocks
            level = len(heading.group(1))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, heading.group(2).strip()))
            blocks = [_Block(start, end, "heading", [(start, end)])]
            continue
        if not line.strip():
            close()
            continue
        if m := FENCE.match(line):
            close()
            fence = m.group(1)
            current = _Block(start, end, "code", [(start, end)])
            continue
        kind = (
            "table"
            if line.lstrip().startswith("|")
            else "list"
            if LIST_ITEM.match(line)
            else "para"
        )
        if current is not None and (
            current.kind == kind or (current.kind == "list" and kind == "para")
        ):
            current.lines.append((start, end))
            current.end = end
        else:
            close()
            current = _Block(start, end, kind, [(start, end)])
    close()
    yield [t for _, t in path], blocks


def _units(block: _Block, text: str, max_chars: int) -> list[tuple[int, int]]:
    """Spans a block may be cut into: itself when it fits, else lines (tables, lists) or
    sentences."""
    if block.end - block.start <= max_chars or block.kind in ("code", "heading"):
        return [(block.start, block.end)]
    if block.kind in ("table", "list"):
        return block.lines
    spans, pos = [], block.start
    for m in SENTENCE_END.finditer(text, block.start, block.end):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, block.end))
    out = []
    for s, e in spans:  # a "sentence" still too long is cut at spaces
        while e - s > max_chars:
            cut = text.rfind(" ", s, s + max_chars)
            cut = cut if cut > s else s + max_chars
            out.append((s, cut))
            s = cut + 1
        out.append((s, e))
    return out


def _pack(units: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    pieces: list[list[tuple[int, int]]] = []
    for unit in units:
        if pieces and unit[1] - pieces[-1][0][0] <= max_chars:
            pieces[-1].append(unit)
            continue
        new = [unit]
        if pieces:  # overlap: start the new piece with the previous unit when it is small
            prev = pieces[-1][-1]
            if (
                len(pieces[-1]) > 1
                and prev[1] - prev[0] <= OVERLAP_CHARS
                and unit[1] - prev[0] <= max_chars
            ):
                new.insert(0, prev)
        pieces.append(new)
    return [(p[0][0], p[-1][1]) for p in pieces]


def split_blocks(text: str) -> list[str]:
    """The paragraphs, lists, tables and whole code blocks of a markdown text, its H1-H4 headings
    left out: the units an offline answer quotes, cut by the same rules as the chunks."""
    doc = Doc(path="", title="", intent="", text=text, body_start=0, hash="")
    return [
        text[b.start : b.end] for _, blocks in _sections(doc) for b in blocks if b.kind != "heading"
    ]


# A line that is markup, not text: it ends the paragraph or list it stands in and is never quoted
# (what it marks, an admonition's text, is): AsciiDoc block attributes and admonition labels
# ("[NOTE]", "[source,yaml]"), delimiters and rules ("----", "====", "***", "|==="), GitHub
# alerts ("> [!NOTE]"), MkDocs and Docusaurus admonitions ("!!! note", ":::tip"), images and
# badges, an HTML tag or comment, a Hugo / Jinja shortcode ("{{< note >}}"), a reStructuredText
# directive (".. note::"), a table-of-contents tag, or what an AsciiDoc converter left unprocessed
# (a preprocessor directive "ifdef::openshift[]", an attribute entry ":toc:", an anchor
# "[[install]]") alone on its line.
MARKUP_LINE = re.compile(
    r"""^\s*(?:
        \[[A-Za-z][^\[\]]{0,60}\]
        |([-=*_.+~])\1{2,} | (?:[-*_][ \t]*){3,} | \|===
        |\[![A-Za-z]+\][-+]?
        |(?:!!!|\?\?\?\+?)[ \t]*[A-Za-z]+.* | :::+.*
        |(?:\[?!\[[^\]]*\](?:\([^)]*\)|\[[^\]]*\])?\]?(?:\([^)]*\))?[ \t]*)+
        |<!--.*--> | </?[A-Za-z][^>]*>
        |\{\{[<%].*[%>]\}\} | \{%.*%\} | \.\.[ \t]+[\w-]+::.* | \[\[_?TOC_?\]\]
        |(?:ifn?def|ifeval|endif|include|toc)::\S*\[.*\]
        |:!?[\w-]+!?: | :\w+(?:-\w+)+:[ \t].* | \[\[[\w:.-]+\]\]
    )\s*$""",
    re.X,
)
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
        if b.kind in ("para", "list"):
            out += _text_blocks(text, b.kind, b.lines)
        elif b.kind != "heading":
            out.append((b.kind, b.lines))
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
        units = [u for b in blocks for u in _units(b, doc.text, max_chars)]
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
