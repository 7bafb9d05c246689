"""A question on its way through the pipeline (router/pipeline.py), as values the steps hand on:
what was asked (`Question`, checked), what the search found (`Searched`), what a branch found,
wrote and decided (`Draft`); and the one place the verdict that stands is chosen from them
(`verdict`): ANSWER, PARTIAL with its caveat, or ABSTAIN saying why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from index.clean import valid_text
from index.search import Hit, zipf

from . import citations, claims, compose, decide, exact, reading
from .answer import ABSTAIN, ANSWER, PARTIAL, Answer, Passage, Source, Trace
from .exact import Asked as Identifiers
from .language import language_name
from .reading import Reading

if TYPE_CHECKING:
    from .engine import Scope

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


@dataclass(frozen=True)
class Question:
    """What was asked: the question checked (`checked`), and the thread's earlier messages
    (oldest first, {"role", "text"})."""

    text: str
    history: tuple[dict, ...] = ()


def checked(question: str, history: list[dict] | None) -> Question:
    """The question as it can be asked (`checked_question`: a QuestionError when it cannot)."""
    return Question(checked_question(question), tuple(history or ()))


@dataclass(frozen=True)
class Searched:
    """What the search found: the question as searched (without the chat around it, a follow-up
    made standalone, typos read), read once (`reading.Reading`), its vector (None: keyword search
    only), the hits, best first (what the decision, the offline branch and the audit read), the
    deeper candidates Claude's read is packed from (the hits first), and the identifiers the
    question asks about with where the docs write them (router/exact.py)."""

    question: Reading
    vector: np.ndarray | None
    hits: list[Hit]
    candidates: list[Hit] = field(default_factory=list)
    exact: Identifiers = field(default_factory=lambda: Identifiers([], {}))

    @property
    def text(self) -> str:
        return self.question.text


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


def verdict(
    asked: Question, found: Searched, draft: Draft, scope: Scope | None, trace: Trace
) -> Answer:
    """The Answer that stands: ABSTAIN when the decision says so, nothing was found or written,
    or Claude refused; otherwise what was written, PARTIAL when a citation, the docs' cover, its
    length or the claim check says so. `scope`: where it was searched; `trace`: what the steps
    recorded, completed here."""
    trace.evidence = draft.decided.evidence()
    written = draft.written
    hits = found.hits

    def abstain(near: list[Hit], text: str = "") -> Answer:
        """ "Not in the docs", saying why when the evidence knows (a name the docs never
        mention, another language), else naming the `near` sections that came closest."""
        text = text or abstain_message(trace.evidence) or abstain_text(near)
        return Answer(asked.text, found.text, ABSTAIN, text, scope=scope, trace=trace)

    if written is None:  # stopped before writing: nothing near is named when the decision did
        return abstain([] if draft.decided.decision == ABSTAIN else hits)
    if draft.decided.decision == ABSTAIN:
        return abstain(hits)
    if written.status in (compose.NOT_COVERED, compose.EMPTY):
        trace.notes += ["Claude's answer was empty"] if written.status == compose.EMPTY else []
        return abstain(hits)
    if written.status == compose.REFUSED:
        trace.notes.append("Claude refused (stop_reason refusal)")
        return abstain([], REFUSED)
    if not draft.passages:  # nothing it cites, or nothing found to quote
        return abstain(hits)
    # fail closed: what reaches here unchecked counts as a check that did not run
    checked = draft.checked or claims.Checked(False, written.by, why_not="not run")
    decision, caveat, sources = conclude(
        draft.decided.decision, written, list(draft.sources.values()), checked.not_covered
    )
    decision, caveat, note = claims.judged(decision, caveat, checked)
    trace.notes += [note] if note else []
    quoted = [c.cited_text for c in written.citations if c.verified]
    decision, caveat, note = exact.settle(
        decision, caveat, found.exact.names, quoted, found.exact.unwritten
    )
    trace.notes += [note] if note else []
    return Answer(
        asked.text,
        found.text,
        decision,
        written.text,
        sources,
        written.citations,
        draft.passages,
        caveat,
        scope,
        trace,
    )


def conclude(
    strength: str, written: compose.Written, sources: list[Source], gap: bool = False
) -> tuple[str, str, list[Source]]:
    """(decision, caveat, sources) of a written answer: one with no verified citation is never
    ANSWER, nor one that says the docs do not cover a part (`gap`: the claim check read a
    sentence saying so, in any language; or it says "The docs don't cover" as the prompt asks),
    and only the sources it verifiably cites are listed."""
    verified = {c.source for c in written.citations if c.verified}
    why = (
        "cut"
        if written.status == compose.CUT
        else "incomplete"
        if written.status == compose.INCOMPLETE
        else "unverified"
        if not verified or any(not c.verified for c in written.citations)
        else "not_covered"
        if gap or compose.GAP in written.text.lower()
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


def abstain_message(evidence: dict) -> str | None:
    """Why the docs can't answer, when the evidence knows more than "not found"."""
    lang, docs = evidence.get("language"), evidence.get("docs_language")
    if lang and docs:
        d, q = language_name(docs), language_name(lang)
        return (
            f"Offline search works only in the docs' language ({d}), and this question looks like"
            f" {q}. Please ask it in {d}."
        )
    # named only when they are what weighs most against an answer: names as written, then the
    # rarest other words, of those the decision weighs (`rare`, `unseen`: below everyday English,
    # RARE_ZIPF); an everyday word the docs happen not to use ("straight") only frames a question
    named: list[str] = []
    if evidence.get("why") in ("rare", "unseen", "phrase"):
        phrases = evidence.get("unknown_phrases", [])
        inside = {w.lower() for p in phrases for w in p.split()}
        unknown = evidence.get("unknown_words", [])
        rest = [w for w in unknown if w not in inside and zipf(w) < decide.RARE_ZIPF]
        named = phrases + sorted(rest, key=zipf)
    if named:
        return (
            "I couldn't find this in the docs, so I won't guess: they don't mention "
            + ", ".join(f'"{t}"' for t in named[:3])
            + "."
        )
    return None
