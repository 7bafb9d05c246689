"""Exact things asked exactly: the identifiers a question names (an error code, a flag, a setting,
a command, an endpoint), the chunks where the docs write each one, and whether a quote holds it.

An identifier is told by its shape, not by a list: a word of the sentences that ask
(reading.Reading.asking: the first and those ending in "?"; what the asker pasted below is their
material) with a character no English word has inside it next to a letter (a digit in "TW-1016",
"http2", "rerank-2.5"; "_" in "max_retries"; a "." between names in "app.get" or "config.toml"),
a capital inside a word ("BackgroundTasks", "KubePodCrashLooping"), a leading dash ("--dry-run",
"-v"), a leading slash ("/v2/endpoints"), or anything the asker wrote as code (`tide keys roll`).
A value of the asker's own (a URL, a host, an ID with a random-looking part: reading.own_value) and
a bare number or version are no name of the docs. An identifier the docs use in more than
COMMON_SHARE of their chunks is their vocabulary ("FastAPI" in FastAPI's docs), which says nothing
about which section answers.

Where the docs write an identifier: the chunks holding all of its index terms (BM25's postings),
then read to find it written as asked (case and spacing aside), at most CANDIDATES of them.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from index.search import Hit, tokenize

from . import reading
from .answer import ABSTAIN, ANSWER, PARTIAL
from .decide import COMMON_SHARE, PHRASE_CANDIDATES, Decision
from .words import snowballs

if TYPE_CHECKING:
    from .corpus import Corpus

CODE_SPAN = re.compile(r"`([^`\n]{1,64})`")
FENCED = re.compile(r"```.*?(?:```|$)|~~~.*?(?:~~~|$)", re.S)
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
EDGES = "\"'(),;:!?.*<>"
# a letter next to a character no English word has inside it, or a capital inside a word
SHAPE = re.compile(
    r"[A-Za-z][0-9]|[0-9][A-Za-z]|[0-9]-[A-Za-z]|[A-Za-z]-[0-9]"  # TW-1016, http2, rerank-2.5
    r"|[A-Za-z0-9]_[A-Za-z0-9]"  # max_retries, FIELDGUIDE_DB
    r"|[A-Za-z]{2}\.[A-Za-z]{2}"  # app.get, config.toml (not "e.g.")
    r"|[a-z][A-Z]"  # BackgroundTasks
)
FLAG = re.compile(r"^--?[A-Za-z][\w-]*(?:=\S*)?$")
ENDPOINT = re.compile(r"^/[\w{}.-]+(?:/[\w{}.:-]*)*$")
CANDIDATES = PHRASE_CANDIDATES  # chunks read, at most, to find one identifier written as asked


def asking_text(question: str) -> str:
    """The question's sentences that ask, as written (code spans kept): the first one and each
    ending in "?", fenced code left out."""
    text = FENCED.sub("\n\n", question)
    sentences = [s for s in SENTENCE.split(text) if s.strip()]
    first, rest = sentences[:1], sentences[1:]
    return " ".join([*first, *(s for s in rest if s.rstrip().endswith("?"))])


def identifiers(question: str) -> list[str]:
    """The identifiers the question asks about, as written, in order, each once."""
    text = asking_text(question)
    found: list[str] = [as_code(m.group(1)) for m in CODE_SPAN.finditer(text)]
    for word in text.split():
        if "`" in word:  # code, or glued to code ("`tools`-dependencies"): read as code above
            continue
        w = balanced(word.strip(EDGES))
        if w.startswith("-") and FLAG.match(w):
            found.append(w.split("=", 1)[0])
        elif ENDPOINT.match(w) and len(w) > 1:
            found.append(w)
        elif SHAPE.search(w) and not reading.own_value(w) and re.search(r"[A-Za-z]", w):
            found.append(w.split("=", 1)[0])
    out: list[str] = []
    for f in found:
        if f and not re.fullmatch(r"[\d.,:/-]+", f) and f.lower() not in {o.lower() for o in out}:
            out.append(f)
    return out


def as_code(span: str) -> str:
    """What a code span names: itself, but for a flag given a value (`--source ~/foo/bar`,
    `--jobs=4`), which names the flag; the value is the asker's own."""
    span = span.strip()
    first = span.split(maxsplit=1)[0] if span else ""
    return first.split("=", 1)[0] if FLAG.match(first) else span


def balanced(word: str) -> str:
    """A word without a bracket at either end that has no partner in it ("[TW-1016]" → TW-1016,
    "/items/{id}" kept)."""
    for open_, close in ("()", "[]", "{}"):
        while len(word) > 2 and word[0] == open_ and word[-1] == close:
            word = word[1:-1]
        while word.endswith(close) and word.count(open_) < word.count(close):
            word = word[:-1]
        while word.startswith(open_) and word.count(close) < word.count(open_):
            word = word[1:]
    return word.strip(EDGES)


def squashed(text: str) -> str:
    return " ".join(text.lower().split())


def holds(text: str, ident: str) -> bool:
    """Whether `text` writes the identifier as asked (case and spacing aside), not inside a longer
    name ("TW-1016" is not in "TW-10160")."""
    at = squashed(text)
    key = squashed(ident)
    start = at.find(key)
    while start >= 0:
        before = at[start - 1] if start else " "
        after = at[start + len(key)] if start + len(key) < len(at) else " "
        if not (before.isalnum() and key[0].isalnum()) and not (
            after.isalnum() and key[-1].isalnum()
        ):
            return True
        start = at.find(key, start + 1)
    return False


@dataclass
class Asked:
    """The identifiers one question asks about (the docs' own vocabulary left out): each with the
    rows of the chunks that write it (none: the docs never do)."""

    names: list[str]
    rows: dict[str, np.ndarray]

    def __bool__(self) -> bool:
        return bool(self.names)

    @property
    def written(self) -> list[str]:
        """The identifiers the docs write somewhere."""
        return [n for n in self.names if self.rows.get(n) is not None and self.rows[n].size]

    @property
    def unwritten(self) -> list[str]:
        """The identifiers the docs never write as asked."""
        return [n for n in self.names if n not in self.written]


def written(ident: str, docs: Corpus) -> np.ndarray | None:
    """The rows of the chunks that write `ident` as asked (among the docs of `docs`, a scope's
    only); None when it is the docs' own vocabulary (in more than COMMON_SHARE of the chunks) or
    has no term."""
    postings = docs.words.bm25  # the scope's postings when the docs are a scope's
    terms = list(dict.fromkeys(tokenize(ident)))
    if not terms:
        return None
    rows: np.ndarray | None = None
    for t in terms:
        v = postings.vocab.get(t)
        if v is None:
            return np.zeros(0, dtype=np.int64)
        found = postings.postings_docs[postings.offsets[v] : postings.offsets[v + 1]]
        rows = found if rows is None else np.intersect1d(rows, found, assume_unique=True)
    assert rows is not None
    if rows.size > COMMON_SHARE * max(postings.size, 1):
        return None
    chunks = docs.searcher.fetch([int(r) for r in rows[:CANDIDATES]])
    keep = [
        int(r) for r, c in zip(rows[:CANDIDATES], chunks, strict=True) if holds(c["text"], ident)
    ]
    return np.array(keep, dtype=np.int64)


def joined(hits: list[Hit], docs: Corpus, asked: Asked) -> list[Hit]:
    """The candidates, with the chunks of a candidate section that write an asked identifier
    none of its candidates writes joined to it, first of it (where its best hit ranks): a
    section's candidate may be the rows beside the one that holds what was asked (a long options
    table is cut into several chunks), and the row that holds it is the one to read, for each
    identifier asked (a row naming one of them does not stand for the others)."""
    names = asked.written
    candidates = {h.row for h in hits}
    sections = docs.searcher.sections
    writing: dict[int, dict[str, list[int]]] = {}  # section → identifier → its rows there
    for n in names:
        for r in asked.rows[n].tolist():
            if r not in candidates:
                writing.setdefault(int(sections[r]), {}).setdefault(n, []).append(r)
    if not writing:
        return hits
    out: list[Hit] = []
    for h in hits:
        mine = writing.pop(h.section, {})  # at the section's best hit only
        if mine:
            texts = [c.chunk["text"] for c in hits if c.section == h.section]
            rows = {r for n, rs in mine.items() if not any(holds(t, n) for t in texts) for r in rs}
            out += [
                Hit(r, 0.0, 0.0, h.score, h.intent, h.section, docs.searcher.fetch)
                for r in sorted(rows)
            ]
        out.append(h)
    return out


# the share of a question's idf weight its identifiers carry when it is about them: most of it
ABOUT = 0.5


def named(query: str, docs: Corpus) -> Asked:
    """Every identifier `query` names that is not the docs' everyday vocabulary, with the rows
    of the chunks that write it (none: the docs never do). What a look's search shows: its
    query is the reader's own, written to find what it names."""
    names, rows = [], {}
    for ident in identifiers(query):
        found = written(ident, docs)
        if found is not None:
            names.append(ident)
            rows[ident] = found
    return Asked(names, rows)


def asked(question: str, docs: Corpus) -> Asked:
    """The question's identifiers (`named`), when they carry at least ABOUT of the question's
    weight (idf); else none: a question that names `openapi_url` while it asks about a proxy's
    path is not asked by that name."""
    found = named(question, docs)
    terms = tokenize(asking_text(question))
    if found and docs.searcher.bm25.coverage(terms, tokenize(" ".join(found.names))) < ABOUT:
        return Asked([], {})
    return found


def spelled(text: str, ident: str) -> bool:
    """Whether `text` writes `ident` inflected otherwise: its words, Snowball-stemmed, side by
    side in the same order ("traefik.enable" for an asked "traefik.enabled"; never "TW-1010" for
    "TW-1016": a number has no inflections)."""
    want = snowballs(tokenize(ident))
    have = snowballs(tokenize(text))
    n = len(want)
    return n > 0 and any(have[i : i + n] == want for i in range(len(have) - n + 1))


def missed(names: list[str], cited: list[str], unwritten: Collection[str] = ()) -> list[str]:
    """The asked identifiers that none of the quoted texts (`cited`) writes; one the docs never
    write as asked (`unwritten`: "traefik.enabled" where they write "traefik.enable") is
    written where a quote writes it as the docs inflect it (`spelled`)."""
    return [
        n
        for n in names
        if not any(holds(t, n) or (n in unwritten and spelled(t, n)) for t in cited)
    ]


NOT_SHOWN = "Partial answer: no passage it quotes writes {names}."


def settle(
    decision: str, caveat: str, names: list[str], cited: list[str], unwritten: Collection[str] = ()
) -> tuple[str, str, str]:
    """(decision, caveat, note) once the quotes are known: an answer whose verified quotes
    (`cited`) miss an identifier asked about (`names`; `unwritten` those the docs never write
    as asked, see `missed`) is never a plain ANSWER; its caveat names what they miss."""
    miss = missed(names, cited, unwritten)
    if not miss or decision == ABSTAIN:
        return decision, caveat, ""
    line = NOT_SHOWN.format(names=", ".join(f"`{n}`" for n in miss))
    note = f"the quotes miss what was asked: {', '.join(miss)}"
    if decision == ANSWER:
        return PARTIAL, line, note
    return decision, f"{caveat} Also, {line[len('Partial answer: ') :]}".strip(), note


def near(decided: Decision, names: list[str], quoted: list[str]) -> Decision:
    """The decision once the quotes are known: nothing came close (ABSTAIN) is not so when a quote
    writes an identifier asked about; then the docs may answer it (PARTIAL, why "exact")."""
    if decided.decision != ABSTAIN or not any(holds(t, n) for t in quoted for n in names):
        return decided
    return replace(decided, decision=PARTIAL, why="exact")


def widened(top: list[Hit], candidates: list[Hit], names: list[str]) -> list[Hit]:
    """The chunks an offline answer quotes from: the top ones, and when none of them writes an
    identifier asked about, the best of the candidates that does (where the docs write it)."""
    missing = [n for n in names if not any(holds(h.chunk["text"], n) for h in top)]
    if not missing:
        return top
    seen = {h.row for h in top}
    found = next(
        (
            h
            for h in candidates
            if h.row not in seen and any(holds(h.chunk["text"], n) for n in missing)
        ),
        None,
    )
    return top + [found] if found is not None else top
