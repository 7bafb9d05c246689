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
from .answer import ABSTAIN, ANSWER, PARTIAL, Answer, Passage, Source
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
        `context`: where the question came from (Slack channel, user, thread), for the audit."""
        question = self.check(question)
        started = time.perf_counter()
        ans = self.start(question)
        ans.scope = scope  # routed and searched only inside it (None: everything)
        self.steps(ans, history or [], on_text)
        ans.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 1)
        return self.finish(ans, context)

    def steps(
        self, ans: Answer, history: list[dict], on_text: Callable[[str], None] | None
    ) -> None:
        claude = Claude(
            self.client, self.deadline, lambda step, why: self.fell_back(ans, step, why)
        )
        clock = Laps(ans)

        loaded = self.engine.loaded()  # one index generation for the whole answer
        searcher = loaded.searcher
        question = self.condense(ans.question, history, claude, ans, searcher)
        ans.condensed, typos = self.correct_typos(question, searcher)
        ans.notes += [words.typo_note(typos)] if typos else []
        clock.lap("condense")
        query_vec, note = self.engine.embed_query(ans.condensed)
        ans.notes += [note] if note else []
        clock.lap("embed")
        hits = self.route(ans, query_vec, claude, loaded)
        clock.lap("route_retrieve")
        offline_verdict, gate = self.assess(ans.condensed, query_vec, hits, searcher, claude)
        ans.evidence = gate.evidence()
        if gate.decision == ABSTAIN:  # nothing near: naming "closest" sections would be noise
            return self.abstain(ans, [])
        ans.passages = self.extract(ans, query_vec, hits, searcher, claude)
        clock.lap("extract")
        # Claude was to check the passages but failed: the offline decision holds alone
        if claude.failed and gate is not offline_verdict:
            gate = offline_verdict
            ans.evidence = gate.evidence()
            if gate.decision == ABSTAIN:
                return self.abstain(ans, [])
        if not ans.passages:
            return self.abstain(ans, hits)
        by_chunk = citations.number_sources(
            ans.passages, {h["id"]: h for h in ans.hits}, self.docs_base_url
        )
        ans.sources = list(by_chunk.values())
        written = self.write(ans, by_chunk, claude, on_text)
        clock.lap("answer")
        self.conclude(ans, gate.decision, written, hits)
        self.check_claims(ans, written, claude)
        clock.lap("check")

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

    def start(self, question: str) -> Answer:
        ans = Answer(question, question, ABSTAIN, "", offline=self.client is None)
        ans.models = {"embed": self.engine.embedder.name}
        if self.client is not None:
            ans.models |= {
                k: self.models.get(k) for k in ("condense", "extract", "answer", "check")
            }
        ans.prompts = {
            n: prompt_hash(n) for n in ("classify", "condense", "extract", "answer", "check")
        }
        return ans

    def correct_typos(self, question: str, searcher: Searcher) -> tuple[str, dict[str, str]]:
        """The question with its typos read as the words they stand for (words.correct_typos)."""
        return words.correct_typos(question, searcher)

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
        ans: Answer,
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
            add_usage(ans.usage, "condense", usage)
            return text

        return claude.run("condense", ask, lambda: condense.offline(question, history))

    def route(
        self, ans: Answer, query_vec: np.ndarray | None, claude: Claude, loaded: Loaded
    ) -> list[Hit]:
        with_claude = claude if claude.client is not None else None
        router = self.engine.router_for(loaded, ans.scope)
        decision = router.route(ans.condensed, query_vec, k=10, claude=with_claude)
        ans.route = decision.to_dict() | ({"scope": ans.scope.describe()} if ans.scope else {})
        if decision.note and decision.note not in ans.notes:  # e.g. the reranker fell back
            ans.notes.append(decision.note)
        if decision.usage:
            add_usage(ans.usage, "classify", decision.usage)
        ans.hits = [
            h.chunk | {"bm25": h.bm25, "vector": h.vector, "score": h.score} for h in decision.hits
        ]
        return decision.hits

    def extract(
        self,
        ans: Answer,
        query_vec: np.ndarray | None,
        hits: list[Hit],
        searcher: Searcher,
        claude: Claude,
    ) -> list[Passage]:
        top = hits[:CONTEXT_CHUNKS]

        def ask(client) -> list[Passage]:
            found, dropped, usage = claude_extract.extract(
                client, self.models["extract"], ans.condensed, top
            )
            ans.dropped_passages += dropped
            add_usage(ans.usage, "extract", usage)
            return found

        return claude.run(
            "extract",
            ask,
            lambda: offline.extract(
                ans.condensed,
                query_vec,
                top[:3],
                searcher.bm25,
                self.engine.embedder,
                searcher.furniture,
            ),
        )

    def write(
        self,
        ans: Answer,
        by_chunk: dict[str, Source],
        claude: Claude,
        on_text: Callable[[str], None] | None,
    ) -> compose.Written:
        def ask(client) -> compose.Written:
            written = compose.compose(
                client, self.models["answer"], ans.question, ans.passages, by_chunk, on_text
            )
            add_usage(ans.usage, "answer", written.usage)
            ans.citations = written.citations
            return written

        def quote() -> compose.Written:
            ans.citations = []
            return compose.Written(compose.OK, offline.compose(ans.passages, by_chunk, ans))

        return claude.run("answer", ask, quote)

    def conclude(
        self,
        ans: Answer,
        strength: str,
        written: compose.Written,
        hits: list[Hit],
    ) -> None:
        """The decision from the evidence and what the answer step returned: an answer with no
        verified citation is never ANSWER."""
        if written.status in (compose.NOT_COVERED, compose.EMPTY):
            if written.status == compose.EMPTY:
                ans.notes.append("Claude's answer was empty")
            return self.abstain(ans, hits)
        if written.status == compose.REFUSED:
            ans.text, ans.sources, ans.decision = REFUSED, [], ABSTAIN
            ans.notes.append("Claude refused (stop_reason refusal)")
            return
        ans.text = written.text
        verified = {c.source for c in ans.citations if c.verified}
        why = (
            "incomplete"
            if written.status == compose.INCOMPLETE
            else "uncited"
            if not verified
            else "unverified"
            if any(not c.verified for c in ans.citations)
            else "not_covered"
            if "docs don't cover" in ans.text.lower()
            else "loose"
            if strength == PARTIAL
            else ""
        )
        ans.decision = PARTIAL if why else ANSWER
        ans.caveat = CAVEATS.get(why, "")
        ans.sources = [s for s in ans.sources if s.n in verified] or ans.sources

    def check_claims(self, ans: Answer, written: compose.Written, claude: Claude) -> None:
        """The claim check (router/claims.py), after the answer is written so streaming is not
        held up: an unsupported sentence turns ANSWER into PARTIAL, naming it."""
        if ans.decision == ABSTAIN:
            return
        model = self.models.get("check") or self.models.get("extract", "")
        checked = claims.check(claude, model, written.blocks, ans.citations)
        if checked.usage:
            add_usage(ans.usage, "check", checked.usage)
        claims.apply(ans, checked)

    def abstain(self, ans: Answer, hits: list[Hit]) -> None:
        """ "Not in the docs", saying why when the evidence knows (a name the docs never mention,
        another language), else naming the `hits` that came closest."""
        text = decide.abstain_message(ans.evidence) or abstain_text(hits)
        ans.decision, ans.sources, ans.text = ABSTAIN, [], text

    def fell_back(self, ans: Answer, step: str, why: str) -> None:
        ans.offline = True
        ans.notes.append(f"{step}: {why}: {OFFLINE_NOTE}")

    def finish(self, ans: Answer, context: dict | None) -> Answer:
        if self.client is None:
            ans.notes.append(OFFLINE_NOTE)
        if self.state is not None:
            try:
                ans.audit_id = self.state.record_answer(ans, context or {})
            except Exception:  # the audit log must never cost the user an answer
                log.exception("could not record the answer in the audit table")
        return ans


class Laps:
    """Each step's milliseconds into ans.timings_ms."""

    def __init__(self, ans: Answer):
        self.ans, self.clock = ans, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.ans.timings_ms[name] = round((now - self.clock) * 1000, 1)
        self.clock = now


def abstain_text(hits: list[Hit]) -> str:
    """The "not in the docs" answer; `hits`: related sections that did not answer it, to name."""
    near: list[str] = []
    for h in hits[:3]:
        name = citations.label(h.chunk["title"], h.chunk["heading_path"])
        if name not in near:
            near.append(name)
    return ABSTAIN_TEXT + (" The closest sections were: " + "; ".join(near) + "." if near else "")
