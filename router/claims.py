"""The claim check: once the answer is written (after the last streamed word), each of its
sentences is checked against the passages it cites. With Claude a cheap model gives a verdict per
sentence as a structured output (prompts/check.md, `output_config.format`); an unsupported
sentence, or a factual one that cites nothing, turns ANSWER into PARTIAL with a caveat naming it.
Offline the answer is made of verbatim quotes, each its own support: the check only reads whether
each quote was found in its chunk. A check that cannot run (API error, no time left) fails closed:
an ANSWER becomes PARTIAL with a caveat saying its claims were not checked, which the user sees
(Slack, CLI) and the audit keeps.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from prompts import render

from .answer import ANSWER, PARTIAL, Citation, squash
from .claude import Claude, Unusable
from .marks import marked
from .messages import structured
from .rendered import CODE_SPAN

SUPPORTED, UNSUPPORTED, NO_CLAIM = "supported", "unsupported", "no_claim"
NOT_COVERED = "not_covered"  # the sentence says the docs do not cover something (any language)
ELSEWHERE = "supported_elsewhere"  # stated by passages it does not cite (named in "passages")
VERDICTS = (SUPPORTED, UNSUPPORTED, NO_CLAIM, NOT_COVERED, ELSEWHERE)
SCHEMA = {
    "type": "object",
    "properties": {
        "sentences": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sentence": {"type": "integer"},
                    "verdict": {"type": "string", "enum": list(VERDICTS)},
                    "passages": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["sentence", "verdict"],
            },
        }
    },
    "required": ["sentences"],
}
MAX_TOKENS = 2000
# The claim check's own time at the end of a question's deadline: the answer's stream is cut
# before it. The check model's time to its first token (Haiku 5.5: 0.7 s, thinking off) and its
# verdicts, ~10 output tokens a sentence for an answer of up to ~15 sentences (150 tokens at 130
# tokens/s: 1.2 s), with as much again for a slow moment: 4 s. Never more than a third of the
# deadline, so a short deadline still leaves the answer most of it.
RESERVE = 4.0


def reserve(deadline: float) -> float:
    return min(RESERVE, deadline / 3)


NAMED = 2  # unsupported sentences named in the caveat; the rest are counted
NAME_CHARS = 90

# a fenced code block: from a fence line to the next (or the block's end); ``` inside a line is
# inline code, part of its sentence
FENCE = re.compile(r"(^ {0,3}```.*?(?:\n {0,3}```[^\n]*|\Z))", re.S | re.M)
# a sentence ends at . ! ? followed by space and a capital, digit or mark ("v1.2" is no end),
# but not at the last dot of a dotted abbreviation ("e.g. `COPY`", "i.e. The")
SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\b\w\.\w\.)\s+(?=[\"'(\[*`]?[A-Z0-9])")
WORDS = re.compile(r"\w")
# a markdown list item's marker ("- ", "2. ", "3) "): markup, not a sentence of its own
LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")


@dataclass
class Sentence:
    text: str
    # what the verified citations of its block give the check to read, (the section cited,
    # "Title › Section"; the text read), each with the citation it comes from
    passages: dict[tuple[str, str], Citation]
    verdict: str = ""
    block: int = -1  # its text block in the answer
    recited: list[Citation] = field(default_factory=list)  # ELSEWHERE: what states it


@dataclass
class Checked:
    ran: bool
    by: str  # "claude" | "offline"
    sentences: list[Sentence] = field(default_factory=list)
    why_not: str = ""  # why the check did not run
    usage: dict = field(default_factory=dict)

    @property
    def unsupported(self) -> list[str]:
        return [s.text for s in self.sentences if s.verdict == UNSUPPORTED]

    @property
    def recited(self) -> list[Sentence]:
        return [s for s in self.sentences if s.verdict == ELSEWHERE]

    @property
    def not_covered(self) -> bool:
        """Does a sentence say the docs do not cover a part of the question (in whatever
        language the answer is written)?"""
        return any(s.verdict == NOT_COVERED for s in self.sentences)


def sentences(
    blocks: list[tuple[str, list[Citation]]], whole: dict[int, str] | None = None
) -> list[Sentence]:
    """The answer's sentences, each with the passages its text block cites: the cited section
    whole where `whole` holds it (by source number: a citation names a section, and what was
    sent of it may be a taste), else the cited blocks with the blocks either side of them in
    their search result (what "You can disable it" disables is the block before; a sentence that
    introduces an example, "pin it with:", cites itself, and the example is the block after).
    A block citing nothing (the example written out, a "so …" drawn from the sentence before)
    is read against what the last cited block before it cites: supported only if that says it
    too. A code block is one unit; list items and lines are split apart, their list markers
    left out, then sentences within them."""
    out: list[Sentence] = []
    last: dict[tuple[str, str], Citation] = {}
    for n, (text, cits) in enumerate(blocks):
        mine: dict[tuple[str, str], Citation] = {}
        for c in cits:
            if c.verified:
                read = (whole or {}).get(c.source) or "\n\n".join(c.around or [c.cited_text])
                mine.setdefault((c.section, read), c)
        mine = last = mine or last
        for piece in FENCE.split(text):
            code = piece.lstrip(" ").startswith("```")
            for unit in [piece] if code else piece.split("\n"):
                for s in [unit] if code else split(LIST_MARKER.sub("", unit)):
                    if WORDS.search(s):
                        out.append(Sentence(s.strip(), mine, block=n))
    return out


def split(line: str) -> list[str]:
    """A line's sentences (SENTENCE_END), never cut inside inline code ("`FOREIGN KEY ...`")."""
    code = [m.span() for m in CODE_SPAN.finditer(line)]
    out, at = [], 0
    for m in SENTENCE_END.finditer(line):
        if not any(s < m.start() < e for s, e in code):
            out.append(line[at : m.start()])
            at = m.end()
    return [*out, line[at:]]


def numbered(
    items: list[Sentence], others: Sequence[Citation] = ()
) -> dict[tuple[str, str], tuple[str, Citation]]:
    """Every passage the check reads, by (section, text): its id (P1, P2 …) and the citation
    that points at it. First what the sentences cite, then the `others` (the other passages sent
    to the answer, each one block) whose text no passage before holds."""
    ids: dict[tuple[str, str], tuple[str, Citation]] = {}
    for s in items:
        for p, c in s.passages.items():
            ids.setdefault(p, (f"P{len(ids) + 1}", c))
    held = [squash(text) for _, text in ids]
    for c in others:
        block = squash(c.cited_text)
        if (c.section, c.cited_text) not in ids and not any(block in t for t in held):
            ids[(c.section, c.cited_text)] = (f"P{len(ids) + 1}", c)
            held.append(block)
    return ids


def request(
    items: list[Sentence],
    ids: dict[tuple[str, str], tuple[str, Citation]],
    labels: dict[int, str] | None = None,
) -> str:
    """The check's user message: the passages numbered once (`ids`, from `numbered`), each with
    the place it comes from, its page's title and headings (`labels`, by source number, else the
    headings alone), which say what the passage is about: "You can disable it" under "Docs URLs
    › Swagger UI", "Prompt before adding each file" under "add › Flags › `-p`, `--prompt`";
    then the sentences with the passages each cites."""
    esc = html.escape
    named = labels or {}
    passages = "\n".join(
        f'<passage id="{i}" section="{esc(named.get(c.source, p[0]))}">'
        f"{esc(p[1], quote=False)}</passage>"
        for p, (i, c) in ids.items()
    )
    lines = "\n".join(
        f'<sentence number="{n}" cites="{" ".join(ids[p][0] for p in s.passages)}">'
        f"{esc(s.text, quote=False)}</sentence>"
        for n, s in enumerate(items, 1)
    )
    return f"<passages>\n{passages}\n</passages>\n\n<sentences>\n{lines}\n</sentences>"


def with_claude(
    client: Any,
    model: str,
    items: list[Sentence],
    others: Sequence[Citation] = (),
    labels: dict[int, str] | None = None,
) -> dict:
    """Sets each sentence's verdict from Claude's (and, supported elsewhere, the citations of
    the passages that state it); the usage. Unusable unless every sentence got exactly one
    verdict."""
    ids = numbered(items, others)
    asked = request(items, ids, labels)
    data, usage = structured(client, model, render("check"), asked, SCHEMA, MAX_TOKENS, "check")
    given = data.get("sentences")
    if not isinstance(given, list):
        raise Unusable("no sentences in the check")
    verdicts: dict[int, dict] = {}
    for v in given:
        n = v.get("sentence") if isinstance(v, dict) else None
        if not isinstance(n, int) or not 1 <= n <= len(items) or n in verdicts:
            raise Unusable(f"a verdict for sentence {n!r}")
        if v.get("verdict") not in VERDICTS:
            raise Unusable(f"verdict {v.get('verdict')!r}")
        verdicts[n] = v
    if len(verdicts) != len(items):
        raise Unusable(f"verdicts for {len(verdicts)} of {len(items)} sentences")
    by_id = {i: c for i, c in ids.values()}
    for n, s in enumerate(items, 1):
        s.verdict = verdicts[n]["verdict"]
        if s.verdict == ELSEWHERE:
            named = verdicts[n].get("passages")
            found = [by_id[i] for i in named if i in by_id] if isinstance(named, list) else []
            for c in found:
                if c not in s.passages.values() and c not in s.recited:
                    s.recited.append(c)
            # naming no passage sent, or only its own: what the verdict says is not shown
            s.verdict = ELSEWHERE if s.recited else SUPPORTED if found else UNSUPPORTED
        # a sentence citing nothing cannot be supported by its passages, whatever the model says
        if s.verdict == SUPPORTED and not s.passages:
            s.verdict = UNSUPPORTED
    return usage


def offline(citations: list[Citation]) -> Checked:
    """The offline answer's quotes: each supports itself when it was found in its chunk."""
    items = [
        Sentence(
            c.cited_text, {(c.section, c.cited_text): c}, SUPPORTED if c.verified else UNSUPPORTED
        )
        for c in citations
    ]
    return Checked(True, "offline", items)


def check(
    claude: Claude,
    model: str,
    written: Any,
    whole: dict[int, str] | None = None,
    others: Sequence[Citation] = (),
    labels: dict[int, str] | None = None,
) -> Checked:
    """Claude's check of a written answer's blocks (a compose.Written), its cited sections read
    `whole` where given (`sentences`), the `others` (every block sent to the answer, as a
    citation of it) read for what the answer states but cites elsewhere, each passage named by
    its source's "Title › Section" (`labels`, by source number); the offline check of the
    quotes (their citations) when the answer was not written by Claude."""
    if written.by != "claude":
        return offline(written.citations)
    items = sentences(written.blocks, whole)
    if not items:
        return Checked(True, "claude", [])
    usage, why = claude.attempt(
        "check", lambda client: with_claude(client, model, items, others, labels)
    )
    if usage is None:
        return Checked(False, "claude", why_not=why)
    return Checked(True, "claude", items, usage=usage)


def recite(written: Any, checked: Checked) -> tuple[Any, str]:
    """The written answer (a compose.Written) with each sentence supported elsewhere cited
    where it is stated: its block cut after the sentence, the new citations on the part that
    ends with it (so its [n] marks follow it, not the block's last sentence), the [n] marks
    redone; the note for the trace ("" when nothing moved)."""
    moved = checked.recited
    if not moved:
        return written, ""
    blocks: list[tuple[str, list[Citation]]] = []
    added: list[Citation] = []
    for n, (text, cits) in enumerate(written.blocks):
        at = 0
        for s in (s for s in moved if s.block == n):
            new = [c for c in s.recited if c not in cits]
            added += [c for c in new if c not in written.citations + added]
            end = text.find(s.text, at) + len(s.text) if s.text in text[at:] else len(text)
            if not text[end:].strip():  # its block's last words: the block's marks and these
                cits = [*cits, *(c for c in new if c not in cits)]
                continue
            blocks.append((text[at:end], new))
            at = end
        blocks.append((text[at:], list(cits)))
    note = (
        f"claim check ({checked.by}): {len(moved)} sentence{'s' * (len(moved) != 1)} cited"
        " where the docs state them: "
        + "; ".join(
            f"“{_short(s.text)}” → [{', '.join(str(c.source) for c in s.recited)}]" for s in moved
        )
    )
    text = marked(blocks)
    return replace(written, text=text, citations=written.citations + added, blocks=blocks), note


NOT_CHECKED = "its claims were not checked against the docs it cites (the check did not run)."


def judged(decision: str, caveat: str, checked: Checked) -> tuple[str, str, str]:
    """(decision, caveat, note) after the check: an unsupported sentence makes an ANSWER PARTIAL,
    its caveat naming it (a PARTIAL answer's caveat names it too); a check that did not run makes
    it PARTIAL too, its caveat saying so (fail closed: an unchecked answer is never a plain
    ANSWER). The note, for the trace, names every unsupported sentence or why the check did not
    run."""
    if not checked.ran:
        note = f"the claim check did not run ({checked.why_not})"
        if decision == ANSWER:
            return PARTIAL, f"Partial answer: {NOT_CHECKED}", note
        if decision == PARTIAL:
            return decision, f"{caveat} Also, {NOT_CHECKED}".strip(), note
        return decision, caveat, note
    bad = checked.unsupported
    if not bad:
        return decision, caveat, ""
    note = (
        f"claim check ({checked.by}): {len(bad)} of {len(checked.sentences)} sentences"
        " not supported by the passages they cite: " + "; ".join(f"“{_short(t)}”" for t in bad)
    )
    named = "; ".join(f"“{_short(t)}”" for t in bad[:NAMED])
    more = f" and {len(bad) - NAMED} more" if len(bad) > NAMED else ""
    line = f"the docs it cites do not support {named}{more}."
    if decision == ANSWER:
        return PARTIAL, f"Partial answer: {line}", note
    if decision == PARTIAL:
        return decision, f"{caveat} Also, {line}".strip(), note
    return decision, caveat, note


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1].rsplit(" ", 1)[0] + "…"
