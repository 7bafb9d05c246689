"""Issue 14's search for an offline intent classifier that reaches 0.80 on openshift-4.15: ways
to count the vote of the unrouted search's chunks, and evidence from per-intent profiles (titles,
headings, `fieldguide intents --describe` drafts, names, the intents' words) added to it. Each
variant's intent accuracy is counted as `fieldguide eval` counts it (the classifier's top intent
among the question's intents, every question). Used by bench/routing.py."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable

import numpy as np

from index.search import BM25, HEADING_WEIGHT, Hit, tokenize
from index.store import load_chunks
from router.classify import OfflineClassifier
from router.describe import draft_offline, intent_headings

DEEP = 200  # chunks the deeper variants count
CANDIDATES = 5  # a profile only reorders the vote's top 5 intents
TEMPERATURE = 0.05  # of the softmax over the candidates' cosine similarities
PAIRS = 0.25  # weight of the word-pair BM25 added to the vote's search


def pairs(tokens: list[str]) -> list[str]:
    return [f"{a}_{b}" for a, b in zip(tokens, tokens[1:], strict=False)]


class PairedBM25:
    """BM25 scores plus PAIRS x the BM25 of adjacent word pairs (stopwords dropped): a phrase the
    question shares with a chunk counts beyond its words."""

    def __init__(self, words: BM25, records: list[dict]):
        self.words = words

        def pair_tokens(search_text: str) -> list[str]:
            # the header's pairs weighted as bm25_tokens weighs its words
            header, _, body = search_text.partition("\n\n")
            return pairs(tokenize(header)) * HEADING_WEIGHT + pairs(tokenize(body))

        self.pairs = BM25(pair_tokens(r["search_text"]) for r in records)

    def scores(self, query: list[str]) -> np.ndarray:
        return self.words.scores(query) + PAIRS * self.pairs.scores(pairs(query))


def count(
    hits: list[Hit],
    power: float = 2.0,
    depth: int = 50,
    key: Callable[[Hit], object] | None = None,
) -> dict[str, float]:
    """score / rank^power over the top `depth` chunks, equal scores sharing a rank (the shipped
    vote with power 2, depth 50); `key`: only the first chunk of each key votes (one per doc)."""
    votes: dict[str, float] = {}
    seen: set = set()
    kept = []
    for h in hits[:depth]:
        if key is not None:
            if key(h) in seen:
                continue
            seen.add(key(h))
        kept.append(h)
    rank = 0
    for n, h in enumerate(kept):
        if h.score != kept[rank].score:
            rank = n
        votes[h.intent] = votes.get(h.intent, 0.0) + max(h.score, 0.0) / (rank + 1) ** power
    return votes


def shares(votes: dict[str, float]) -> dict[str, float]:
    total = sum(votes.values()) or 1.0
    return {i: v / total for i, v in votes.items()}


def plus_profile(votes: dict[str, float], sims: dict[str, float], lam: float, temp: float):
    """The vote's shares plus lam x a softmax of the profile's scores over its top intents."""
    base = shares(votes)
    cands = sorted(base, key=lambda i: -base[i])[:CANDIDATES]
    x = np.array([sims[i] for i in cands]) / temp
    p = np.exp(x - x.max())
    p /= p.sum()
    return {i: base[i] + lam * (p[n] if i in cands else 0.0) for n, i in enumerate(cands)} | {
        i: v for i, v in base.items() if i not in cands
    }


class Profiles:
    """Per intent: the centroid of its chunks' vectors, its titles' and headings' vectors, its
    offline `--describe` draft's and its name's vectors, and its word counts (a multinomial naive
    Bayes with Dirichlet smoothing, mu 1000)."""

    def __init__(self, engine, embedder):
        s = engine.loaded().searcher
        self.records = load_chunks(engine.db, None)[0]
        self.names = list(s.intent_names)
        vectors = np.asarray(s.vectors)
        cent = np.stack([vectors[s.intent_rows[i]].mean(axis=0) for i in self.names])
        self.centroid = cent / np.linalg.norm(cent, axis=1, keepdims=True)
        heads: dict[str, set[str]] = {i: set() for i in self.names}
        for r in self.records:
            heads[r["intent"]].update([r["title"], *r["heading_path"]])
        texts = [(i, h) for i in self.names for h in sorted(heads[i]) if h]
        hv = embedder.embed_documents([h for _, h in texts])
        owner = np.array([self.names.index(i) for i, _ in texts])
        self.headings = (hv, owner)
        drafts = intent_headings(self.records)
        self.drafts = embedder.embed_documents(
            [draft_offline(drafts.get(i, []))["description"] or i for i in self.names]
        )
        self.name_vecs = embedder.embed_documents(
            [i.replace("_", " ").replace("-", " ") for i in self.names]
        )
        self.words: dict[str, Counter] = {i: Counter() for i in self.names}
        for r in self.records:
            self.words[r["intent"]].update(tokenize(r["search_text"]))
        self.corpus: Counter = sum(self.words.values(), Counter())
        self.total = sum(self.corpus.values())
        self.length = np.array([sum(self.words[i].values()) for i in self.names])

    def cosine(self, kind: str, vec: np.ndarray) -> dict[str, float]:
        if kind == "headings":
            hv, owner = self.headings
            sims = hv @ vec
            best = np.full(len(self.names), -1.0)
            np.maximum.at(best, owner, sims)
            return dict(zip(self.names, best.tolist(), strict=True))
        m = {"centroid": self.centroid, "draft": self.drafts, "name": self.name_vecs}[kind]
        return dict(zip(self.names, (m @ vec).tolist(), strict=True))

    def naive_bayes(self, question: str, mu: float = 1000.0) -> dict[str, float]:
        out = np.zeros(len(self.names))
        for t in tokenize(question):
            if t in self.corpus:
                tf = np.array([self.words[i][t] for i in self.names])
                out += np.log((tf + mu * self.corpus[t] / self.total) / (self.length + mu))
        return dict(zip(self.names, out.tolist(), strict=True))


def variants(engine, embedder, questions, vecs) -> dict[str, float]:
    """label → intent accuracy on `questions` (vecs: their query vectors)."""
    loaded = engine.loaded()
    s, clf = loaded.searcher, loaded.router.classifier
    assert isinstance(clf, OfflineClassifier)
    prof = Profiles(engine, embedder)
    size = {i: len(rows) for i, rows in s.intent_rows.items()}
    heavy_bm25 = OfflineClassifier(s, clf.examples, bm25_weight=0.6)
    paired = copy.copy(s)
    paired.bm25 = PairedBM25(s.bm25, prof.records)
    paired_clf = OfflineClassifier(paired, clf.examples, clf.bm25_weight)

    def per_doc(h: Hit) -> object:
        return h.chunk["doc"]

    def best_minus_size(hits: list[Hit]) -> dict[str, float]:
        best: dict[str, float] = {}
        for h in hits:
            best.setdefault(h.intent, h.score - 0.02 * np.log(size[h.intent]))
        return {i: v - min(best.values()) + 1e-9 for i, v in best.items()}

    table: dict[str, Callable] = {
        "shipped: top 50, score / rank²": lambda q, v, hits: count(hits),
        "score / rank, top 50": lambda q, v, hits: count(hits, 1),
        "score / rank, top 200": lambda q, v, hits: count(deep[0], 1, DEEP),
        "one vote per document, score / rank²": lambda q, v, hits: count(hits, key=per_doc),
        "one vote per document, score / rank, top 200": lambda q, v, hits: count(
            deep[0], 1, DEEP, per_doc
        ),
        "score / rank² ÷ intent size^0.5 (size prior)": lambda q, v, hits: {
            i: x / size[i] ** 0.5 for i, x in count(hits).items()
        },
        "score / rank ÷ intent size^0.5": lambda q, v, hits: {
            i: x / size[i] ** 0.5 for i, x in count(hits, 1).items()
        },
        "best chunk per intent − 0.02 ln(intent size)": lambda q, v, hits: best_minus_size(hits),
        "+ BM25 list and vector list voting apart": lambda q, v, hits: {
            i: shares(count(hits)).get(i, 0.0)
            + shares(count(s.search(q, v, k=50, mode="bm25"))).get(i, 0.0)
            + shares(count(s.search(q, v, k=50, mode="vector"))).get(i, 0.0)
            for i in s.intent_names
        },
        "vote's search weighs BM25 0.6 (shipped 0.4)": lambda q, v, hits: count(
            heavy_bm25.voters(q, v)
        ),
        f"vote's search adds {PAIRS} x word-pair BM25": lambda q, v, hits: count(
            paired_clf.voters(q, v)
        ),
    }
    for kind in ("centroid", "headings", "draft", "name"):
        for lam in (0.3, 1.0):
            table[f"vote + {lam} x {kind} profile"] = lambda q, v, hits, kind=kind, lam=lam: (
                plus_profile(count(hits), prof.cosine(kind, v), lam, TEMPERATURE)
            )
    for lam in (0.3, 1.0):
        table[f"vote + {lam} x naive Bayes over the intents' words"] = lambda q, v, hits, lam=lam: (
            plus_profile(count(hits), prof.naive_bayes(q), lam, 1.0)
        )
    right: dict[str, list[bool]] = {label: [] for label in table}
    deep: list[list[Hit]] = [[]]  # the question's top DEEP voters, for the deep variants
    for q, vec in zip(questions, vecs, strict=True):
        hits = clf.voters(q.question, vec)
        deep[0] = clf.voters(q.question, vec, k=DEEP)
        for label, fn in table.items():
            votes = dict(fn(q.question, vec, hits))
            clf.with_examples(votes, vec)
            top = max(votes, key=lambda i: votes[i]) if votes else None
            right[label].append(top in q.intents)
    return {label: float(np.mean(r)) for label, r in right.items()}
