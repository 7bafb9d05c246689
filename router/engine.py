"""The query side, assembled: the index in memory (reloaded when a reindex commits), the embedder,
the classifier and the routing policy. One Engine serves every question of a process."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sqlite_utils
from threadpoolctl import threadpool_limits

from index.embedders import Embedder, EmbeddingError
from index.mapped import open_searcher
from index.rerank import VoyageReranker
from index.search import Searcher
from index.store import (
    chunk_headings,
    example_vectors,
    generation,
    load_intents,
    load_related,
    open_db,
)

from . import decide
from .classify import ClaudeClassifier, OfflineClassifier
from .claude import MessagesClient
from .corpus import Corpus
from .describe import intent_headings
from .policy import RouteDecision, Router


@dataclass(frozen=True)
class Scope:
    """Where a channel's questions are routed and searched: the chunks of these intents' docs and
    of the docs under these folders (either may be empty). `name` is what the answer says it
    searched (the channel or entry it was configured for)."""

    name: str
    intents: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"intents {', '.join(self.intents)}"] if self.intents else []
        parts += [f"folders {', '.join(self.folders)}"] if self.folders else []
        return f"{self.name} ({'; '.join(parts)})" if parts else self.name


@dataclass
class Loaded:
    """One index generation and everything derived from it, gone together when a reindex loads
    the next one: its docs (`corpus`, with their router and what questions derive from them),
    its intents and their example questions' vectors, and each Scope's part of it (`scoped`)."""

    generation: int
    corpus: Corpus
    intents: list[dict]
    examples: dict[str, np.ndarray] = field(default_factory=dict)
    # one Corpus per Scope asked about in this generation (Engine.corpus)
    scoped: dict[Scope, Corpus] = field(default_factory=dict)

    @property
    def searcher(self) -> Searcher:
        return self.corpus.searcher

    @property
    def router(self) -> Router:
        return self.corpus.router


def calibrated_decision(index: str | Path) -> Path:
    """Where `fieldguide calibrate` writes the decision of the index at `index` by default: in its
    folder, next to the index file."""
    return Path(index).with_name(decide.MODEL_FILE.name)


def decision_file(index: str | Path) -> Path:
    """The decision an engine on the index at `index` reads: the calibrated one in the index's
    folder, else the shipped one (router/decide.py's MODEL_FILE)."""
    mine = calibrated_decision(index)
    return mine if mine.is_file() else decide.MODEL_FILE


def one_blas_thread() -> None:
    """Run numpy's BLAS on one thread in this process. A question's products are one vector
    against the index's rows (index/search.py, router/classify.py). Split over BLAS's thread pool,
    the search's product waited for cores that ONNX Runtime's threads still held after embedding
    the question: 6-13 ms on 2 cores for a product that takes 0.3-0.6 ms on one thread
    (bench/RESULTS.md "blas"). A server's questions already run side by side on its threads."""
    threadpool_limits(limits=1, user_api="blas")


class Engine:
    def __init__(
        self,
        db_path: str,
        embedder: Embedder,
        anthropic_client: MessagesClient | None = None,
        classify_model: str = "",
        bm25_weight: float = 0.4,
        fusion: str = "hybrid",
        reranker: VoyageReranker | None = None,
        db: sqlite_utils.Database | None = None,
        decision: Path | None = None,
    ):
        """`reranker`: an index.rerank.VoyageReranker (a Voyage key is set) or None. `db`: the
        process's connection to the index at `db_path` (default: one opened here); metadata
        and the hits' records are read through it. `decision`: the answer decision's file
        (default: `decision_file` of the index)."""
        self.embedder = embedder
        self.reranker = reranker
        self.anthropic = anthropic_client
        self.classify_model = classify_model
        self.bm25_weight = bm25_weight
        self.fusion = fusion  # hybrid | rrf (index/search.py's modes)
        self.db_path = db_path
        self.db = db if db is not None else open_db(db_path, create=False)
        self.decision_file = decision or decision_file(db_path)
        self._lock = threading.Lock()
        self._loaded: Loaded | None = None
        self._models: dict[str, decide.Model] | None = None
        one_blas_thread()

    @property
    def models(self) -> dict[str, decide.Model]:
        """The decision file's models (a DecisionFileError naming the file when it is bad)."""
        if self._models is None:
            self._models = decide.load_models(self.decision_file)
        return self._models

    def loaded(self, wait: bool = False) -> Loaded:
        """The index as search needs it, reopened when a reindex has committed a new generation.
        While one thread reopens it, the others go on answering from the previous one (`wait`:
        this caller waits for the new one instead). A generation's search arrays are written
        before it is committed (index/indexer.py): loading one maps them."""
        old = self._loaded
        if old is not None and old.generation == generation(self.db):
            return old
        if not self._lock.acquire(blocking=old is None or wait):
            return old  # type: ignore[return-value]  # not None: a non-blocking acquire
        try:
            current = generation(self.db)
            if self._loaded is None or self._loaded.generation != current:
                self._loaded = self._load()
            return self._loaded
        finally:
            self._lock.release()

    def _load(self) -> Loaded:
        # a new generation's spelling dictionary is built by the first question with a word the
        # docs don't know as it is (words.DocsWords.spell), not on a thread beside the answers:
        # the question that loads the generation would share the interpreter with it (+0.3 s at
        # 30,000 chunks, bench/RESULTS.md "generations"); only `warm` builds it ahead
        gen, searcher = open_searcher(self.db_path, self.embedder.name, self.db)
        intents = load_intents(self.db)
        # the example questions' query embeddings, stored by the index run: none is embedded here
        examples = example_vectors(self.db, intents, self.embedder.name)
        return Loaded(gen, Corpus(self._router(searcher, intents, examples)), intents, examples)

    def _router(
        self, searcher: Searcher, intents: list[dict], examples: dict[str, np.ndarray]
    ) -> Router:
        classifier: OfflineClassifier | ClaudeClassifier
        classifier = OfflineClassifier(searcher, examples, self.bm25_weight)
        if self.anthropic is not None:
            headings = chunk_headings(self.db)
            if searcher.base is not None:  # a scope's router: only its docs' headings
                docs = searcher.docs()
                inside = {docs[r] for r in searcher.base.tolist()}
                headings = (h for h in headings if h["doc"] in inside)
            classifier = ClaudeClassifier(
                self.anthropic,
                self.classify_model,
                intents,
                classifier,
                intent_headings(headings),
            )
        return Router(
            searcher,
            classifier,
            load_related(self.db),
            self.bm25_weight,
            self.fusion,
            self.reranker,
        )

    def corpus(self, scope: Scope | None = None, loaded: Loaded | None = None) -> Corpus:
        """The docs a question under `scope` is read against, in `loaded` (default: the newest
        generation loaded): the scope's rows alone (a row mask, as a bucket is), its classifier
        voting and choosing among the scope's intents only. None: everything."""
        loaded = loaded or self.loaded()
        if scope is None:
            return loaded.corpus
        found = loaded.scoped.get(scope)
        if found is None:
            searcher = loaded.searcher
            rows = searcher.rows_for(scope.intents) if scope.intents else np.zeros(0, int)
            if scope.folders:
                rows = np.concatenate([rows, rows_under(searcher, scope.folders)])
            view = searcher.within(rows)
            intents = [i for i in loaded.intents if i["name"] in view.intent_rows]
            examples = {n: v for n, v in loaded.examples.items() if n in view.intent_rows}
            made = Corpus(self._router(view, intents, examples))
            found = loaded.scoped.setdefault(scope, made)
        return found

    def intents_for(self, scope: Scope | None) -> list[dict]:
        """The intents (name, description, examples) a question under `scope` is routed among:
        all of them for None."""
        loaded = self.loaded()
        if scope is None:
            return loaded.intents
        view = self.corpus(scope, loaded).searcher
        return [i for i in loaded.intents if i["name"] in view.intent_rows]

    def warm(self) -> None:
        """Load the index, the model, the decision file (a bad one stops `serve` here, named,
        rather than failing every question) and what the decision reads of the docs' words now,
        not on the first question (`serve` starts with it)."""
        self.models  # noqa: B018
        corpus = self.loaded().corpus
        corpus.prepare(spelling=True)
        # the language identifier (seconds to load), which a question with Claude asks first
        corpus.language  # noqa: B018
        self.embed_query("warm up")

    def embed_query(self, text: str) -> tuple[np.ndarray | None, str]:
        """(vector, note): None and a note when the embedding service is down, so search runs on
        BM25 alone."""
        try:
            return self.embedder.embed_query(text), ""
        except EmbeddingError as e:
            return None, f"vector search unavailable ({e}); results from keyword search only"

    def route(self, question: str, k: int = 10, scope: Scope | None = None) -> RouteDecision:
        """The routing decision and the `k` best chunks, inside `scope` (None: everything)."""
        vec, note = self.embed_query(question)
        decision = self.corpus(scope).router.route(question, vec, k)
        decision.note = "; ".join(n for n in (decision.note, note) if n)
        return decision


def rows_under(searcher: Searcher, folders: tuple[str, ...]) -> np.ndarray:
    """The rows of the chunks of docs whose path is under one of `folders` ("billing/")."""
    prefixes = tuple(f.strip("/") + "/" for f in folders)
    return np.array(
        [r for r, doc in enumerate(searcher.docs()) if doc.startswith(prefixes)], dtype=np.int64
    )
