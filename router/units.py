"""The quotable units of a chunk (router/offline.py quotes them): sentences of paragraphs and
blockquote lines, list items, table rows and short code blocks, each a verbatim span of its chunk
(whitespace reflowed), with the docs' furniture (navigation, repeated lines, link lists) left out;
and a text cut at its units' ends (`whole_sentences`, `closed`: router/context.py's tastes).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from index.chunker import LIST_ITEM, SENTENCE_END, block_spans
from index.furniture import Furniture
from index.search import Hit

MAX_CODE_CHARS = 500
MAX_SENTENCE = 400  # a sentence held together by an unclosed bracket or quote, at most
# where sentences() may cut: the chunker's sentence ends, and after a closing brace before a
# capital ('{"type": "error"} Example error', '} ] } If a tool request is invalid')
CUTS = re.compile(rf"{SENTENCE_END.pattern}|(?<=}})\s+(?=[A-Z])")
TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$")
WORDS = re.compile(r"[A-Za-z]{2,}")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+|\]\([^)\s]*\)")
# a list item or line that is nothing but links: "* [Install](install.md)", "[Docs](a) | [API](b)"
LINKS_ONLY = re.compile(
    r"^\s*(?:[-*+]|\d+[.)])?\s*(?:\[[^\]]*\](?:\([^)]*\)|\[[^\]]*\])[\s|,;·•/-]*)+$"
)
# a breadcrumb: the site's root, then one or more pages ("Home > Guides > Install"); a line that
# differs on every page (its last part is the page's name), which line statistics cannot see
BREADCRUMB = re.compile(r"^\s*(?:home|docs|documentation)\s*(?:[>›»/|]|->|→)\s*[^.!?]*$", re.I)
ELLIPSIS = "…"


@dataclass
class Unit:
    """A quotable piece of a chunk: a sentence, a list item, a table row (with its header) or a
    short code block."""

    hit: Hit
    start: int
    end: int
    kind: str  # sentence | item | row | code
    text: str  # as shown: whitespace reflowed, except code
    block: int  # index of its block in the chunk
    header: tuple[int, int] | None = None  # a table row's header and rule lines
    score: float = 0.0


def reflow(text: str) -> str:
    """As shown: whitespace reflowed, HTML entities of converted docs decoded ("Toolkit&#8217;s",
    "&lt;name&gt;"); `occurs_in` decodes them too."""
    return " ".join(html.unescape(text).split())


def furniture(text: str) -> bool:
    """A unit never worth quoting, whatever the corpus: a word or two ("xlinkedin", "- 37 -"), a
    bare link or URL, a breadcrumb ("Home > Docs > Install"), a run of title-case link labels
    without a sentence, a scraped menu or tab bar that says itself twice ("Rate
    limitsSupported regions xlinkedin Rate limitsSupported regions xlinkedin Python Typescript
    PythonTypescript"). The corpus's own furniture (lines on most pages, page numbers, its
    titles) is left out by `units_of`."""
    words = WORDS.findall(URL.sub(" ", text))
    if len(words) < 3 or LINKS_ONLY.match(text) or BREADCRUMB.match(text):
        return True
    if re.search(r"[.!?:]\s*$", text):
        return False
    caps = sum(w[0].isupper() for w in words)
    return (len(words) >= 5 and caps >= 0.6 * len(words)) or repeats_itself(text)


def repeats_itself(text: str) -> bool:
    """Short labels each said twice or more ("Python Python Go Go", "AWS CLI AWS CLI"), or a
    sixth or more of its four-word runs said twice, words glued by a lost space ("SDKsAbout")
    split: how a scraped navigation list or a row of code-tab labels reads. A sentence that names
    a thing twice ("Claude for Sheets ... Claude for Sheets work") repeats one or two runs of
    many."""
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower().split()
    if len(words) <= 12 and all(words.count(w) >= 2 for w in words):  # "Python Python Go Go"
        return True
    runs = [tuple(words[i : i + 4]) for i in range(len(words) - 3)]
    repeated = len(runs) - len(set(runs))
    return repeated >= 2 and repeated >= len(runs) / 6


ENTITY_END = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z]+\d*);$")


def sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The sentences of text[start:end], cut where the chunker cuts them (SENTENCE_END) and
    after code closed by a brace, except inside brackets or double quotes and after a lone
    dot: code flattened into prose ('messages=[{"role": "user"}]', "client . messages") stays one
    piece instead of fragments such as '"overloaded_error", "message":', and the prose after it
    is a piece of its own. A piece grown past MAX_SENTENCE is cut anyway."""
    out, pos = [], start
    for m in CUTS.finditer(text, start, end):
        piece = text[pos : m.start()]
        opened = sum(piece.count(c) for c in "([{") - sum(piece.count(c) for c in ")]}")
        lone_dot = text[m.start() - 1] == "." and text[max(m.start() - 2, 0)].isspace()
        entity = ENTITY_END.search(text, max(m.start() - 12, pos), m.start())  # "&gt;" is no ";"
        # "Define requirements: features, performance, and cost.": a colon or semicolon that
        # runs on in lowercase is inside the sentence (quoted alone, its tail is a fragment)
        runs_on = text[m.start() - 1] in ":;" and text[m.end()].islower()
        inside = opened > 0 or piece.count('"') % 2 == 1 or lone_dot or bool(entity) or runs_on
        if inside and m.start() - pos < MAX_SENTENCE:
            continue
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, end))
    return [(s, e) for s, e in out if text[s:e].strip()]


def link_list(text: str, items: list[tuple[int, int]]) -> bool:
    """A list of link titles whose own heading was lost ("* Rebooting a node gracefully" after a
    procedure, from AsciiDoc's ".Additional resources"): every item a short capitalised phrase of
    two or more words, none a sentence."""
    bodies = [LIST_ITEM.sub("", text[s:e], count=1).strip() for s, e in items]
    return all(
        b[:1].isupper() and 2 <= len(b.split()) <= 12 and not re.search(r"[.!?:;,)]$", b)
        for b in bodies
    )


def _items(
    text: str, lines: list[tuple[int, int]], last: bool, corpus: Furniture
) -> list[tuple[int, int]]:
    """A list's items (an item with its continuation lines, cut at a furniture line: a page
    break inside an item); none when the list ends its chunk after other content (`last`), with
    no lead-in, and is a list of bare link titles; only the sentences when most items are titles
    of the corpus's own sections (a list of cross-references: "See also", "Additional
    resources", in any language)."""
    items: list[list[int]] = []
    cut = True  # the next line starts an item
    for s, e in lines:
        if corpus.line(text[s:e]):
            cut = True
        elif cut or LIST_ITEM.match(text[s:e]):
            items.append([s, e])
            cut = False
        else:
            items[-1][1] = e
    spans = [(s, e) for s, e in items]
    before = text[: lines[0][0]].rstrip()
    if spans and last and before and not before.endswith(":") and link_list(text, spans):
        return []
    if sum(corpus.title(text[s:e]) for s, e in spans) * 2 > len(spans):
        return [(s, e) for s, e in spans if re.search(r"[.!?]$", text[s:e].rstrip())]
    return spans


def _label(line: str) -> bool:
    return bool(line[:1].isupper()) and len(line.split()) <= 8 and not re.search(r"[.!?:;,]$", line)


def label_runs(text: str, lines: list[tuple[int, int]]) -> list[tuple[bool, list[tuple[int, int]]]]:
    """A paragraph's lines in runs: (True, run) for three or more lines in a row that are each a
    short capitalised label without punctuation at its end ("Be clear and direct", "Use XML
    tags", "Long context tips"), a list whose markers the converter lost (a scraped menu or
    contents), to be quoted a line each rather than run together into one "sentence"; (False,
    run) for the rest. A menu path ("Settings", ">", "Sound") or a wrapped sentence is no run."""
    flags = [_label(text[s:e].strip()) for s, e in lines]
    out: list[tuple[bool, list[tuple[int, int]]]] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and flags[j] == flags[i]:
            j += 1
        label = flags[i] and j - i >= 3
        if out and out[-1][0] == label:
            out[-1][1].extend(lines[i:j])
        else:
            out.append((label, list(lines[i:j])))
        i = j
    return out


PROSE = re.compile(r"[a-z]{2}[.!](?:\s|$)")  # a sentence ends in it (not "1." of a numbered list)


def said_twice(text: str, lines: list[tuple[int, int]]) -> set[int]:
    """The lines of a paragraph that a scraped page renders twice in a row, once with its spaces
    lost ("OverviewTicket Routingxlinkedin" then "OverviewTicket Routing", "xlinkedin"; a page's
    contents as "Why use examples? Crafting effective examples" then "Why use examples?Crafting
    effective examples"): a menu or a table of contents, both copies left out; prose said
    twice keeps its better-spaced copy."""
    shown = [text[s:e] for s, e in lines]
    out: set[int] = set()
    for i in range(len(shown)):
        for j in range(i + 1, min(len(shown), i + 3) + 1):
            first = " ".join(shown[i:j])
            key = re.sub(r"\s+", "", first).lower()
            if len(key) < 8:
                continue
            for k in range(j + 1, min(len(shown), j + 3) + 1):
                second = " ".join(shown[j:k])
                if re.sub(r"\s+", "", second).lower() != key:
                    continue
                if first.lower().split() == second.lower().split():
                    continue  # the same line twice (a code tab, an example): no scraping artefact
                if not PROSE.search(first + " " + second):
                    out.update(range(i, k))
                elif len(first.split()) < len(second.split()):
                    out.update(range(i, j))
                else:
                    out.update(range(j, k))
    return out


def _prose_units(
    hit: Hit, kind: str, lines: list[tuple[int, int]], b: int, corpus: Furniture
) -> list[Unit]:
    """The sentences of a paragraph (a run of labels: a line each) or of a blockquote's lines,
    which are quoted without their ">"; furniture lines (a page number, a running header) and
    lines a scraped page says twice (said_twice) are left out, the text on either side of them
    quoted apart."""
    text = hit.chunk["text"]
    stamped = {i for i, (s, e) in enumerate(lines) if corpus.line(text[s:e])}
    if kind == "quote":
        runs = [(False, [line]) for i, line in enumerate(lines) if i not in stamped]
    else:
        twice = said_twice(text, lines) | stamped
        runs = []
        part: list[tuple[int, int]] = []  # the lines since the last one left out
        for i, line in enumerate(lines):
            if i not in twice:
                part.append(line)
            if part and (i in twice or i == len(lines) - 1):
                runs += label_runs(text, part)
                part = []
    out = []
    for label, run in runs:
        spans = run if label else sentences(text, run[0][0], run[-1][1])
        out += [
            Unit(hit, s, e, "item" if label else "sentence", reflow(text[s:e]), b) for s, e in spans
        ]
    return out


NO_FURNITURE = Furniture()


def units_of(hit: Hit, corpus: Furniture = NO_FURNITURE) -> list[Unit]:
    """The quotable units of a chunk: sentences of paragraphs and blockquote lines, list items,
    table rows and short code blocks. Left out: markup lines (chunker.MARKUP_LINE), the corpus's
    furniture lines (`corpus`: page numbers, lines on most pages), a unit that is only the title
    of one of the corpus's sections or docs (a cross-reference, a table of contents), the link
    titles of a list of cross-references (items that are no sentence), a list of bare link
    titles ending a chunk, and `furniture`."""
    text = hit.chunk["text"]
    blocks = block_spans(text)
    out: list[Unit] = []
    for b, (kind, lines) in enumerate(blocks):
        start, end = lines[0][0], lines[-1][1]
        if kind == "code":
            if end - start <= MAX_CODE_CHARS:
                out.append(Unit(hit, start, end, "code", text[start:end].strip("\n"), b))
        elif kind == "table":
            rule = len(lines) > 1 and TABLE_RULE.match(text[lines[1][0] : lines[1][1]])
            header = (lines[0][0], lines[1][1]) if rule else None
            for s, e in lines[2:] if rule else lines:
                # a line without a pipe that a table takes in (GFM) may be a running footer
                lazy = not text[s:e].lstrip().startswith("|") and corpus.line(text[s:e])
                if (WORDS.search(text[s:e]) or re.search(r"\d", text[s:e])) and not lazy:
                    out.append(Unit(hit, s, e, "row", html.unescape(text[s:e].strip()), b, header))
        elif kind == "list":
            last = 0 < b == len(blocks) - 1  # the last block, after some content
            out += [
                Unit(hit, s, e, "item", reflow(text[s:e]), b)
                for s, e in _items(text, lines, last, corpus)
            ]
        else:
            out += _prose_units(hit, kind, lines, b, corpus)
    return [
        u
        for u in out
        if u.kind in ("row", "code") or not (furniture(u.text) or corpus.title(u.text))
    ]


def closed(text: str) -> str:
    """`text` with a code block it was cut inside closed again."""
    fences = [line.strip()[:3] for line in text.split("\n") if line.strip()[:3] in ("```", "~~~")]
    return text + "\n" + fences[-1] if len(fences) % 2 else text


def whole_sentences(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at the last line or sentence end that fits, or,
    when not even its first sentence fits, to that sentence: a passage cut inside a sentence
    says less than its sentence did ("You can define the (HTTP)"), and what cites it cannot be
    checked."""
    if len(text) <= limit:
        return text
    ends = sorted(
        {m.start() for m in re.finditer(r"\n", text)}
        | {e for s, e in sentences(text, 0, len(text))}
    )
    fits = [e for e in ends if 0 < e <= limit and text[:e].strip()]
    if fits:
        return text[: fits[-1]]
    return text[: next((e for e in ends if text[:e].strip()), len(text))]
