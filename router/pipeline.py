"""question (+ thread history) → condense → route → retrieve → decide → the offline path or the
Claude path → the verdict: the Answer, and nothing else (the caller records it: bot/app.py's
FieldGuide.ask).

`Pipeline.answer` reads in one piece: `asked` makes the question's context (router/question.py's
`Asked`: the question checked, its trace, its Claude deadline, one index generation), which every
step reads and fills; `steps` runs what every question takes, then one path, the offline one (no
key) or the Claude one, each returning a Draft of what it found, wrote and decided; and
router/question.py's `verdict` alone chooses the verdict that stands. Every Claude step goes
through router/claude.py, which retries what the API means to be retried within the question's
deadline and runs a step offline when Claude fails or replies with something unusable: a failed
step changes only itself, and quotes shown offline stand on the offline decision. Passages are
checked against their chunk, citations against the blocks that were sent, so nothing reaches the
user as a quote that is not in the docs; an answer that cites nothing is never shown (the docs' own
quotes are), and one whose claims could not be checked says so.

With Claude, the path before the answer is a setting (FIELDGUIDE_CLAUDE_PATH): "sequential"
(classify, search, extract, answer), "overlap" (Claude classifying while the question is searched)
and "cite" (the default, bench/claude_paths.py: one round trip before the first word; Claude
classifies beside the answer; it reads the candidates packed to a token budget, router/context.py,
cites them, and may search again, router/second_look.py).

The whole answer has a deadline: the answer's stream is cut at the question's deadline less the
claim check's reserved time (claims.reserve), what was shown and checked is kept and marked, and a
streamed reply's first byte must come within FIELDGUIDE_FIRST_BYTE_TIMEOUT seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from index.search import IndexChanged
from prompts import prompt_hash

from . import citations, claims, compose, decide, language, offline, reading, words
from . import extract as claude_extract
from .answer import ABSTAIN, ANSWER, PARTIAL, Answer, Passage, Source, Trace
from .classify import Classification, ClaudeClassifier, keep_classification
from .claude import DEADLINE, FIRST_BYTE, OFFLINE_NOTE, Claude, MessagesClient
from .context import BUDGET, Budget, for_claude
from .engine import Engine, Scope
from .exact import near, widened
from .messages import add_usage
from .question import Asked, Draft, checked_question, fell_back, lap, verdict
from .second_look import looker

log = logging.getLogger(__name__)

CONTEXT_CHUNKS = 5  # top chunks Claude extracts from (the sequential and overlap paths)
OFFLINE_CHUNKS = 3
HITS = 10  # the hits the decision, the offline path and the audit read
# times a question is asked again when a reindex takes a chunk it found (IndexChanged): each time
# on the newest generation, so only reindexes committing faster than one answer exhaust them
INDEX_RETRIES = 3
PATHS = ("cite", "overlap", "sequential")  # FIELDGUIDE_CLAUDE_PATH (the module doc)
# Claude's classification runs here while the question is embedded and searched (I/O waits only)
EARLY = ThreadPoolExecutor(max_workers=8, thread_name_prefix="classify")
UNCITED_NOTE = "Claude's answer cited no passage of the docs: the docs' own quotes are shown"
WRITTEN = (compose.OK, compose.INCOMPLETE, compose.CUT)  # an answer written, whose claims count
Quoted = tuple[compose.Written, list[Passage], dict[str, Source]]


class Pipeline:
    def __init__(
        self,
        engine: Engine,
        anthropic_client: MessagesClient | None = None,
        models: dict | None = None,
        docs_base_url: str = "",
        deadline: float = DEADLINE,
        path: str = "cite",
        first_byte: float = FIRST_BYTE,
        budget: Budget = BUDGET,
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
        self.deadline, self.path = deadline, path
        self.first_byte = first_byte  # seconds a streamed answer's reads may wait
        self.budget = budget  # what Claude reads, how deep, how many second looks
        self.looks_for = looker(lambda t: engine.embed_query(t), budget, docs_base_url)
        # what every answer's trace names: the models, and the prompts by hash (fixed in a process)
        steps = ("condense", "extract", "answer", "check")
        claude_steps = steps if anthropic_client is not None else ()
        self.claude_models = {k: self.models.get(k) for k in claude_steps}
        self.prompts = {n: prompt_hash(n) for n in ("classify", *steps)}

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
        started = time.perf_counter()
        streamed = False

        def sent(delta: str) -> None:
            nonlocal streamed
            streamed = True
            assert on_text is not None
            on_text(delta)

        for attempt in range(INDEX_RETRIES + 1):
            try:
                ans = self.steps(self.asked(question, history or [], on_text and sent, scope))
                break
            except IndexChanged:
                # a reindex committed while answering and took a chunk it found: asked again on
                # the new generation (waiting for it to load), unless words are out already
                if streamed or attempt == INDEX_RETRIES:
                    raise
                log.info("the index changed while answering; asking again on the new one")
                self.engine.loaded(wait=True)
        ans.trace.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 1)
        if self.client is None:
            ans.trace.notes.append(OFFLINE_NOTE)
        return ans

    def asked(
        self,
        question: str,
        history: list[dict],
        on_text: Callable[[str], None] | None,
        scope: Scope | None,
    ) -> Asked:
        """The question's context: the question checked (else a QuestionError), a fresh trace,
        its own Claude deadline, one index generation (the newest loaded) for the whole answer."""
        question = checked_question(question)
        models = {"embed": self.engine.embedder.name, **self.claude_models}
        trace = Trace(self.client is None, models=models, prompts=dict(self.prompts))
        claude = Claude(self.client, self.deadline, lambda step, why: fell_back(trace, step, why))
        router = self.engine.router_for(self.engine.loaded(), scope)
        searcher, clock = router.searcher, time.perf_counter()
        return Asked(question, history, scope, on_text, trace, claude, router, searcher, clock)

    def steps(self, q: Asked) -> Answer:
        """The question's path: what every question takes, then one path, then the verdict."""
        # what every question reads, loaded on a process's first one (`serve` loads it at start:
        # Engine.warm): the docs' words (a scope's: on its first question) and English word
        # frequencies; timed apart, so no step's figure counts it
        words.docs_words(q.searcher)
        words.zipf("the")
        lap(q, "load")
        q.condensed = self.condense(q)
        lap(q, "condense")
        q.condensed = self.correct_typos(q)
        # the first word the docs don't know builds the spelling dictionary, once a generation
        lap(q, "typos")
        early = self.classify_early(q)
        q.query_vec, note = self.engine.embed_query(q.condensed)
        q.trace.notes += [note] if note else []
        lap(q, "embed")
        self.route(q, early)
        lap(q, "route_retrieve")
        q.offline_verdict, gate = self.assess(q)
        lap(q, "decide")
        if self.client is None:
            draft = self.offline_path(q)
        else:
            draft = self.claude_path(q, gate)
            if self.path == "cite":  # Claude's classification, made beside the answer
                keep_classification(early, q.trace)
        return verdict(q, draft)

    # -- the two paths: what each found, wrote and decided ---------------------------------------

    def offline_path(self, q: Asked) -> Draft:
        """No key: the top chunks' sentences that answer the question, quoted as they are, on the
        offline decision."""
        decided = q.offline_verdict
        assert decided is not None
        if decided.decision == ABSTAIN and not q.exact.written:  # nothing near: no "closest"
            return Draft(decided)
        passages = self.offline_passages(q)
        decided = q.offline_verdict = near(decided, q.exact.written, [p.text for p in passages])
        lap(q, "extract")
        if decided.decision == ABSTAIN or not passages:
            return Draft(decided)
        written, passages, sources = self.quotes(q, passages)
        lap(q, "answer")
        checked = claims.offline(written.citations)
        lap(q, "check")
        return Draft(decided, passages, written, sources, checked)

    def claude_path(self, q: Asked, gate: decide.Decision) -> Draft:
        """With a key: passages (the top chunks' paragraphs on the cite path, else extracted),
        Claude's answer from them, streamed, and its claims checked. A step that falls back runs
        offline, and from then on the offline decision stands."""
        assert q.offline_verdict is not None
        gate = near(gate, q.exact.written, [h.chunk["text"] for h in q.candidates])
        if gate.decision == ABSTAIN:
            return Draft(gate)
        cite = self.path == "cite" and q.claude.available
        passages = for_claude(q, self.budget.tokens) if cite else self.extract(q)
        lap(q, "extract")
        if "extract" in q.claude.fell_back:  # Claude was to check the passages but failed
            gate = q.offline_verdict
            if gate.decision == ABSTAIN:
                return Draft(gate)
        if not passages:
            return Draft(gate)
        written, passages, sources = self.write(q, passages, cite)
        lap(q, "answer")
        if written.by == "offline":  # the docs' own quotes stand on the offline decision alone
            gate = q.offline_verdict
        passages = citations.cited_passages(passages, written) if cite else passages
        checked = None
        if written.status in WRITTEN:
            checked = self.check_claims(q, written)
        lap(q, "check")
        return Draft(gate, passages, written, sources, checked)

    # -- the steps -------------------------------------------------------------------------------

    def condense(self, q: Asked) -> str:
        question = reading.plain(q.question)  # without "Hi team," and "Thanks!"
        # with Claude, a question in another language than the docs is rewritten into theirs
        foreign = q.claude.available and language.foreign_language(question, q.searcher)
        if not reading.prior(q.history) and not foreign:
            return question
        docs_language = language.docs_language_name(q.searcher)

        def ask(client) -> str:
            text, usage = reading.follow_up_with_claude(
                client, self.models["condense"], question, q.history, docs_language
            )
            add_usage(q.trace.usage, "condense", usage)
            return text

        return q.claude.run("condense", ask, lambda: reading.follow_up_offline(question, q.history))

    def correct_typos(self, q: Asked) -> str:
        """The question with its typos read as the words they stand for (words.correct_typos);
        a question in another language than the docs has none of theirs ("Wie" is no "Wire"),
        asked only when there is something to correct."""
        fixed, typos = words.correct_typos(q.condensed, q.searcher)
        if typos and language.foreign_language(q.condensed, q.searcher):
            return q.condensed
        q.trace.notes += [words.typo_note(typos)] if typos else []
        return fixed

    def classify_early(self, q: Asked) -> Future | None:
        """Claude's classification, started now so it runs while the question is embedded and
        searched ("overlap"), or beside the answer, never waited for ("cite"); None when it is to
        run in turn (or not at all)."""
        if self.path == "sequential" or not q.claude.available:
            return None
        classifier = q.router.classifier
        if not isinstance(classifier, ClaudeClassifier):
            return None
        if self.path == "cite":
            return EARLY.submit(classifier.beside, q.condensed, q.claude)
        return EARLY.submit(classifier.early, q.condensed, q.claude)

    def route(self, q: Asked, early: Future | None) -> None:
        """The hits, routed (by intent) and retrieved, into `q.hits` and the trace. The cite path
        retrieves with the offline router: it does not wait for Claude's classification."""
        claude = q.claude
        with_claude = claude if claude.client is not None else None
        classified: Classification | str | None = None
        waits = self.path != "cite"
        if early is not None and waits:
            classified = early.result() or claude.fell_back.get("classify", "failed")
        decision = q.router.route(
            q.condensed,
            q.query_vec,
            k=max(HITS, self.budget.depth),
            # Voyage did not embed the question: its reranker, the same service, is not asked
            rerank=q.query_vec is not None or not self.engine.embedder.name.startswith("voyage:"),
            claude=with_claude if waits else None,
            classified=classified,
            wait=waits,
        )
        trace = q.trace
        trace.route = decision.to_dict() | ({"scope": q.scope.describe()} if q.scope else {})
        if decision.note and decision.note not in trace.notes:  # e.g. the reranker fell back
            trace.notes.append(decision.note)
        if decision.usage:
            add_usage(trace.usage, "classify", decision.usage)
        scored = [
            h.chunk | {"bm25": h.bm25, "vector": h.vector, "score": h.score} for h in decision.hits
        ]
        trace.hits = scored[:HITS]
        q.hits, q.candidates = decision.hits[:HITS], decision.hits
        q.exact = decision.exact
        q.chunks = {h["id"]: h for h in scored}

    def assess(self, q: Asked) -> tuple[decide.Decision, decide.Decision]:
        """(the offline decision, the gate before extraction): the same calibrated p read in the
        offline bands, and with Claude in its own band (Claude's extraction and answer decide the
        rest). Offline, a question not answered may be in another language than the docs."""
        if not q.hits:
            nothing = decide.Signals(None, None, 0, 0, 0, 0, 0, [], [], [])
            found = decide.Decision(ABSTAIN, 0.0, nothing, "", "sim")
            return found, found
        used, model = decide.model_for(self.engine.embedder.name, q.query_vec is not None)
        signals = decide.signals(q.condensed, q.query_vec, q.hits, q.searcher)
        offline_verdict = decide.decide(signals, model, used)
        if q.claude.available:
            return offline_verdict, decide.decide(signals, model, used, claude=True)
        if offline_verdict.decision != ANSWER:
            lang = language.foreign_language(q.condensed, q.searcher)
            if lang:
                offline_verdict.decision, offline_verdict.why = ABSTAIN, "language"
                offline_verdict.language = (lang, language.docs_language(q.searcher))
        return offline_verdict, offline_verdict

    def offline_passages(self, q: Asked) -> list[Passage]:
        """The offline extractor's passages from the top chunks."""
        top, s = widened(q.hits[:OFFLINE_CHUNKS], q.candidates, q.exact.written), q.searcher
        return offline.extract(
            q.condensed, q.query_vec, top, s.bm25, self.engine.embedder, s.furniture, q.exact.names
        )

    def extract(self, q: Asked) -> list[Passage]:
        """Claude's passages of the top chunks (the offline extractor's when it falls back)."""
        top = q.hits[:CONTEXT_CHUNKS]

        def ask(client) -> list[Passage]:
            found, dropped, usage = claude_extract.extract(
                client, self.models["extract"], q.condensed, top
            )
            q.trace.dropped_passages += dropped
            add_usage(q.trace.usage, "extract", usage)
            return found

        return q.claude.run("extract", ask, lambda: self.offline_passages(q))

    def quotes(self, q: Asked, passages: list[Passage], cite: bool = False) -> Quoted:
        """The docs' own quotes: the offline extractor's in the cite path (whole paragraphs of
        five chunks are no quotes), else the passages as extracted."""
        found = self.offline_passages(q) if cite else passages
        by = citations.number_sources(found, q.chunks, self.docs_base_url)
        # unsure offline, the quotes stand under the caveat alone (UNSURE names them)
        assert q.offline_verdict is not None
        lead = "" if q.offline_verdict.decision == PARTIAL else offline.LEAD
        return offline.compose(found, by, q.chunks, lead), found, by

    def write(self, q: Asked, passages: list[Passage], cite: bool) -> Quoted:
        """(the written answer, the passages it was written from, their numbered sources):
        Claude's, or the docs' own quotes when the answer step falls back offline or Claude's
        answer cites nothing."""
        by_chunk = citations.number_sources(passages, q.chunks, self.docs_base_url)
        shown = [False]

        def relay(piece: str) -> None:
            shown[0] = True
            if q.on_text is not None:
                q.on_text(piece)

        def ask(client) -> Quoted:
            # a try after one that already streamed words to the user is not streamed again:
            # the returned text replaces what was streamed
            stream = relay if q.on_text is not None and not shown[0] else None
            # the stream ends where the claim check's reserved time begins
            until = q.claude.ends - claims.reserve(self.deadline)
            looks = self.looks_for(q, passages, by_chunk) if cite else None
            written = compose.compose(
                client, self.models["answer"], q.question, passages, by_chunk, stream, until, looks
            )
            q.trace.route |= {"looks": looks.done} if looks is not None and looks.done else {}
            add_usage(q.trace.usage, "answer", written.usage)
            return written, passages, by_chunk

        quoted = q.claude.run(
            "answer", ask, lambda: self.quotes(q, passages, cite), first_byte=self.first_byte
        )
        written, used, by_chunk = quoted
        uncited = written.by == "claude" and written.status in WRITTEN
        if uncited and not written.cited:  # never shown as an answer: the docs' own quotes are
            q.trace.notes.append(UNCITED_NOTE)
            return self.quotes(q, passages, cite)
        return written, used, by_chunk

    def check_claims(self, q: Asked, written: compose.Written) -> claims.Checked:
        """The claim check (router/claims.py), after the answer is written so streaming is not
        held up."""
        model = self.models.get("check") or self.models.get("extract", "")
        checked = claims.check(q.claude, model, written)
        if checked.usage:
            add_usage(q.trace.usage, "check", checked.usage)
        return checked
