"""One question on its way through the pipeline (router/pipeline.py): what it was asked, where it
is searched, and what each step has found so far, in one object every step reads and fills
(`Asked`); what a path found, wrote and decided (`Draft`); and the one place the verdict that
stands is chosen from them (`verdict`): ANSWER, PARTIAL with its caveat, or ABSTAIN saying why."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from index.clean import valid_text
from index.search import Hit, Searcher

from . import citations, claims, compose, decide, exact, reading
from .answer import ABSTAIN, ANSWER, PARTIAL, Answer, Passage, Source, Trace
from .claude import OFFLINE_NOTE, Claude
from .exact import Asked as Identifiers

if TYPE_CHECKING:
    from .engine import Scope
    from .policy import Router

MAX_QUESTION_CHARS = reading.MAX_QUESTION_CHARS


class QuestionError(ValueError):
    """The question cannot be asked as given; the message is fit to show the user."""


def checked_question(question: str) -> str:
    """The question as it can be asked: readable text, not empty, at most MAX_QUESTION_CHARS."""
    # a lone surrogate (Slack's JSON can carry "\ud800") is no text a tokenizer or store
    # takes: read as what it is, an unreadable character
    question = valid_text(question or "").strip()
    if not question:
        raise QuestionError("The question is empty: ask me something about the docs.")
    # a long paste keeps the sentences that ask, wherever they stand (reading.bounded)
    return reading.bounded(question, MAX_QUESTION_CHARS)


@dataclass
class Asked:
    """A question being answered: set once (the question, the thread, the scope, the router
    of one index generation), then filled step by step (the question as searched, its vector,
    the hits, the offline decision). `trace` records what each step used."""

    question: str
    history: list[dict]
    scope: Scope | None
    on_text: Callable[[str], None] | None
    trace: Trace
    claude: Claude
    router: Router  # of one index generation, the newest loaded when the question came
    # what the question's words are read against: the scope's docs only (its spelling, signals
    # and messages know nothing of the docs outside it), else the whole index
    searcher: Searcher
    clock: float  # when the step being timed began (time.perf_counter)
    condensed: str = ""  # the question as searched: thread context folded in, typos read
    query_vec: np.ndarray | None = None
    hits: list[Hit] = field(default_factory=list)
    candidates: list[Hit] = field(
        default_factory=list
    )  # the deeper list Claude's read is packed from
    chunks: dict[str, dict] = field(default_factory=dict)  # the hits' records by id, scored
    offline_verdict: decide.Decision | None = None  # the decision read in the offline bands
    # the identifiers asked about and where the docs write them (router/exact.py), from the search
    exact: Identifiers = field(default_factory=lambda: Identifiers([], {}))


# offline, a question the docs may not answer gets the closest sections quoted under this line
UNSURE = "I'm not sure the docs answer this; the closest sections are:"
# the one line shown above a PARTIAL answer (Answer.caveat), by why it is partial
CAVEATS = {
    "loose": UNSURE,
    "unverified": "Partial answer: a citation could not be checked against the docs.",
    "not_covered": "Partial answer: the docs cover only part of this question.",
    "incomplete": "Partial answer: it was cut short at its length limit.",
    "cut": "Partial answer: it was cut short (the question's time limit, or Claude failing"
    " mid-answer).",
}
REFUSED = "Claude declined to answer this question, so there is no answer from the docs."
ABSTAIN_TEXT = "I couldn't find this in the docs, so I won't guess."


@dataclass
class Draft:
    """What a path found, wrote and decided. `decided`: the decision it stands on (the offline
    one whenever the quotes shown are the docs' own); `written` None: nothing was written (the
    decision stopped it, or nothing was found to quote); `checked`: the claim check of what was
    written (None when it did not need one)."""

    decided: decide.Decision
    passages: list[Passage] = field(default_factory=list)
    written: compose.Written | None = None
    sources: dict[str, Source] = field(default_factory=dict)
    checked: claims.Checked | None = None


def verdict(asked: Asked, draft: Draft) -> Answer:
    """The Answer that stands: ABSTAIN when the decision says so, nothing was found or written,
    or Claude refused; otherwise what was written, PARTIAL when a citation, the docs' cover, its
    length or the claim check says so."""
    trace = asked.trace
    trace.evidence = draft.decided.evidence()
    written = draft.written
    if written is None:  # stopped before writing: nothing near is named when the decision did
        return abstain(asked, [] if draft.decided.decision == ABSTAIN else asked.hits)
    if draft.decided.decision == ABSTAIN or not draft.passages:
        return abstain(asked, asked.hits)
    if written.status in (compose.NOT_COVERED, compose.EMPTY):
        trace.notes += ["Claude's answer was empty"] if written.status == compose.EMPTY else []
        return abstain(asked, asked.hits)
    if written.status == compose.REFUSED:
        trace.notes.append("Claude refused (stop_reason refusal)")
        return abstain(asked, [], REFUSED)
    decision, caveat, sources = conclude(
        draft.decided.decision, written, list(draft.sources.values())
    )
    # fail closed: what reaches here unchecked counts as a check that did not run
    checked = draft.checked or claims.Checked(False, written.by, why_not="not run")
    decision, caveat, note = claims.judged(decision, caveat, checked)
    trace.notes += [note] if note else []
    quoted = [c.cited_text for c in written.citations if c.verified]
    decision, caveat, note = exact.settle(decision, caveat, asked.exact.names, quoted)
    trace.notes += [note] if note else []
    return Answer(
        asked.question,
        asked.condensed,
        decision,
        written.text,
        sources,
        written.citations,
        draft.passages,
        caveat,
        asked.scope,
        trace,
    )


def abstain(asked: Asked, near: list[Hit], text: str = "") -> Answer:
    """ "Not in the docs", saying why when the evidence knows (a name the docs never mention,
    another language), else naming the `near` sections that came closest."""
    text = text or decide.abstain_message(asked.trace.evidence) or abstain_text(near)
    return Answer(
        asked.question, asked.condensed, ABSTAIN, text, scope=asked.scope, trace=asked.trace
    )


def conclude(
    strength: str, written: compose.Written, sources: list[Source]
) -> tuple[str, str, list[Source]]:
    """(decision, caveat, sources) of a written answer: one with no verified citation is never
    ANSWER, and only the sources it verifiably cites are listed."""
    verified = {c.source for c in written.citations if c.verified}
    why = (
        "cut"
        if written.status == compose.CUT
        else "incomplete"
        if written.status == compose.INCOMPLETE
        else "unverified"
        if not verified or any(not c.verified for c in written.citations)
        else "not_covered"
        if "docs don't cover" in written.text.lower()
        else "loose"
        if strength == PARTIAL
        else ""
    )
    return (
        PARTIAL if why else ANSWER,
        CAVEATS.get(why, ""),
        [s for s in sources if s.n in verified],
    )


def abstain_text(hits: list[Hit]) -> str:
    """The "not in the docs" answer; `hits`: related sections that did not answer it, to name."""
    near: list[str] = []
    for h in hits[:3]:
        name = citations.label(h.chunk["title"], h.chunk["heading_path"])
        if name not in near:
            near.append(name)
    return ABSTAIN_TEXT + (" The closest sections were: " + "; ".join(near) + "." if near else "")


def fell_back(trace: Trace, step: str, why: str) -> None:
    trace.offline = True
    trace.notes.append(f"{step}: {why}: {OFFLINE_NOTE}")


def lap(q: Asked, step: str) -> None:
    """The step just done, timed into the trace (ms since the step before)."""
    now = time.perf_counter()
    q.trace.timings_ms[step] = round((now - q.clock) * 1000, 1)
    q.clock = now
