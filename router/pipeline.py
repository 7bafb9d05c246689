"""question (+ thread history) → condense → route → retrieve → evidence → extract → compose →
decide: the Answer, and nothing else (the caller records it: bot/app.py's FieldGuide.ask).

Each step is its own module (condense, extract, compose, offline, decide, citations); every Claude
step goes through router/claude.py, which retries what the API means to be retried within the
question's deadline and runs a step offline when no key is set, when Claude fails or replies with
something unusable: a failed step changes only itself. Passages are checked against their chunk,
citations against the blocks that were sent, so nothing reaches the user as a quote that is not in
the docs; an answer that cites nothing is never shown (the docs' own quotes are), and one whose
claims could not be checked says so.

With Claude, the path before the answer is a setting (`path`, FIELDGUIDE_CLAUDE_PATH):
- "sequential": classify, then search, then extract passages, then answer (three round trips
  before the first word);
- "overlap": the same, with Claude's classification running while the question is embedded and
  searched locally;
- "cite" (the default, bench/claude_paths.py): classification overlapped, and no extraction call:
  the top chunks go to the answer as search_result blocks, a text block per paragraph, and the
  answer's own citations are the extraction (one round trip before the first word).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from index.clean import valid_text
from index.search import Hit, IndexChanged, Searcher
from prompts import prompt_hash

from . import citations, claims, compose, condense, decide, language, offline, words
from . import extract as claude_extract
from .answer import ABSTAIN, ANSWER, PARTIAL, Answer, Passage, Source, Trace
from .classify import Classification, ClaudeClassifier
from .claude import DEADLINE, OFFLINE_NOTE, Claude, MessagesClient, add_usage
from .engine import Engine, Scope
from .policy import Router
from .reader.score import Reader, reader_for

log = logging.getLogger(__name__)

CONTEXT_CHUNKS = 5  # top chunks handed to Claude (extraction, or the answer); offline reads 3
MAX_QUESTION_CHARS = condense.MAX_QUESTION_CHARS
# times a question is asked again when a reindex takes a chunk it found (IndexChanged): each time
# on the newest generation, so only reindexes committing faster than one answer exhaust them
INDEX_RETRIES = 3
PATHS = ("cite", "overlap", "sequential")  # FIELDGUIDE_CLAUDE_PATH (the module doc)
# Claude's classification runs here while the question is embedded and searched (I/O waits only)
EARLY = ThreadPoolExecutor(max_workers=8, thread_name_prefix="classify")
UNCITED_NOTE = (
    "Claude's answer cited no passage of the docs: the docs' own quotes are shown instead"
)

# offline, a question the docs may not answer gets the closest sections quoted under this line
UNSURE = "I'm not sure the docs answer this; the closest sections are:"
# the one line shown above a PARTIAL answer (Answer.caveat), by why it is partial
CAVEATS = {
    "loose": UNSURE,
    "unverified": "Partial answer: a citation could not be checked against the docs.",
    "not_covered": "Partial answer: the docs cover only part of this question.",
    "incomplete": "Partial answer: it was cut short at its length limit.",
}
REFUSED = "Claude declined to answer this question, so there is no answer from the docs."
ABSTAIN_TEXT = "I couldn't find this in the docs, so I won't guess."


class QuestionError(ValueError):
    """The question cannot be asked as given; the message is fit to show the user."""


def read_first(hits: list[Hit], read: list[float] | None) -> list[Hit]:
    """The sections the reader read, the one it finds says most of what was asked first (what is
    quoted and handed on comes from the top), then the rest in the search's order; the read ones
    take the search's scores in their new order (the offline extractor weighs a unit by its
    chunk's score)."""
    if not read:
        return hits
    order = sorted(range(len(read)), key=lambda i: -read[i])
    fused = sorted((hits[i].score for i in order), reverse=True)
    first = [hits[i] for i in order]
    for h, score in zip(first, fused, strict=True):  # the extractor weighs chunks by this score
        h.score = score
    return first + hits[len(read) :]


class Pipeline:
    def __init__(
        self,
        engine: Engine,
        anthropic_client: MessagesClient | None = None,
        models: dict | None = None,
        docs_base_url: str = "",
        deadline: float = DEADLINE,
        path: str = "cite",
    ):
        """`models`: {"condense", "extract", "answer", "check"} model ids. `deadline`: seconds
        for one question's Claude steps. `path`: the steps with Claude before the answer (PATHS,
        the module doc). It keeps no store: an answer is returned, not recorded."""
        if path not in PATHS:
            raise ValueError(f"path must be one of {', '.join(PATHS)}, not {path!r}")
        self.engine = engine
        self.client = anthropic_client
        self.models = models or {}
        self.docs_base_url = docs_base_url
        self.deadline = deadline
        self.path = path
        self._readers: dict[str, Reader] | None = None
        self._readers_lock = threading.Lock()

    def readers(self) -> tuple[str, ...]:
        """The readers that run here (router/reader/score.py), in the decision's order of
        preference: found once per pipeline, each loaded on its first question."""
        with self._readers_lock:
            if self._readers is None:
                found = {f: reader_for(self.engine.embedder, f) for f in decide.READERS}
                self._readers = {f: r for f, r in found.items() if r is not None}
            return tuple(self._readers)

    def answer(
        self,
        question: str,
        history: list[dict] | None = None,
        on_text: Callable[[str], None] | None = None,
        scope: Scope | None = None,
    ) -> Answer:
        """Answer a question (with the thread's earlier messages, oldest first, as {"role",
        "text"}). `on_text(delta)` receives Claude's answer text as it is written (never offline,
        never for an abstention); the returned Answer is the checked, final one either way.
        `scope`: route and search only inside it (None: everything)."""
        question = self.check(question)
        started = time.perf_counter()
        streamed = False

        def sent(delta: str) -> None:
            nonlocal streamed
            streamed = True
            assert on_text is not None
            on_text(delta)

        for attempt in range(INDEX_RETRIES + 1):
            trace = self.new_trace()
            try:
                ans = self.steps(question, history or [], on_text and sent, scope, trace)
                break
            except IndexChanged:
                # a reindex committed while answering and took a chunk it found: asked again on
                # the new generation (waiting for it to load), unless words are out already
                if streamed or attempt == INDEX_RETRIES:
                    raise
                log.info("the index changed while answering; asking again on the new one")
                self.engine.loaded(wait=True)
        trace.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 1)
        if self.client is None:
            ans.trace.notes.append(OFFLINE_NOTE)
        return ans

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
        router = self.engine.router_for(loaded, scope)
        # what the question's words are read against: the scope's docs only (its spelling,
        # signals and messages know nothing of the docs outside it), else the whole index
        searcher = router.searcher
        # what every question reads, loaded on a process's first one (`serve` loads it at start:
        # Engine.warm): the index, the docs' words (a scope's: on its first question) and English
        # word frequencies; timed apart, so no step's figure counts it
        words.docs_words(searcher)
        words.zipf("the")
        clock.lap("load")
        condensed = self.condense(question, history, claude, trace, searcher)
        clock.lap("condense")
        condensed, typos = self.correct_typos(condensed, searcher)
        trace.notes += [words.typo_note(typos)] if typos else []
        # the first word the docs don't know also loads the spelling dictionaries, once a process
        clock.lap("typos")
        early = self.classify_early(condensed, router, claude)
        query_vec, note = self.engine.embed_query(condensed)
        trace.notes += [note] if note else []
        clock.lap("embed")
        hits = self.route(condensed, query_vec, claude, router, scope, trace, early)
        clock.lap("route_retrieve")

        def abstain(near: list[Hit], text: str = "") -> Answer:
            """ "Not in the docs", saying why when the evidence knows (a name the docs never
            mention, another language), else naming the `near` sections that came closest."""
            text = text or decide.abstain_message(trace.evidence) or abstain_text(near)
            return Answer(question, condensed, ABSTAIN, text, scope=scope, trace=trace)

        offline_verdict, gate = self.assess(condensed, query_vec, hits, searcher, claude)
        trace.evidence = gate.evidence()
        hits = read_first(hits, offline_verdict.signals.read)
        clock.lap("decide")
        if gate.decision == ABSTAIN:  # nothing near: naming "closest" sections would be noise
            return abstain([])
        cite = self.path == "cite" and claude.available
        # the cite path: the answer's own citations extract, from the top chunks' paragraphs
        passages = (
            context_passages(hits[:CONTEXT_CHUNKS])
            if cite
            else self.extract(condensed, query_vec, hits, searcher, claude, trace)
        )
        clock.lap("extract")
        # Claude was to check the passages but failed: the offline decision holds alone
        if "extract" in claude.fell_back and gate is not offline_verdict:
            gate = offline_verdict
            trace.evidence = gate.evidence()
            if gate.decision == ABSTAIN:
                return abstain([])
        if not passages:
            return abstain(hits)
        chunks = {h["id"]: h for h in trace.hits}

        def quotes() -> tuple[compose.Written, list[Passage], dict[str, Source]]:
            """The docs' own quotes: the offline extractor's in the cite path (whole paragraphs
            of five chunks are no quotes), else the passages as extracted."""
            found = passages
            if cite:
                found = offline.extract(
                    condensed,
                    query_vec,
                    hits[:3],
                    searcher.bm25,
                    self.engine.embedder,
                    searcher.furniture,
                )
            by = citations.number_sources(found, chunks, self.docs_base_url)
            # unsure offline, the quotes stand under the caveat alone (UNSURE names them)
            lead = "" if offline_verdict.decision == PARTIAL else offline.LEAD
            return offline.compose(found, by, chunks, lead), found, by

        written, passages, by_chunk = self.write(
            question, passages, chunks, claude, on_text, trace, quotes
        )
        clock.lap("answer")
        # the docs' own quotes shown offline (no key, a step that fell back, or in place of an
        # answer that cites nothing) stand on the offline decision alone
        if written.by == "offline":
            gate = offline_verdict
            trace.evidence = gate.evidence()
        if gate.decision == ABSTAIN or not passages:
            return abstain(hits)
        if written.status in (compose.NOT_COVERED, compose.EMPTY):
            trace.notes += ["Claude's answer was empty"] if written.status == compose.EMPTY else []
            return abstain(hits)
        if written.status == compose.REFUSED:
            trace.notes.append("Claude refused (stop_reason refusal)")
            return abstain([], REFUSED)
        decision, caveat, sources = conclude(gate.decision, written, list(by_chunk.values()))
        passages = cited_passages(passages, written) if cite else passages
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
        """The question with its typos read as the words they stand for (words.correct_typos);
        a question in another language than the docs has none of theirs ("Wie" is no "Wire"),
        asked only when there is something to correct."""
        fixed, typos = words.correct_typos(question, searcher)
        if typos and language.foreign_language(question, searcher):
            return question, {}
        return fixed, typos

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
            nothing = decide.Signals(None, None, 0, 0, 0, 0, 0, [], [], [])
            verdict = decide.Decision(ABSTAIN, 0.0, nothing, "", "sim")
            return verdict, verdict
        used, model = decide.model_for(
            self.engine.embedder.name, query_vec is not None, readers=self.readers()
        )
        form = decide.reader_of(model)
        readers = {form: self._readers[form]} if form and self._readers else None
        signals = decide.signals(question, query_vec, hits, searcher, readers)
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

    def classify_early(
        self, question: str, router: Router, claude: Claude
    ) -> Future[Classification | None] | None:
        """Claude's classification, started now so it runs while the question is embedded and
        searched ("overlap" and "cite" paths); None when it is to run in turn (or not at all)."""
        if self.path == "sequential" or not claude.available:
            return None
        classifier = router.classifier
        if not isinstance(classifier, ClaudeClassifier):
            return None
        return EARLY.submit(classifier.early, question, claude)

    def route(
        self,
        question: str,
        query_vec: np.ndarray | None,
        claude: Claude,
        router: Router,
        scope: Scope | None,
        trace: Trace,
        early: Future[Classification | None] | None = None,
    ) -> list[Hit]:
        with_claude = claude if claude.client is not None else None
        classified: Classification | str | None = None
        if early is not None:
            classified = early.result() or claude.fell_back.get("classify", "failed")
        decision = router.route(
            question, query_vec, k=10, claude=with_claude, classified=classified
        )
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
        chunks: dict[str, dict],
        claude: Claude,
        on_text: Callable[[str], None] | None,
        trace: Trace,
        quotes: Callable[[], tuple[compose.Written, list[Passage], dict[str, Source]]],
    ) -> tuple[compose.Written, list[Passage], dict[str, Source]]:
        """(the written answer, the passages it was written from, their numbered sources):
        Claude's, or the docs' own quotes when the answer step falls back offline."""
        by_chunk = citations.number_sources(passages, chunks, self.docs_base_url)
        shown = [False]

        def relay(piece: str) -> None:
            shown[0] = True
            if on_text is not None:
                on_text(piece)

        def ask(client) -> tuple[compose.Written, list[Passage], dict[str, Source]]:
            # a try after one that already streamed words to the user is not streamed again:
            # the returned text replaces what was streamed
            stream = relay if on_text is not None and not shown[0] else None
            written = compose.compose(
                client, self.models["answer"], question, passages, by_chunk, stream
            )
            add_usage(trace.usage, "answer", written.usage)
            return written, passages, by_chunk

        written, used, by_chunk = claude.run("answer", ask, quotes)
        uncited = written.by == "claude" and written.status in (compose.OK, compose.INCOMPLETE)
        if uncited and not written.cited:  # never shown as an answer: the docs' own quotes are
            trace.notes.append(UNCITED_NOTE)
            return quotes()
        return written, used, by_chunk

    def check_claims(
        self, written: compose.Written, claude: Claude, trace: Trace
    ) -> claims.Checked:
        """The claim check (router/claims.py), after the answer is written so streaming is not
        held up."""
        model = self.models.get("check") or self.models.get("extract", "")
        checked = claims.check(claude, model, written)
        if checked.usage:
            add_usage(trace.usage, "check", checked.usage)
        return checked


def conclude(
    strength: str, written: compose.Written, sources: list[Source]
) -> tuple[str, str, list[Source]]:
    """(decision, caveat, sources) of a written answer: one with no verified citation is never
    ANSWER, and only the sources it verifiably cites are listed."""
    verified = {c.source for c in written.citations if c.verified}
    why = (
        "incomplete"
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


FENCE = re.compile(r"^(```|~~~)", re.M)


def paragraphs(text: str) -> list[str]:
    """A chunk's paragraphs (blank-line separated; a fenced code block whole): the smallest units
    the answer's citations point at."""
    out: list[str] = []
    current: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if FENCE.match(line.strip()):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                out.append("\n".join(current))
            current = []
            continue
        current.append(line)
    if current:
        out.append("\n".join(current))
    return [p for p in out if p.strip()]


def context_passages(hits: list[Hit]) -> list[Passage]:
    """The top chunks as the answer reads them in the cite path: each chunk's paragraphs, in
    order (a chunk is one search_result, a paragraph one of its text blocks)."""
    return [
        Passage(h.chunk["id"], para, h.score) for h in hits for para in paragraphs(h.chunk["text"])
    ]


def cited_passages(passages: list[Passage], written: compose.Written) -> list[Passage]:
    """The paragraphs Claude's answer cites (the cite path's passages); the passages as they are
    for quotes written offline."""
    if written.by != "claude":
        return passages
    cited = [c.cited_text for c in written.citations if c.verified]
    return [p for p in passages if any(p.text in c for c in cited)]
