"""A question's path, top to bottom (`Pipeline.answer` → `path`): the Answer, and nothing else (the
caller records it: bot/app.py's FieldGuide.ask).

1. The question checked (router/question.py `checked`), and the docs of one index generation
   (router/corpus.py's Corpus, the scope's part of it when the question has a scope), which the
   whole answer reads.
2. Read: the chat around it taken off and a follow-up made standalone (`condense`: Claude, else
   offline), typos read as the words they stand for (`typos`); the question as searched is read
   once into one value (reading.Reading) every later step takes.
3. Searched: embedded, routed and retrieved (router/policy.py: the offline router, which only
   breaks ties; with a key, Claude classifies beside the answer and is never waited for, its
   ranking kept for the audit when it is back), then decided (router/decide.py `assess`). The
   identifiers the question asks about (an error code, a flag, a command: router/exact.py) are
   looked up where the docs write them.
4. One of two branches writes the answer:
   - offline (no key): the top chunks' sentences that answer, quoted verbatim (router/offline.py),
     each its own citation, checked by claims.offline, on the offline decision; the rows that
     write an asked identifier are the ones quoted;
   - with Claude: `context` chooses what Claude reads (router/context.py: the search's deep
     candidates packed to a token budget, whole sections where they fit), `write` streams
     Claude's answer from it with search_result citations (router/compose.py; nothing reaches
     `on_text` before a citation that checks out), searching again with a query of its own when
     what it read does not answer (router/second_look.py), and the claim check reads each
     sentence against what it cites (router/claims.py); an answer with sentences it finds
     unsupported is asked for once more, naming them (router/review.py).
5. The verdict (router/question.py `verdict`): the only place an Answer is made; an answer whose
   quotes miss an identifier asked about is never a plain ANSWER.

When Claude fails (router/claude.py: after the retries the API means, within the question's
deadline), the rules are these, and only these:
- condensing: the follow-up is made standalone offline;
- the classification beside the answer: not kept; the trace says why;
- writing the answer (it fails, or cites nothing that checks out, or no time is left for it): the
  offline branch answers, on the offline decision (the docs' own quotes);
- the claim check: the answer is marked as not checked (PARTIAL, fail closed).
- the answer written again after the check: the first answer stands, with its check.

`on_progress` (router/answer.py Progress) is told "searching" before retrieval, "reading" with the
sections about to be read (Claude) or quoted (offline), and "checking" before Claude's claim check;
what it raises is logged and ignored. The answer's stream is cut at the question's deadline less
the claim check's reserved time (claims.reserve), and a streamed reply's first byte must come
within FIELDGUIDE_FIRST_BYTE_TIMEOUT seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from prompts import prompt_hash

from . import citations, claims, compose, context, decide, exact, offline, reading, words
from .answer import ABSTAIN, PARTIAL, Answer, Progress, Trace
from .beside import Beside
from .classify import ClaudeClassifier, keep_classification
from .claude import DEADLINE, FIRST_BYTE, OFFLINE_NOTE, Claude, MessagesClient
from .clock import REAL, Clock
from .context import BUDGET, Budget, Context
from .corpus import Corpus
from .engine import Engine, Scope
from .language import language_name
from .messages import add_usage
from .question import Draft, Question, Searched, checked, verdict
from .review import WRITTEN, review
from .run import Laps, Run, Stream, Tell
from .second_look import looks_for

log = logging.getLogger(__name__)

HITS = 10  # the hits the decision, the offline branch and the audit read
OFFLINE_CHUNKS = 3  # the top chunks offline quotes from
UNCITED_NOTE = (
    "Claude's answer cited no passage of the docs: the docs' own quotes are shown instead"
)
STEPS = ("condense", "answer", "check")  # the Claude steps of an answer, each with its model


class Pipeline:
    def __init__(
        self,
        engine: Engine,
        anthropic_client: MessagesClient | None = None,
        models: dict | None = None,
        docs_base_url: str = "",
        deadline: float = DEADLINE,
        first_byte: float = FIRST_BYTE,
        budget: Budget = BUDGET,
        clock: Clock = REAL,
    ):
        """`models`: {"condense", "answer", "check"} model ids. `deadline`: seconds for one
        question's Claude steps. `budget`: what Claude reads (tokens, how deep in the search's
        candidates, second looks). `clock`: where each question's deadline is read and its retries
        wait (router/clock.py). It keeps no store: an answer is returned, not recorded.
        Claude's classifications run on threads it owns (`close`)."""
        self.engine = engine
        self.client = anthropic_client
        self.models = models or {}
        self.docs_base_url = docs_base_url
        self.deadline = deadline
        self.first_byte = first_byte  # seconds a streamed answer's reads may wait
        self.budget = budget
        self.clock = clock
        # what every answer's trace names: the models, and the prompts by hash (fixed in a process)
        self.claude_models = {k: self.models.get(k) for k in STEPS} if anthropic_client else {}
        self.prompts = {n: prompt_hash(n) for n in ("classify", *STEPS)}
        self.beside = Beside(name="classify")

    def close(self) -> None:
        """Stop the classifications beside the answers, not waiting for them."""
        self.beside.close()

    def answer(
        self,
        question: str,
        history: list[dict] | None = None,
        on_text: Callable[[str], None] | None = None,
        scope: Scope | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> Answer:
        """Answer a question (with the thread's earlier messages, oldest first, as {"role",
        "text"}). `on_text(delta)` receives Claude's answer text as it is written (never offline,
        never for an abstention); the returned Answer is the checked, final one either way.
        `scope`: route and search only inside it (None: everything). `on_progress`: told what the
        answer is doing (the module doc). IndexChanged when a reindex took a chunk it found
        (bot/app.py's FieldGuide.ask asks again on the new generation)."""
        started = time.perf_counter()
        ans = self.path(checked(question, history), scope, Stream(on_text), Tell(on_progress))
        ans.trace.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 1)
        if self.client is None:
            ans.trace.notes.append(OFFLINE_NOTE)
        return ans

    def path(self, asked: Question, scope: Scope | None, stream: Stream, tell: Tell) -> Answer:
        """The question's path (the module doc), on one index generation (`scope`'s part)."""
        models = {"embed": self.engine.embedder.name, **self.claude_models}
        trace = Trace(self.client is None, models=models, prompts=dict(self.prompts))
        run = Run(
            Claude(self.client, self.deadline, self.clock),
            trace,
            Laps(trace.timings_ms),
            stream,
            tell,
        )
        docs = self.engine.corpus(scope)
        # what every question reads, loaded on a process's first one (`serve` loads it at start:
        # Engine.warm), timed apart so that no step's figure counts it
        docs.prepare()
        run.laps("load")
        text = self.condense(asked, docs, run)
        run.laps("condense")
        question = self.typos(text, docs, run)
        run.laps("typos")
        beside = self.classify_beside(question, docs, run.claude)
        found = self.search(question, docs, scope, run)
        with_claude = run.claude.available
        decided = decide.assess(
            question,
            found.vector,
            found.hits,
            docs,
            self.engine.models,
            self.engine.embedder.name,
            with_claude,
        )
        run.laps("decide")
        if with_claude:
            draft = self.with_claude(asked, found, decided, docs, run)
        else:
            if self.client is not None:  # a key, and no time left for Claude to write
                run.claude.fall_back("answer", "out of time")
            draft = self.offline(found, decided.offline, docs, run)
        keep_classification(beside, trace)
        for step, why in run.claude.fell_back.items():
            trace.offline = True
            trace.notes.append(f"{step}: {why}: {OFFLINE_NOTE}")
        return verdict(asked, found, draft, scope, trace)

    # -- reading and searching -------------------------------------------------------------------

    def condense(self, asked: Question, docs: Corpus, run: Run) -> str:
        """The question as it is searched: without the chat around it ("Hi team," "Thanks!"), a
        follow-up made standalone from the thread (Claude, else offline); with Claude, a
        question in another language than the docs is rewritten into theirs."""
        plain = reading.plain(asked.text)
        foreign = run.claude.available and docs.foreign_language(reading.read(plain))
        if not reading.prior(list(asked.history)) and not foreign:
            return plain
        history, docs_language = list(asked.history), language_name(docs.language)

        def ask(client) -> str:
            text, usage = reading.follow_up_with_claude(
                client, self.models["condense"], plain, history, docs_language
            )
            add_usage(run.trace.usage, "condense", usage)
            return text

        offline_text = lambda: reading.follow_up_offline(plain, history)  # noqa: E731
        return run.claude.run("condense", ask, offline_text)

    def typos(self, text: str, docs: Corpus, run: Run) -> reading.Reading:
        """The question read (reading.Reading), its typos read as the words they stand for
        (words.correct_typos); a question in another language than the docs has none of theirs
        ("Wie" is no "Wire")."""
        read = reading.read(text)
        fixed, typos = words.correct_typos(read, docs.words)
        if not typos or docs.foreign_language(read):
            return read
        run.trace.notes.append(words.typo_note(typos))
        return reading.read(fixed)

    def classify_beside(
        self, question: reading.Reading, docs: Corpus, claude: Claude
    ) -> Future | None:
        """Claude's classification of the question, started now on the Pipeline's own threads
        and never waited for (None without a Claude classifier or time for it)."""
        classifier = docs.router.classifier
        if not claude.available or not isinstance(classifier, ClaudeClassifier):
            return None
        return self.beside.submit(classifier.beside, question.text, claude)

    def search(
        self, question: reading.Reading, docs: Corpus, scope: Scope | None, run: Run
    ) -> Searched:
        """The question embedded (keyword search alone when the embedder fails), routed (the
        offline router: Claude is not waited for) and retrieved inside `docs`; the routing and
        hits into the trace."""
        run.tell("searching")
        vector, note = self.engine.embed_query(question.text)
        run.trace.notes += [note] if note else []
        run.laps("embed")
        decision = docs.router.route(
            question.text,
            vector,
            # Claude's read reaches `depth` candidates deep; the offline quotes read the top
            # HITS as ranked among HITS (a deeper list fuses into another order)
            k=max(HITS, self.budget.depth) if run.claude.available else HITS,
            # Voyage did not embed the question: its reranker, the same service, is not asked
            rerank=vector is not None or not self.engine.embedder.name.startswith("voyage:"),
            wait=False,
        )
        trace = run.trace
        trace.route = decision.to_dict() | ({"scope": scope.describe()} if scope else {})
        if decision.note and decision.note not in trace.notes:  # e.g. the reranker fell back
            trace.notes.append(decision.note)
        hits = decision.hits[:HITS]
        trace.hits = [
            h.chunk | {"bm25": h.bm25, "vector": h.vector, "score": h.score} for h in hits
        ]
        asked = exact.asked(question.text, docs)
        trace.route |= {"exact": asked.names} if asked else {}
        run.laps("route_retrieve")
        return Searched(question, vector, hits, decision.hits, asked)

    # -- the two branches: what each found, wrote and decided ------------------------------------

    def offline(self, found: Searched, decided: decide.Decision, docs: Corpus, run: Run) -> Draft:
        """The top chunks' sentences that answer the question, quoted as they are, on the offline
        decision: without a key, and whenever Claude cannot write the answer. When none of the
        top chunks writes an identifier asked about, the best candidate that does is read too,
        and a quote that writes one makes "nothing near" a maybe (exact.near)."""
        names = found.exact.written
        if decided.decision == ABSTAIN and not names:  # nothing near: "closest" would be noise
            return Draft(decided)
        searcher = docs.searcher
        writes = offline.on_subject(found.text, searcher.bm25, docs.pages)
        top = offline.with_subject(found.hits[:OFFLINE_CHUNKS], found.hits, writes)
        top = exact.widened(top, found.candidates, names)
        passages = offline.extract(
            found.text,
            found.vector,
            top,
            searcher.bm25,
            self.engine.embedder,
            searcher.furniture,
            found.exact.names,
            found.hits,
            writes,
        )
        decided = exact.near(decided, names, [p.text for p in passages])
        run.laps("extract")
        if decided.decision == ABSTAIN or not passages:
            return Draft(decided)
        chunks = {h.chunk["id"]: h.chunk for h in [*found.hits, *top]}
        run.tell("reading", labels(chunks[p.chunk_id] for p in passages))
        sources = citations.number_sources(passages, chunks, self.docs_base_url)
        # unsure offline, the quotes stand under the caveat alone (UNSURE names them)
        lead = "" if decided.decision == PARTIAL else offline.LEAD
        written = offline.compose(passages, sources, chunks, lead)
        run.laps("answer")
        checked = claims.offline(written.citations)  # at once: no "checking" to show
        run.laps("check")
        return Draft(decided, passages, written, sources, checked)

    def with_claude(
        self, asked: Question, found: Searched, decided: decide.Decided, docs: Corpus, run: Run
    ) -> Draft:
        """Claude reads its candidates packed to the budget (`context`), writes the answer from
        them, streamed, searching again when they do not answer (`write`), and its claims are
        checked; the offline branch answers when it cannot. Nothing near is a maybe when a
        candidate writes an identifier asked about (exact.near)."""
        candidates = [h.chunk["text"] for h in found.candidates]
        gate = exact.near(decided.gate, found.exact.written, candidates)
        if gate.decision == ABSTAIN:
            return Draft(gate)
        reads = context.read(found.candidates, docs, found.text, self.budget.tokens, found.exact)
        run.trace.route["read"] = context.described(reads)
        read = Context.of(reads, self.docs_base_url)
        run.laps("extract")
        if not read.passages:
            return Draft(gate)
        run.tell("reading", read.labels)
        done = self.write(asked, read, docs, run)
        run.laps("answer")
        if done is None:  # the docs' own quotes answer, on the offline decision
            return self.offline(found, decided.offline, docs, run)
        written, read = done
        written, checked = review(
            written,
            read,
            docs,
            run,
            self.models,
            self.budget.tokens,
            self.deadline,
            self.first_byte,
        )
        run.laps("check")
        passages = citations.cited_passages(read.passages, written)
        return Draft(gate, passages, written, read.sources, checked)

    def write(
        self, asked: Question, read: Context, docs: Corpus, run: Run
    ) -> tuple[compose.Written, Context] | None:
        """Claude's answer from what it read, streamed, with its second looks in `docs`, and
        what it read in all (the first read, then each look's); None when the docs' own quotes
        must answer instead: the step failed (run.claude: fell back), or the answer cites nothing
        that checks out (never shown)."""

        def ask(client) -> tuple[compose.Written, Context]:
            # a try after one that already streamed words to the user is not streamed again:
            # the returned text replaces what was streamed
            # the stream ends where the claim check's reserved time begins
            until = run.claude.ends - claims.reserve(self.deadline)
            passages, sources, sections = (
                list(read.passages),
                dict(read.sources),
                dict(read.sections),
            )
            looks = looks_for(
                docs,
                self.engine.embed_query,
                self.budget,
                self.docs_base_url,
                passages,
                sources,
                run.tell,
                sections,
            )
            written = compose.compose(
                client,
                self.models["answer"],
                asked.text,
                passages,
                sources,
                run.stream.open(),
                until,
                looks,
                run.claude.clock,
            )
            done = looks.done if looks is not None else []
            found = [r["section"] for look in done for r in look["read"]]
            if done:
                run.trace.route["looks"] = done
            if looks is not None and looks.asked:
                run.trace.route["asked_to_look"] = True
            add_usage(run.trace.usage, "answer", written.usage)
            return written, Context(read.labels + found, passages, sources, sections)

        done = run.claude.run("answer", ask, lambda: None, first_byte=self.first_byte)
        if done is None:
            return None
        written = done[0]
        if written.status in WRITTEN and not written.cited:  # never shown as an answer
            run.trace.notes.append(UNCITED_NOTE)
            return None
        return done


def labels(chunks: Iterable[dict]) -> list[str]:
    """The "Title › Section" of each chunk, once each, in order."""
    return list(dict.fromkeys(citations.label(c["title"], c["heading_path"]) for c in chunks))
