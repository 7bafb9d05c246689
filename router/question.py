"""One question on its way through the pipeline (router/pipeline.py): what it was asked, where it
is searched, and what each step has found so far, in one object every step reads and fills."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from index.clean import valid_text
from index.search import Hit, Searcher

from . import condense
from .answer import Trace
from .claude import Claude

if TYPE_CHECKING:
    from .decide import Decision
    from .engine import Loaded, Scope
    from .policy import Router

MAX_QUESTION_CHARS = condense.MAX_QUESTION_CHARS


class QuestionError(ValueError):
    """The question cannot be asked as given; the message is fit to show the user."""


def checked_question(question: str) -> str:
    """The question as it can be asked: readable text, not empty, at most MAX_QUESTION_CHARS."""
    # a lone surrogate (Slack's JSON can carry "\ud800") is no text a tokenizer or store
    # takes: read as what it is, an unreadable character
    question = valid_text(question or "").strip()
    if not question:
        raise QuestionError("The question is empty: ask me something about the docs.")
    if len(question) <= MAX_QUESTION_CHARS:
        return question
    # cut at a word boundary: half a word ("padd") would read as a name the docs never mention
    cut = question[: MAX_QUESTION_CHARS + 1]
    return cut.rsplit(None, 1)[0] if " " in cut else cut[:MAX_QUESTION_CHARS]


class Laps:
    """Each step's milliseconds into `timings`."""

    def __init__(self, timings: dict):
        self.timings, self.clock = timings, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round((now - self.clock) * 1000, 1)
        self.clock = now


@dataclass
class Asked:
    """A question being answered: set once (the question, the thread, the scope, one index
    generation and its router), then filled step by step (the question as searched, its vector,
    the hits, the offline decision). `trace` records what each step used."""

    question: str
    history: list[dict]
    scope: Scope | None
    on_text: Callable[[str], None] | None
    trace: Trace
    claude: Claude
    loaded: Loaded
    router: Router
    clock: Laps
    condensed: str = ""  # the question as searched: thread context folded in, typos read
    query_vec: np.ndarray | None = None
    hits: list[Hit] = field(default_factory=list)
    offline_verdict: Decision | None = None  # the decision read in the offline bands

    @property
    def searcher(self) -> Searcher:
        """What the question's words are read against: the scope's docs only (its spelling,
        signals and messages know nothing of the docs outside it), else the whole index."""
        return self.router.searcher

    @property
    def chunks(self) -> dict[str, dict]:
        """The hits' chunks (with their scores) by id, as the trace records them."""
        return {h["id"]: h for h in self.trace.hits}
