"""The offline extract and answer steps: the few sentences, list items or table rows of the top
chunks that answer the question, quoted with their sources. Used when no Claude key is set and
when a Claude step fails.

Every quote is a verbatim piece of its chunk (whitespace reflowed: hard-wrapped lines and menu
paths written one word per line become one line; the check is whitespace-insensitive), so each
is a citation that `occurs_in` its chunk.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import numpy as np

from index.chunker import context_header
from index.clean import display
from index.embedders import Embedder, EmbeddingError
from index.furniture import Furniture
from index.search import BM25, EVERYDAY_ZIPF, Hit, tokenize, zipf

from . import exact
from .answer import Citation, Passage, Source, occurs_in
from .compose import OK, Written
from .units import ELLIPSIS, NO_FURNITURE, Unit, units_of

# a unit's score = CHUNK_WEIGHT * its chunk's fused score + the rest from the unit itself
CHUNK_WEIGHT = 0.5
# the units scored lexically whose cosine to the question is then computed (embedding them all
# would cost ~4x the time for the same choice on claude-docs)
EMBED_CANDIDATES = 8
# what an answer quotes: units scoring within RATIO of the best, at most MAX_UNITS of them and
# about BUDGET characters (the first unit always; a lead-in ending in ":" brings what it
# introduces)
RATIO, MAX_UNITS, BUDGET = 0.8, 4, 600
SKIPPED_ROWS = "| … |"  # where a quoted table's rows are left out


def extract(
    question: str,
    query_vec: np.ndarray | None,
    hits: list[Hit],
    bm25: BM25,
    embedder: Embedder,
    corpus: Furniture = NO_FURNITURE,
    names: list[str] | None = None,
    deeper: list[Hit] | None = None,
    writes: Callable[[Hit], bool] | None = None,
) -> list[Passage]:
    """The units of the top chunks that score best against the question, by the retrieval's own
    signals: the chunk's fused score, and the unit's idf-weighted term coverage (alone and read
    with its chunk's title and heading path: a row under "#### TW-1429" is about TW-1429) and
    cosine similarity. `corpus`: the index's page furniture (Searcher.furniture). `names`: the
    identifiers the question asks about (router/exact.py): when units write them all, or sit
    under a heading that does, only those are quoted (the row that holds the code, not its
    neighbours). A question asking how to do something is answered by what to do: when no
    chosen unit is an instruction, the best instruction in the first quote's section or its
    subsections (among `hits` and `deeper`) is quoted too. `writes`: whether a hit's page writes
    the question's subject (on_subject); the best unit of such a page leads the quotes."""
    q = tokenize(question)
    units = [u for h in hits for u in units_of(h, corpus)]
    if names:
        units = holding(units, names)
    if not units:
        return []
    headers = {
        h.chunk["id"]: tokenize(context_header(h.chunk["title"], h.chunk["heading_path"]))
        for h in hits
    }
    for u in units:
        own = tokenize(u.text)
        lex = 0.6 * bm25.coverage(q, own) + 0.4 * bm25.coverage(q, own + headers[u.hit.chunk["id"]])
        u.score = CHUNK_WEIGHT * u.hit.score + (1 - CHUNK_WEIGHT) * lex
    units.sort(key=lambda u: -u.score)
    if query_vec is not None:
        top = units[:EMBED_CANDIDATES]
        texts = [
            f"{context_header(u.hit.chunk['title'], u.hit.chunk['heading_path'])}\n\n{u.text}"
            for u in top
        ]
        try:
            sims = np.clip(embedder.embed_now(texts) @ query_vec, 0, None)
            for u, sim in zip(top, sims, strict=True):
                lex = (u.score - CHUNK_WEIGHT * u.hit.score) / (1 - CHUNK_WEIGHT)
                u.score = CHUNK_WEIGHT * u.hit.score + (1 - CHUNK_WEIGHT) * (
                    0.4 * lex + 0.6 * float(sim)
                )
            units[: len(top)] = sorted(top, key=lambda u: -u.score)
        except EmbeddingError:  # the embedding service failing here only costs the vector half
            pass
    lead = next((u for u in units if writes(u.hit)), None) if writes else None
    if lead is not None:  # the best unit whose page writes the question's subject comes first
        units.remove(lead)
        units.insert(0, lead)
    chosen = _choose(units)
    if HOW.match(question) and not any(instruction(u) for u in chosen):
        chosen += _instruction(q, chosen[0], [*hits, *(deeper or [])], bm25, corpus)
    return _passages(chosen)


def on_subject(question: str, bm25: BM25, pages: np.ndarray) -> Callable[[Hit], bool]:
    """Whether a hit's page writes every term of the question's subject: the question's terms
    rarer than everyday English (EVERYDAY_ZIPF, the edge the answer decision's `rare` reads) that
    the docs write; the everyday ones ("how many times", "failed") say what is asked of it. A
    page that never writes the subject is about something else, however many of the question's
    other words it holds. `pages`: each row's page, as an integer (Corpus.pages)."""
    subject = []
    for t in sorted(set(tokenize(question))):
        i = bm25.vocab.get(t)
        if i is not None and zipf(t) < EVERYDAY_ZIPF:
            rows = bm25.postings_docs[bm25.offsets[i] : bm25.offsets[i + 1]]
            subject.append(set(np.unique(pages[rows]).tolist()))
    return lambda h: all(int(pages[h.row]) in written for written in subject)


def with_subject(top: list[Hit], hits: list[Hit], writes: Callable[[Hit], bool]) -> list[Hit]:
    """The top hits, and when none of their pages writes the question's subject, the best of
    `hits` whose page does (a short page holding the question's everyday words can push it out
    of the top)."""
    if any(writes(h) for h in top):
        return top
    found = next((h for h in hits if h not in top and writes(h)), None)
    return top + [found] if found is not None else top


# a question asking for a way to do something ("How do I rotate …", "how can we …", "how to …"):
# its answer is what to do
HOW = re.compile(
    r"\s*how\s+(?:(?:do|can|could|should|would|does|may)\s+(?:i|we|you|one)\b|to\b)", re.I
)


def header(u: Unit) -> str:
    return context_header(u.hit.chunk["title"], u.hit.chunk["heading_path"])


def instruction(u: Unit) -> bool:
    """A command to run or a step to take: a code block or a numbered list's item."""
    return u.kind == "code" or (u.kind == "item" and bool(STEP.match(u.text)))


def _instruction(
    q: list[str], first: Unit, hits: list[Hit], bm25: BM25, corpus: Furniture
) -> list[Unit]:
    """The instruction of `first`'s section or its subsections that covers most of the question
    (read with its headings; a command before a step alike, as what one runs is the more exact
    answer), none when they hold none."""
    doc, path = first.hit.chunk["doc"], list(first.hit.chunk["heading_path"])
    seen: set[str] = set()
    inside = []
    for h in hits:
        c = h.chunk
        if c["doc"] == doc and list(c["heading_path"])[: len(path)] == path and c["id"] not in seen:
            seen.add(c["id"])
            inside += [u for u in units_of(h, corpus) if instruction(u)]
    scored = [
        (bm25.coverage(q, tokenize(f"{header(u)} {u.text}")), u.kind == "code", -i, u)
        for i, u in enumerate(inside)
    ]
    return [max(scored, key=lambda t: t[:3])[3]] if scored else []


def holding(units: list[Unit], names: list[str]) -> list[Unit]:
    """The units that write every one of `names`, else those under a heading that writes them
    all; all of them when none does (a unit that writes one of several names asked is not where
    the docs answer them)."""

    def held(text: str) -> bool:
        return all(exact.holds(text, n) for n in names)

    own = [u for u in units if held(u.text)]
    return own or [u for u in units if held(" ".join(u.hit.chunk["heading_path"]))] or units


def _choose(units: list[Unit]) -> list[Unit]:
    """The best units within the budget, no text twice (split sections and sibling pages repeat
    paragraphs), each with the units that come with it (_companions)."""
    best = units[0].score
    chosen: list[Unit] = []
    seen: list[str] = []
    chars = 0

    def take(u: Unit) -> bool:
        nonlocal chars
        # letters and digits only: "SummarizationLearn" repeats "Summarization Learn"
        key = re.sub(r"[^a-z0-9]", "", u.text.lower())
        if any(key in s or s in key for s in seen):
            return False
        seen.append(key)
        chosen.append(u)
        chars += len(u.text)
        return True

    by_chunk: dict[str, list[Unit]] = {}
    for u in units:
        by_chunk.setdefault(u.hit.chunk["id"], []).append(u)
    for u in units:
        if chosen and (u.score < RATIO * best or len(chosen) >= MAX_UNITS or chars >= BUDGET):
            break
        if chosen and chars + len(u.text) > BUDGET * 1.3:
            continue
        if not take(u):
            continue
        siblings = by_chunk[u.hit.chunk["id"]]
        brought = _companions(u, siblings)
        # a row brought by a lead-in brings its table as a chosen row does
        rows = next((_companions(v, siblings) for v in brought if v.kind == "row"), [])
        for v in brought + [r for r in rows if r not in brought]:
            if chars + len(v.text) > BUDGET * 1.5:
                break
            take(v)
    return chosen


def _companions(u: Unit, siblings: list[Unit]) -> list[Unit]:
    """What a chosen unit brings, in the order of the text: a lead-in ("To add more test
    cases:"), what it introduces (_introduced); a step of a numbered list, its procedure
    (_procedure); a row, the other rows of a small table whose rows answer alike ("US" and "EU"
    of the egress IPs), every other row of its table when the whole table fits in the BUDGET (a
    table is read whole: "1 hour" between "Immediately" and "24 hours"; a longer one is quoted
    in part, its skipped rows marked in `compose`). `siblings`: the units of its chunk."""
    if u.text.rstrip().endswith(":"):
        return _introduced(u, siblings)
    if u.kind == "item" and STEP.match(u.text):
        return _procedure(u, siblings)
    rows = [v for v in siblings if u.kind == "row" and v.block == u.block]
    if sum(len(v.text) for v in rows) <= BUDGET:
        return sorted(rows, key=lambda v: v.start)
    return []


STEP = re.compile(r"\s*\d+[.)]\s")  # a numbered list's item: a procedure's step


def _list_blocks(siblings: list[Unit]) -> set[int]:
    """The blocks of list items and code: a procedure's steps and the commands between them (the
    chunker cuts a list around the code blocks in it)."""
    kinds: dict[int, set[str]] = {}
    for v in siblings:
        kinds.setdefault(v.block, set()).add(v.kind)
    return {b for b, k in kinds.items() if k in ({"item"}, {"code"})}


def _run(block: int, inside: set[int]) -> range:
    """The consecutive blocks of `inside` around `block`."""
    lo, hi = block, block
    while lo - 1 in inside:
        lo -= 1
    while hi + 1 in inside:
        hi += 1
    return range(lo, hi + 1)


def _in_order(units: list[Unit], u: Unit) -> list[Unit]:
    return sorted((v for v in units if v is not u), key=lambda v: v.start)


def _introduced(u: Unit, siblings: list[Unit]) -> list[Unit]:
    """What a lead-in introduces: when it ends its block and a list follows, all of that list
    (its items, and the code and list blocks it runs on into: a procedure); else the four units
    after it."""
    later = _in_order([v for v in siblings if v.start > u.start], u)
    inside = _list_blocks(siblings)
    if later and later[0].block != u.block and later[0].block in inside:
        blocks = _run(later[0].block, inside)
        return [v for v in later if v.block in blocks]
    return later[:4]


def _procedure(u: Unit, siblings: list[Unit]) -> list[Unit]:
    """The procedure a step is in: the lead-in just before it, and all its steps (with the code
    between them)."""
    blocks = _run(u.block, _list_blocks(siblings))
    before = [v for v in siblings if v.block == blocks.start - 1]
    lead = [max(before, key=lambda v: v.start)] if before else []
    lead = [v for v in lead if v.text.rstrip().endswith(":")]
    return _in_order(lead + [v for v in siblings if v.block in blocks], u)


def _passages(chosen: list[Unit]) -> list[Passage]:
    """Chosen units as passages: by chunk (best chunk first), in the order of the text, touching
    units merged, a table's header before its first chosen row."""
    order: dict[str, list[Unit]] = {}
    for u in chosen:
        order.setdefault(u.hit.chunk["id"], []).append(u)
    out: list[Passage] = []
    for cid, group in order.items():
        group.sort(key=lambda u: u.start)
        text = group[0].hit.chunk["text"]
        pieces: list[tuple[int, int, str, float]] = []
        headers: set[tuple[int, int]] = set()
        prev: Unit | None = None
        for u in group:
            if u.header and u.header not in headers:
                headers.add(u.header)
                h0, h1 = u.header
                head = "\n".join(html.unescape(line.strip()) for line in text[h0:h1].split("\n"))
                if pieces and not text[pieces[-1][1] : h0].strip():  # right after a quote
                    s, _, t, sc = pieces[-1]
                    pieces[-1] = (s, h1, f"{t}\n\n{head}", max(sc, u.score))
                elif not (pieces and pieces[-1][1] >= h0):
                    pieces.append((h0, h1, head, u.score))
            # sentences of one paragraph run on; anything else (a sentence after a code block,
            # a list item, another paragraph) starts a line of its own
            joiner = " " if u.kind == "sentence" and prev and prev.block == u.block else "\n"
            if pieces and not text[pieces[-1][1] : u.start].strip():
                s, _, t, sc = pieces[-1]
                pieces[-1] = (s, u.end, f"{t}{joiner}{u.text}", max(sc, u.score))
            else:
                pieces.append((u.start, u.end, u.text, u.score))
            prev = u
        out += [Passage(cid, t, sc) for _, _, t, sc in pieces]
    return out


def source_label(src: Source) -> str:
    """The source named once and briefly: its own heading (the title when the chunk is the page's
    top), the full "Title › path" being in the numbered sources under the answer."""
    return display(src.heading_path[-1] if src.heading_path else src.title)


LEAD = "From the docs:"


def rows_after(line: str, text: str) -> bool:
    """Whether a quoted table row is followed, in its chunk, by rows the quote leaves out."""
    if not line.startswith("|"):
        return False
    at = text.find(line)
    if at < 0:
        return False
    after = text[at + len(line) :].lstrip(" \t").split("\n", 2)
    return len(after) > 1 and after[1].lstrip().startswith("|")


def compose(
    passages: list[Passage], by_chunk: dict[str, Source], chunks: dict[str, dict], lead: str = LEAD
) -> Written:
    """The passages quoted under `lead`, those of one chunk together under one attribution; each
    quote is a citation of its chunk (`chunks`: chunk id → chunk, whose text each quote is
    checked in)."""
    groups: dict[str, list[Passage]] = {}
    for p in passages:
        groups.setdefault(p.chunk_id, []).append(p)
    out, cited = [], []
    for cid, group in groups.items():
        src = by_chunk[cid]
        lines: list[str] = []
        for p in group:
            verified = occurs_in(p.text, chunks[cid]["text"])
            cited.append(Citation(src.n, src.doc, src.section, src.url, p.text, verified))
            if lines:  # what lies between two quotes of one chunk is left out, and marked
                table = p.text.startswith("|") and lines[-1].startswith("|")
                lines.append(SKIPPED_ROWS if table else ELLIPSIS)
            lines += p.text.split("\n")
            if rows_after(lines[-1], chunks[cid]["text"]) and p is group[-1]:
                lines.append(SKIPPED_ROWS)
        quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in lines)
        out.append(f"{quoted}\n— {source_label(src)} [{src.n}]")
    return Written(OK, (f"{lead}\n\n" if lead else "") + "\n\n".join(out), cited)
