"""question (+ thread history) → condense → route → retrieve → evidence → extract → compose →
decide → audit.

Each step is its own module (condense, extract, compose, offline, decide, citations); every Claude
step goes through router/claude.py, which runs it offline when no key is set, when Claude fails or
replies with something unusable, and for the rest of the question once one step has failed or the
question's deadline is spent. Passages are checked against their chunk, citations against the
blocks that were sent, so nothing reaches the user as a quote that is not in the docs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from index.clean import valid_text
from index.search import Hit, Searcher
from prompts import prompt_hash

from . import citations, claims, compose, condense, decide, language, offline, words
from . import extract as claude_extract
from .answer import ABSTAIN, ANSWER, PARTIAL, Answer, Passage, Source, Trace
from .claude import DEADLINE, OFFLINE_NOTE, Claude, MessagesClient, add_usage
from .engine import Engine, Loaded, Scope

if TYPE_CHECKING:  # the caller's store (bot/state); the question's path does not depend on it
    from bot.state.sqlite import State

log = logging.getLogger(__name__)

CONTEXT_CHUNKS = 5  # top chunks handed to Claude's extraction; offline reads the top 3
MAX_QUESTION_CHARS = condense.MAX_QUESTION_CHARS

# the one line shown above a PARTIAL answer (Answer.caveat), by why it is partial
CAVEATS = {
    "loose": "Partial answer: the docs match this question only loosely.",
    "uncited": "Partial answer: Claude's answer cites no passage of the docs, so it is unchecked.",
    "unverified": "Partial answer: a citation could not be checked against the docs.",
    "not_covered": "Partial answer: the docs cover only part of this question.",
    "incomplete": "Partial answer: it was cut short at its length limit.",
}
REFUSED = "Claude declined to answer this question, so there is no answer from the docs."
ABSTAIN_TEXT = "I couldn't find this in the docs, so I won't guess."


class QuestionError(ValueError):
    """The question cannot be asked as given; the message is fit to show the user."""


class Pipeline:
    def __init__(
        self,
        engine: Engine,
        anthropic_client: MessagesClient | None = None,
        models: dict | None = None,
        docs_base_url: str = "",
        state: State | None = None,
        deadline: float = DEADLINE,
    ):
        """`models`: {"condense", "extract", "answer", "check"} model ids. `state`: where answers
        are recorded (None: nowhere). `deadline`: seconds for one question's Claude steps."""
        self.engine = engine
        self.client = anthropic_client
        self.models = models or {}
        self.docs_base_url = docs_base_url
        self.state = state
        self.deadline = deadline

    def answer(
        self,
        question: str,
        history: list[dict] | None = None,
        context: dict | None = None,
        on_text: Callable[[str], None] | None = None,
        scope: Scope | None = None,
    ) -> Answer:
        """Answer a question (with the thread's earlier messages, oldest first, as {"role",
        "text"}). `on_text(delta)` receives Claude's answer text as it is written (never offline,
        never for an abstention); the returned Answer is the checked, final one either way.
        `scope`: route and search only inside it (None: everything). `context`: where the
        question came from (Slack channel, user, thread), for the audit."""
        question = self.check(question)
        started = time.perf_counter()
        trace = self.new_trace()
        ans = self.steps(question, history or [], on_text, scope, trace)
        trace.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 1)
        return self.finish(ans, context)

    def steps(
        self,
        question: str,
        history: list[dict],
        on_text: Callable[[str], None] | None,
        scope: Scope | None,
        trace: Trace,
    ) -> Answer:
        """The question's path; each step returns what it found, and records in `trace` what it
        used (tokens, notes, timings)."""
        claude = Claude(self.client, self.deadline, lambda step, why: fell_back(trace, step, why))
        clock = Laps(trace.timings_ms)

        loaded = self.engine.loaded()  # one index generation for the whole answer
        # what every question reads, loaded on a process's first one (`serve` loads it at start:
        # Engine.warm): the index, the docs' words and English word frequencies; timed apart, so
        # no step's figure counts it
        words.docs_words(loaded.searcher)
        words.zipf("the")
        clock.lap("load")
        searcher = loaded.searcher
        condensed = self.condense(question, history, claude, trace, searcher)
        clock.lap("condense")
        condensed, typos = self.correct_typos(condensed, searcher)
        trace.notes += [words.typo_note(typos)] if typos else []
        # the first word the docs don't know also loads the spelling dictionaries, once a process
        clock.lap("typos")
        query_vec, note = self.engine.embed_query(condensed)
        trace.notes += [note] if note else []
        clock.lap("embed")
        hits = self.route(condensed, query_vec, claude, loaded, scope, trace)
        clock.lap("route_retrieve")

        def abstain(near: list[Hit], text: str = "") -> Answer:
            """ "Not in the docs", saying why when the evidence knows (a name the docs never
            mention, another language), else naming the `near` sections that came closest."""
            text = text or decide.abstain_message(trace.evidence) or abstain_text(near)
            return Answer(question, condensed, ABSTAIN, text, scope=scope, trace=trace)

        offline_verdict, gate = self.assess(condensed, query_vec, hits, searcher, claude)
        trace.evidence = gate.evidence()
        clock.lap("decide")
        if gate.decision == ABSTAIN:  # nothing near: naming "closest" sections would be noise
            return abstain([])
        passages = self.extract(condensed, query_vec, hits, searcher, claude, trace)
        clock.lap("extract")
        # Claude was to check the passages but failed: the offline decision holds alone
        if claude.failed and gate is not offline_verdict:
            gate = offline_verdict
            trace.evidence = gate.evidence()
            if gate.decision == ABSTAIN:
                return abstain([])
        if not passages:
            return abstain(hits)
        chunks = {h["id"]: h for h in trace.hits}
        by_chunk = citations.number_sources(passages, chunks, self.docs_base_url)
        written = self.write(question, passages, by_chunk, chunks, claude, on_text, trace)
        clock.lap("answer")
        if written.status in (compose.NOT_COVERED, compose.EMPTY):
            trace.notes += ["Claude's answer was empty"] if written.status == compose.EMPTY else []
            return abstain(hits)
        if written.status == compose.REFUSED:
            trace.notes.append("Claude refused (stop_reason refusal)")
            return abstain([], REFUSED)
        decision, caveat, sources = conclude(gate.decision, written, list(by_chunk.values()))
        checked = self.check_claims(written, claude, trace)
        decision, caveat, note = claims.judged(decision, caveat, checked)
        trace.notes += [note] if note else []
        clock.lap("check")
        return Answer(
            question,
            condensed,
            decision,
            written.text,
            sources,
            written.citations,
            passages,
            caveat,
            scope,
            trace,
        )

    # -- the steps -------------------------------------------------------------------------------

    def check(self, question: str) -> str:
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

    def correct_typos(self, question: str, searcher: Searcher) -> tuple[str, dict[str, str]]:
        """The question with its typos read as the words they stand for (words.correct_typos)."""
        return words.correct_typos(question, searcher)

    def new_trace(self) -> Trace:
        trace = Trace(offline=self.client is None, models={"embed": self.engine.embedder.name})
        if self.client is not None:
            trace.models |= {
                k: self.models.get(k) for k in ("condense", "extract", "answer", "check")
            }
        trace.prompts = {
            n: prompt_hash(n) for n in ("classify", "condense", "extract", "answer", "check")
        }
        return trace

    def assess(
        self,
        question: str,
        query_vec: np.ndarray | None,
        hits: list[Hit],
        searcher: Searcher,
        claude: Claude,
    ) -> tuple[decide.Decision, decide.Decision]:
        """(the offline decision, the gate before extraction): the same calibrated p read in the
        offline bands, and with Claude in its own band (Claude's extraction and answer decide the
        rest). Offline, a question not answered may be in another language than the docs."""
        if not hits:
            nothing = decide.Signals(None, None, 0, 0, 0, 0, [], [], [])
            verdict = decide.Decision(ABSTAIN, 0.0, nothing, "", "sim")
            return verdict, verdict
        used, model = decide.model_for(self.engine.embedder.name, query_vec is not None)
        signals = decide.signals(question, query_vec, hits, searcher)
        offline_verdict = decide.decide(signals, model, used)
        if claude.available:
            return offline_verdict, decide.decide(signals, model, used, claude=True)
        if offline_verdict.decision != ANSWER:
            lang = language.foreign_language(question, searcher)
            if lang:
                offline_verdict.decision, offline_verdict.why = ABSTAIN, "language"
                offline_verdict.language = (lang, language.docs_language(searcher))
        return offline_verdict, offline_verdict

    def condense(
        self,
        question: str,
        history: list[dict],
        claude: Claude,
        trace: Trace,
        searcher: Searcher,
    ) -> str:
        question = condense.plain(question)  # without "Hi team," and "Thanks!"
        # with Claude, a question in another language than the docs is rewritten into theirs
        foreign = claude.available and language.foreign_language(question, searcher)
        if not condense.prior(history) and not foreign:
            return question
        docs_language = language.docs_language_name(searcher)

        def ask(client) -> str:
            text, usage = condense.with_claude(
                client, self.models["condense"], question, history, docs_language
            )
            add_usage(trace.usage, "condense", usage)
            return text

        return claude.run("condense", ask, lambda: condense.offline(question, history))

    def route(
        self,
        question: str,
        query_vec: np.ndarray | None,
        claude: Claude,
        loaded: Loaded,
        scope: Scope | None,
        trace: Trace,
    ) -> list[Hit]:
        with_claude = claude if claude.client is not None else None
        router = self.engine.router_for(loaded, scope)
        decision = router.route(question, query_vec, k=10, claude=with_claude)
        trace.route = decision.to_dict() | ({"scope": scope.describe()} if scope else {})
        if decision.note and decision.note not in trace.notes:  # e.g. the reranker fell back
            trace.notes.append(decision.note)
        if decision.usage:
            add_usage(trace.usage, "classify", decision.usage)
        trace.hits = [
            h.chunk | {"bm25": h.bm25, "vector": h.vector, "score": h.score} for h in decision.hits
        ]
        return decision.hits

    def extract(
        self,
        question: str,
        query_vec: np.ndarray | None,
        hits: list[Hit],
        searcher: Searcher,
        claude: Claude,
        trace: Trace,
    ) -> list[Passage]:
        top = hits[:CONTEXT_CHUNKS]

        def ask(client) -> list[Passage]:
            found, dropped, usage = claude_extract.extract(
                client, self.models["extract"], question, top
            )
            trace.dropped_passages += dropped
            add_usage(trace.usage, "extract", usage)
            return found

        return claude.run(
            "extract",
            ask,
            lambda: offline.extract(
                question,
                query_vec,
                top[:3],
                searcher.bm25,
                self.engine.embedder,
                searcher.furniture,
            ),
        )

    def write(
        self,
        question: str,
        passages: list[Passage],
        by_chunk: dict[str, Source],
        chunks: dict[str, dict],
        claude: Claude,
        on_text: Callable[[str], None] | None,
        trace: Trace,
    ) -> compose.Written:
        def ask(client) -> compose.Written:
            written = compose.compose(
                client, self.models["answer"], question, passages, by_chunk, on_text
            )
            add_usage(trace.usage, "answer", written.usage)
            return written

        return claude.run("answer", ask, lambda: offline.compose(passages, by_chunk, chunks))

    def check_claims(
        self, written: compose.Written, claude: Claude, trace: Trace
    ) -> claims.Checked:
        """The claim check (router/claims.py), after the answer is written so streaming is not
        held up."""
        model = self.models.get("check") or self.models.get("extract", "")
        checked = claims.check(claude, model, written.blocks, written.citations)
        if checked.usage:
            add_usage(trace.usage, "check", checked.usage)
        return checked

    def finish(self, ans: Answer, context: dict | None) -> Answer:
        if self.client is None:
            ans.trace.notes.append(OFFLINE_NOTE)
        if self.state is not None:
            try:
                ans.audit_id = self.state.record_answer(ans, context or {})
            except Exception:  # the audit log must never cost the user an answer
                log.exception("could not record the answer in the audit table")
        return ans


def conclude(
    strength: str, written: compose.Written, sources: list[Source]
) -> tuple[str, str, list[Source]]:
    """(decision, caveat, sources) of a written answer: one with no verified citation is never
    ANSWER, and only the sources it verifiably cites are listed."""
    verified = {c.source for c in written.citations if c.verified}
    why = (
        "incomplete"
        if written.status == compose.INCOMPLETE
        else "uncited"
        if not verified
        else "unverified"
        if any(not c.verified for c in written.citations)
        else "not_covered"
        if "docs don't cover" in written.text.lower()
        else "loose"
        if strength == PARTIAL
        else ""
    )
    return (
        PARTIAL if why else ANSWER,
        CAVEATS.get(why, ""),
        [s for s in sources if s.n in verified] or sources,
    )


def fell_back(trace: Trace, step: str, why: str) -> None:
    trace.offline = True
    trace.notes.append(f"{step}: {why}: {OFFLINE_NOTE}")


class Laps:
    """Each step's milliseconds into `timings`."""

    def __init__(self, timings: dict):
        self.timings, self.clock = timings, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round((now - self.clock) * 1000, 1)
        self.clock = now


def abstain_text(hits: list[Hit]) -> str:
    """The "not in the docs" answer; `hits`: related sections that did not answer it, to name."""
    near: list[str] = []
    for h in hits[:3]:
        name = citations.label(h.chunk["title"], h.chunk["heading_path"])
        if name not in near:
            near.append(name)
    return ABSTAIN_TEXT + (" The closest sections were: " + "; ".join(near) + "." if near else "")
