"""The query side, assembled: the index in memory (reloaded when a reindex commits), the embedder,
the classifier and the routing policy. One Engine serves every question of a process."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
import sqlite_utils

from index.embedders import Embedder, EmbeddingError
from index.mapped import arrays_path, open_searcher
from index.rerank import VoyageReranker
from index.search import Searcher
from index.store import chunk_headings, generation, load_intents, load_related, open_db

from . import words
from .classify import ClaudeClassifier, OfflineClassifier
from .claude import MessagesClient
from .describe import intent_headings
from .policy import RouteDecision, Router

# seconds a process keeps answering from its generation while a newer one's search arrays are
# not yet written: twice what the index run took to build them at 34,500 chunks (143 s, issue 40)
ARRAYS_WAIT = 300.0


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
    generation: int
    searcher: Searcher
    router: Router
    intents: list[dict]
    examples: dict[str, np.ndarray] = field(default_factory=dict)
    # one Router per Scope searched in this generation (Engine.router_for)
    scoped: dict[Scope, Router] = field(default_factory=dict)


class Engine:
    def __init__(
        self,
        db_path: str,
        embedder: Embedder,
        anthropic_client: MessagesClient | None = None,
        classify_model: str = "",
        bm25_weight: float = 0.4,
        fusion: str = "weighted",
        reranker: VoyageReranker | None = None,
        db: sqlite_utils.Database | None = None,
    ):
        """`reranker`: an index.rerank.VoyageReranker (a Voyage key is set) or None. `db`: the
        process's connection to the index at `db_path` (default: one opened here); metadata
        and the hits' records are read through it."""
        self.embedder = embedder
        self.reranker = reranker
        self.anthropic = anthropic_client
        self.classify_model = classify_model
        self.bm25_weight = bm25_weight
        self.fusion = "rrf" if fusion == "rrf" else "hybrid"
        self.db_path = db_path
        self.db = db if db is not None else open_db(db_path, create=False)
        self._lock = threading.Lock()
        self._loaded: Loaded | None = None
        self._pending: dict[int, float] = {}  # generation -> when first seen without its arrays

    def loaded(self, wait: bool = False) -> Loaded:
        """The index as search needs it, reopened when a reindex has committed a new generation.
        While one thread reopens it, the others go on answering from the previous one (`wait`:
        this caller waits for the new one instead)."""
        old = self._loaded
        current = generation(self.db)
        if old is not None and old.generation == current:
            return old
        if old is not None and not wait and not self._arrays_ready(current):
            return old  # the index run is building the new generation's arrays: not here
        if not self._lock.acquire(blocking=old is None or wait):
            return old  # type: ignore[return-value]  # not None: a non-blocking acquire
        try:
            current = generation(self.db)
            if self._loaded is None or self._loaded.generation != current:
                self._loaded = self._load()
            return self._loaded
        finally:
            self._lock.release()

    def _arrays_ready(self, gen: int) -> bool:
        """Is the search arrays' file of generation `gen` there to map? The index run writes it
        right after committing; until it has (at most ARRAYS_WAIT seconds from when this process
        first saw `gen`: a run that died, a folder it cannot write), questions keep the
        generation they have rather than each building the arrays themselves."""
        if arrays_path(self.db_path, gen).exists():
            return True
        seen = self._pending.setdefault(gen, time.monotonic())
        return time.monotonic() - seen > ARRAYS_WAIT

    def _load(self) -> Loaded:
        gen, searcher = open_searcher(self.db_path, self.embedder.name, self.db)
        if self._loaded is not None:  # a new generation: its words are built beside the answers
            threading.Thread(target=words.prepare, args=(searcher,), daemon=True).start()
        intents = load_intents(self.db)
        examples = {}
        texts = [(i["name"], q) for i in intents for q in i["examples"]]
        if texts:
            try:
                vecs = self.embedder.embed_documents([q for _, q in texts])
                for name in {n for n, _ in texts}:
                    examples[name] = vecs[[j for j, (n, _) in enumerate(texts) if n == name]]
            except EmbeddingError:
                pass  # example questions only sharpen routing; the chunks' votes still decide
        return Loaded(gen, searcher, self._router(searcher, intents, examples), intents, examples)

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

    def router_for(self, loaded: Loaded, scope: Scope | None) -> Router:
        """The router of `loaded` that searches only `scope`'s rows (a row mask, as a bucket
        is): its classifier votes and chooses among the scope's intents alone. None: everything."""
        if scope is None:
            return loaded.router
        router = loaded.scoped.get(scope)
        if router is None:
            rows = loaded.searcher.rows_for(scope.intents) if scope.intents else np.zeros(0, int)
            if scope.folders:
                rows = np.concatenate([rows, rows_under(loaded.searcher, scope.folders)])
            view = loaded.searcher.within(rows)
            intents = [i for i in loaded.intents if i["name"] in view.intent_rows]
            examples = {n: v for n, v in loaded.examples.items() if n in view.intent_rows}
            router = loaded.scoped.setdefault(scope, self._router(view, intents, examples))
        return router

    def warm(self) -> None:
        """Load the index, the model, the decision file (a bad one stops `serve` here, named,
        rather than failing every question) and what the decision reads of the docs' words now,
        not on the first question (`serve` starts with it)."""
        from .decide import load_models

        load_models()
        words.prepare(self.loaded().searcher)
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
        decision = self.router_for(self.loaded(), scope).route(question, vec, k)
        decision.note = "; ".join(n for n in (decision.note, note) if n)
        return decision


def rows_under(searcher: Searcher, folders: tuple[str, ...]) -> np.ndarray:
    """The rows of the chunks of docs whose path is under one of `folders` ("billing/")."""
    prefixes = tuple(f.strip("/") + "/" for f in folders)
    return np.array(
        [r for r, doc in enumerate(searcher.docs()) if doc.startswith(prefixes)], dtype=np.int64
    )
