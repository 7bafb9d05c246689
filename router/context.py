"""What Claude reads: the question's candidates packed to a token budget.

The search's candidates (the fused top `depth`, reranked by Voyage with a key) are read best
first, a section at a time: the whole section (every chunk of it, merged in the order of the
file, overlaps once) when it fits in what is left of the budget, else the candidate chunks of it
that fit; a section already read is never sent twice (a later candidate of it is merged into it).
Each section goes to the answer as one search_result whose title is its heading path ("Title ›
Section") and whose text blocks are its paragraphs (router/citations.py), as a reader of the page
reads them (router/rendered.py: an in-page anchor is its text). Sections that do not fit
are passed over for later, smaller ones, so the budget is filled in rank order.

Tokens are estimated as the Messages API stand-in bills them (~3.5 characters a token of the
request's JSON, Anthropic's rule of thumb for English), so the budget is what a question's read
costs: bench/reads.py measures the gold section's presence and the cost per budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from index.chunker import LIST_ITEM
from index.search import BM25, Hit, tokenize

from .answer import Citation, Passage, Source, label
from .citations import number_sources, paragraphs
from .exact import Asked, holds, joined
from .rendered import shown
from .units import closed, sentences, whole_sentences

if TYPE_CHECKING:
    from .corpus import Corpus

# the tokens of docs a question's first read holds (FIELDGUIDE_READ_TOKENS) and how deep in the
# search's candidates it reaches (FIELDGUIDE_RERANK_DEPTH, the reranker's depth with a Voyage key):
# bench/reads.py
READ_TOKENS = 3500
DEPTH = 40
LOOKS = 2  # second looks a question may take (FIELDGUIDE_SECOND_LOOKS: router/second_look.py)


@dataclass(frozen=True)
class Budget:
    """What Claude reads of the docs for one question: `tokens` of its `depth` best candidates,
    and at most `looks` second looks."""

    tokens: int = READ_TOKENS
    depth: int = DEPTH
    looks: int = LOOKS


BUDGET = Budget()
CHARS_PER_TOKEN = 3.5
# what a search_result costs besides its text and title: the block's JSON with its source (a
# number) and each text block's own JSON ({"type": "text", "text": ""})
RESULT_CHARS, BLOCK_CHARS = 110, 30
BLOCK_TOKENS = round(BLOCK_CHARS / CHARS_PER_TOKEN)  # a taste of several pieces: a block more
# a section read whole at most: a longer one is read by its candidate chunks alone
MAX_SECTION_CHARS = 40_000
HEADING = re.compile(r"^#{1,6}\s[^\n]*$")  # a paragraph that is only an ATX heading
RULE = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$")  # a table's header rule
# a paragraph that is only an HTML comment
COMMENT = re.compile(r"^\s*<!--(?:(?!-->).)*-->\s*$", re.S)


@dataclass
class Read:
    """One section as Claude reads it: `key` is its best-ranked candidate chunk's id (the
    passages' chunk_id, whose record names the doc, title, heading path and link), `text` the
    parts read, merged in the order of the file."""

    key: str
    chunk: dict
    text: str
    score: float
    # what of the section `text` holds: "taste" (its paragraph that holds most of the question),
    # "chunks" (some of its chunks), "whole" (every chunk of it)
    part: str
    chunk_ids: list[str] = field(default_factory=list)
    section: int = -1  # the section's id in the index (router/corpus.py section_rows)

    @property
    def label(self) -> str:
        return label(self.chunk["title"], self.chunk["heading_path"])

    @property
    def tokens(self) -> int:
        return cost(self.text, self.label)


def cost(text: str, name: str) -> int:
    """Tokens a section costs as one search_result: its text, its title, its blocks' JSON."""
    blocks = max(1, text.count("\n\n") + 1)
    return round((len(text) + len(name) + RESULT_CHARS + BLOCK_CHARS * blocks) / CHARS_PER_TOKEN)


def merged(chunks: list[dict]) -> str:
    """The chunks of one section (contiguous slices of one file, `start`/`end`) as one text in
    the order of the file: an overlap is kept once, a gap between two chunks is a blank line."""
    parts = sorted(chunks, key=lambda c: c["start"])
    text, end = parts[0]["text"], parts[0]["end"]
    for c in parts[1:]:
        if c["end"] <= end:
            continue  # inside what is already there
        if c["start"] < end:
            text += c["text"][end - c["start"] :]
        else:
            text = text.rstrip("\n") + "\n\n" + c["text"].lstrip("\n")
        end = c["end"]
    return shown(text)


def units(text: str, share: int) -> list[str]:
    """A chunk's pieces a taste is chosen from: its paragraphs and code blocks, and a paragraph
    longer than `share` tokens by its parts: a table's rows (each with the table's header lines
    before it, or alone where both do not fit in the share: a taste cut short would keep the
    header and lose the row; a row is never cut, as a code block is not: its cells name what its
    sentences are about), a list's items, and prose (hard-wrapped or not) by its sentences, so
    that no piece is a fragment of a line."""
    return split(paragraphs(text), share)


def split(paras: list[str], share: int) -> list[str]:
    """The pieces (`units`) of a text's paragraphs `paras`."""
    out: list[str] = []
    for para in paras:
        if HEADING.match(para) or COMMENT.match(para):
            continue  # the section's heading (its title says it already), or unseen by readers
        if len(para) <= share * CHARS_PER_TOKEN or para.lstrip().startswith(("```", "~~~")):
            out.append(para)  # a code block is one piece: whole or not at all
            continue
        lines = [line for line in para.split("\n") if line.strip()]
        if len(lines) > 2 and lines[0].lstrip().startswith("|") and RULE.match(lines[1]):
            head = "\n".join(lines[:2]) + "\n"
            fit = share * CHARS_PER_TOKEN - len(head)
            out += [head + line if len(line) <= fit else line for line in lines[2:]]
            continue
        items: list[str] = []  # a list item with its continuation lines, a table's row (of a
        # chunk that starts inside a table), or the prose before
        for line in lines:
            if items and not LIST_ITEM.match(line) and not line.lstrip().startswith("|"):
                items[-1] += "\n" + line
            else:
                items.append(line)
        for item in items:
            if len(item) <= share * CHARS_PER_TOKEN or item.lstrip().startswith("|"):
                out.append(item)  # a table's row, as a code block: whole or not at all
            else:
                out += [item[a:b] for a, b in sentences(item, 0, len(item))]
    return out


def excerpt(
    chunks: list[dict],
    terms: list[str],
    names: list[str],
    bm25: BM25,
    share: int,
    views: dict[str, list[str]] | None = None,
) -> str:
    """What stands for a section when only a taste of it fits (about `share` tokens): its pieces
    (`units`) that write a word of the question or an asked identifier, best first, as many as
    fit in the share, in the order of the text; a piece is better when it writes more of the
    asked identifiers (`names`), then when it holds more of the question's weight
    (BM25.coverage: the share of the question's idf its words hold, the section's heading path
    read with it), then when it comes first. A piece longer than the share is taken only when
    none fits (the opening lines of a code block, "```sql", say nothing), and markup ("!!! tip",
    "1.") never is; when no piece that fits writes a word of the question, the best that is a
    sentence stands for the section, else the best piece, cut at a line or a sentence's end,
    never inside a sentence (`whole_sentences`), a code block closed; but when no piece that fits
    writes an asked identifier, the best that still writes one once cut so (a long table row).
    `views`: the paragraphs of the chunks' texts as shown, by id, where the caller has them."""
    weight = bm25.weights(terms)  # BM25.coverage's weights, once for all the pieces
    total, weighed = sum(weight.values()) or 1.0, weight.keys()
    pieces: list[tuple[tuple[int, float], int, str, int]] = []
    for c in chunks:
        head = set(tokenize(" ".join(c["heading_path"])))
        paras = views.get(c["id"]) if views is not None else None
        for piece in split(paragraphs(shown(c["text"])) if paras is None else paras, share):
            words = tokenize(piece)
            own = set(words)
            named = sum(holds(piece, n) for n in names)
            # summed in the weights' order, as BM25.coverage sums them: the same floats
            alone = sum(weight[t] for t in sorted(own & weighed))
            score = (named, sum(weight[t] for t in sorted((own | head) & weighed)) / total)
            # what the piece says alone: 2 a word of the question, 1 a sentence, 0 markup
            says = 2 if named or alone else int(len(words) >= 3)
            pieces.append((score, len(pieces), piece, says))
    limit = int(share * CHARS_PER_TOKEN)
    best = sorted(pieces, key=lambda p: (-p[0][0], -p[0][1], p[1]))
    chosen: list[tuple[int, str]] = []
    used = 0
    for _, order, piece, says in best:
        if says == 2 and used + len(piece) <= limit:
            chosen.append((order, piece))
            used += len(piece) + BLOCK_CHARS  # each piece a text block of its own
    fits = [(order, piece) for _, order, piece, says in best if says and len(piece) <= limit]
    if names and not any(holds(p, n) for _, p in chosen for n in names):
        cuts = [(o, whole_sentences(p, limit)) for (named, _), o, p, _ in best if named]
        chosen = [(o, c) for o, c in cuts if any(holds(c, n) for n in names)][:1] or chosen
    chosen = chosen or fits[:1] or [(o, p) for _, o, p, _ in best[:1]]  # else the best, cut
    return closed(whole_sentences("\n\n".join(p for _, p in sorted(chosen)), limit).strip())


def packaging(hits: list[Hit]) -> int:
    """The tokens the sections of `hits` cost besides their text: each one's title and JSON."""
    firsts = {h.section: h for h in reversed(hits)}
    return sum(cost("", label(h.chunk["title"], h.chunk["heading_path"])) for h in firsts.values())


def least(hit: Hit) -> int:
    """The least taste of a section worth its wrapping: its packaging, and text as long as its
    title."""
    name = label(hit.chunk["title"], hit.chunk["heading_path"])
    return cost("", name) + round(len(name) / CHARS_PER_TOKEN)


def reach(hits: list[Hit], budget: int) -> int:
    """How many of the candidates a read reaches: the most whose least tastes (`least`) all fit
    in the budget."""
    spent, seen = 0, set()
    for n, h in enumerate(hits):
        if h.section not in seen:
            spent += least(h)
            seen.add(h.section)
        if spent > budget:
            return max(1, n)
    return len(hits)


class Packer:
    """One question's read as it is filled: the sections taken so far (by section id, in rank
    order) and the tokens left."""

    def __init__(self, budget: int):
        self.reads: dict[int, Read] = {}
        self.left = budget

    def offer(self, section: int, read: Read, keep: int = 0) -> bool:
        """Takes `read` for `section` (in place of what was read of it) when what it adds fits,
        `keep` tokens kept for later, or when nothing is read yet."""
        was = self.reads.get(section)
        extra = read.tokens - (was.tokens if was is not None else 0)
        if (extra > self.left - keep and self.reads) or (was is not None and extra <= 0):
            return False
        self.reads[section] = read
        self.left -= extra
        return True

    def deep(
        self, section: int, mine: list[Hit], docs: Corpus, keep: int, whole: bool = True
    ) -> bool:
        """The section's candidate chunks, best first, then (`whole`) the section whole, as far
        as they fit with `keep` tokens kept; whether any of it did."""
        lead, taken = mine[0].chunk, list[dict]()
        was = self.reads.get(section)
        if was is not None and was.part == "whole":
            return True
        have = set(was.chunk_ids) if was is not None and was.part == "chunks" else set()
        for h in mine:
            if h.chunk["id"] in have:
                taken.append(h.chunk)
                continue
            trial = taken + [h.chunk]
            read = Read(lead["id"], lead, merged(trial), mine[0].score, "chunks", section=section)
            read.chunk_ids = [c["id"] for c in trial]
            if self.offer(section, read, keep):
                taken = trial
        if not taken:
            return False
        read = self.reads[section]
        rows = docs.section_rows(section)
        if len(read.chunk_ids) == len(rows):
            read.part = "whole"
            return True
        if not whole:
            return True
        chunks = docs.section_chunks(section)
        if sum(len(c["text"]) for c in chunks) <= MAX_SECTION_CHARS:
            full = Read(read.key, read.chunk, merged(chunks), read.score, "whole", section=section)
            full.chunk_ids = [c["id"] for c in chunks]
            self.offer(section, full, keep)
        return True


def grouped(hits: list[Hit]) -> dict[int, list[Hit]]:
    """The hits by section, sections in the order of their best hit."""
    groups: dict[int, list[Hit]] = {}
    for h in hits:
        groups.setdefault(h.section, []).append(h)
    return groups


def pack(
    hits: list[Hit],
    docs: Corpus,
    budget: int,
    terms: list[str],
    names: list[str] | None = None,
) -> list[Read]:
    """The sections of `hits` (best first) that fit in `budget` tokens: the first one's candidate
    chunks (where that leaves the least taste, `least`, of as many others as `reach` says); then
    a taste of each other section it reaches (`excerpt`: its pieces that write the asked
    identifiers `names`, or hold most of the question's `terms`) in equal shares of what is left,
    a share a candidate, at most a paragraph of these docs (the candidates' median); then, with
    what the tastes left, in rank order, each section's candidate chunks and the section whole,
    where they fit."""
    groups = grouped(hits[: reach(hits, budget)])
    first = next(iter(groups))
    packer = Packer(budget)
    keep = sum(least(mine[0]) for s, mine in groups.items() if s != first)
    packer.deep(first, groups[first], docs, keep, whole=False)
    later = [h for h in hits if h.section != first]
    rest = grouped(later[: reach(later, packer.left)])
    views = {h.chunk["id"]: paragraphs(shown(h.chunk["text"])) for h in hits}
    lengths = [len(p) for paras in views.values() for p in paras]
    cap = int(np.median(lengths) / CHARS_PER_TOKEN) + BLOCK_TOKENS if lengths else budget
    sections = list(rest)
    wraps = [packaging(rest[s][:1]) + BLOCK_TOKENS for s in sections]
    for n, section in enumerate(sections):
        # an equal share, a candidate, of what is left once the rest's packaging is counted
        wrap = sum(wraps[n:])
        candidates = sum(len(rest[s]) for s in sections[n:])
        share = min(cap, (packer.left - wrap) // max(1, candidates))
        if share <= 0:
            continue
        mine = rest[section]
        lead = mine[0].chunk
        chunks = [h.chunk for h in mine]
        taste = excerpt(chunks, terms, names or [], docs.searcher.bm25, share * len(mine), views)
        if paragraphs(taste):
            read = Read(lead["id"], lead, taste, mine[0].score, "taste", [lead["id"]], section)
            packer.offer(section, read)
    order = [first, *sections]
    for section in order:
        if section in packer.reads:
            packer.deep(section, groups.get(section) or rest[section], docs, 0)
    return [packer.reads[s] for s in order if s in packer.reads]


def passages(reads: list[Read]) -> list[Passage]:
    """What the answer reads, as passages: each section's paragraphs, in order (a section is one
    search_result, a paragraph one of its text blocks), keyed by the section's lead chunk."""
    return [Passage(r.key, para, r.score) for r in reads for para in paragraphs(r.text)]


def read(hits: list[Hit], docs: Corpus, question: str, budget: int, asked: Asked) -> list[Read]:
    """What Claude reads for `question`: its candidates (`hits`, best first) packed to `budget`
    tokens, the asked identifiers (`asked`) shown where the docs write them (exact.joined)."""
    if not hits:
        return []
    return pack(joined(hits, docs, asked), docs, budget, tokenize(question), asked.names)


def described(reads: list[Read]) -> list[dict]:
    """The sections read, for the trace (the audit's routing): id, doc, heading path, name, what
    of it was read, tokens."""
    return [
        {
            "id": r.key,
            "doc": r.chunk["doc"],
            "heading_path": r.chunk["heading_path"],
            "section": r.label,
            "part": r.part,
            "tokens": r.tokens,
        }
        for r in reads
    ]


@dataclass(frozen=True)
class Context:
    """What Claude reads to answer: the sections read ("Title › Section"), their passages (a
    text block each) and their sources, numbered in the order the passages first cite them."""

    labels: list[str]
    passages: list[Passage]
    sources: dict[str, Source]
    sections: dict[str, int] = field(default_factory=dict)  # a source's key: its section's id

    @classmethod
    def of(cls, reads: list[Read], base_url: str) -> Context:
        """The sections read as the answer reads them: each a search_result, a text block per
        paragraph (the smallest unit a citation points at)."""
        found = passages(reads)
        # sources are named from each section's lead chunk's record
        sources = number_sources(found, {r.key: r.chunk for r in reads}, base_url)
        return cls([r.label for r in reads], found, sources, {r.key: r.section for r in reads})

    def citations(self) -> list[Citation]:
        """Every block sent, as a verified citation of it: what a sentence may be re-cited to."""
        out = []
        for p in self.passages:
            s = self.sources[p.chunk_id]
            out.append(Citation(s.n, s.doc, s.section, s.url, p.text, True, (p.text,)))
        return out
