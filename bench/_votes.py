"""Issue 14's search for an offline intent classifier that reaches 0.80 on openshift-4.15: ways
to count the vote of the unrouted search's chunks, and evidence from per-intent profiles (titles,
headings, `fieldguide intents --describe` drafts, names, the intents' words) added to it. Each
variant's intent accuracy is counted as `fieldguide eval` counts it (the classifier's top intent
among the question's intents, every question). Used by bench/routing.py."""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Callable
from functools import partial

import numpy as np

from index.search import BM25, HEADING_WEIGHT, Hit, Searcher, tokenize
from index.store import load_chunks
from router.classify import VOTERS, Classification, OfflineClassifier
from router.describe import draft_offline, intent_headings

DEEP = 200  # chunks the deeper variants count
CANDIDATES = 5  # a profile only reorders the vote's top 5 intents
TEMPERATURE = 0.05  # of the softmax over the candidates' cosine similarities
PAIRS = 0.25  # weight of the word-pair BM25 added to the vote's search


def pairs(tokens: list[str]) -> list[str]:
    return [f"{a}_{b}" for a, b in zip(tokens, tokens[1:], strict=False)]


class PairedBM25:
    """BM25 scores plus `weight` x the BM25 of adjacent word pairs (stopwords dropped): a phrase
    the question shares with a chunk counts beyond its words. Everything else (vocab, postings,
    coverage, which the answer's decision reads) is the words' index."""

    def __init__(self, words: BM25, pair_index: BM25, weight: float = PAIRS):
        self.words, self.pairs, self.weight = words, pair_index, weight

    def __getattr__(self, name: str):
        return getattr(self.words, name)

    def scores(self, query: list[str]) -> np.ndarray:
        return self.words.scores(query) + self.weight * self.pairs.scores(pairs(query))


def pair_index(records: list[dict]) -> BM25:
    """The word pairs' BM25, the header's pairs weighted as bm25_tokens weighs its words."""

    def pair_tokens(search_text: str) -> list[str]:
        header, _, body = search_text.partition("\n\n")
        return pairs(tokenize(header)) * HEADING_WEIGHT + pairs(tokenize(body))

    return BM25(pair_tokens(r["search_text"]) for r in records)


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
    paired.bm25 = PairedBM25(s.bm25, pair_index(prof.records))
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


# --- Word pairs as a retrieval improvement (search, vote and routing all on the paired BM25) ---

PAIR_WEIGHTS = (0.0, 0.1, 0.25, 0.5)  # 0: the shipped search
SIZE_PRIORS = (0.01, 0.02, 0.04)  # c in: best chunk per intent − c ln(intent size)
HEADINGS = 600  # section headings sampled per set as pseudo-questions (as bench/routing.py)


def best_minus_size(hits: list[Hit], size: dict[str, int], c: float) -> dict[str, float]:
    """Each intent's best voter's score − c ln(its chunk count), shifted to be positive."""
    best: dict[str, float] = {}
    for h in hits:
        best.setdefault(h.intent, h.score - c * float(np.log(size[h.intent])))
    low = min(best.values(), default=0.0)
    return {i: v - low + 1e-9 for i, v in best.items()}


class Counted(OfflineClassifier):
    """The offline classifier with another way to count the voters (`counter`), and the voters
    found by `searcher` (a word-pair one for the vote only, or the router's own)."""

    def __init__(
        self,
        base: OfflineClassifier,
        counter: Callable[[list[Hit]], dict[str, float]],
        searcher: Searcher,
    ):
        super().__init__(searcher, base.examples, base.bm25_weight)
        self.counter, self.own = counter, searcher is base.searcher

    def classify(self, question, query_vec, global_hits=None, claude=None):
        # the router's unrouted hits are the vote's first search only when they are its searcher's
        hits = self.voters(question, query_vec, global_hits if self.own else None)
        votes = self.counter(hits)
        self.with_examples(votes, query_vec)
        total = sum(votes.values())
        if not total:
            return Classification([], "offline")
        return Classification(
            sorted(((i, v / total) for i, v in votes.items()), key=lambda x: -x[1]), "offline"
        )


def pair_label(weight: float, where: str, counter: str) -> str:
    search = "shipped search" if not weight else f"+ {weight} x word pairs in the {where}"
    return f"{search}, {counter}"


def pair_variants(engine, embedder, questions=None, vecs=None) -> dict[str, dict[str, float]]:
    """label → figures, for every pair weight x where the pairs are used x way of counting the
    vote. Where: "search" (the searcher itself: unrouted search, the vote and the routed search)
    or "vote" (only the vote's search; what is ranked stays the shipped search's). Figures on the
    set's questions (skipped when `questions` is None: openshift's are read only once the
    protocol has chosen) and on HEADINGS section headings of its own docs as pseudo-questions
    whose intent is their doc's, their own doc left out of the search (the vote is the same for
    both wheres there)."""
    from bot.evaluation.retrieval import score_question

    loaded = engine.loaded()
    s, router = loaded.searcher, loaded.router
    base = router.classifier
    assert isinstance(base, OfflineClassifier)
    records = load_chunks(engine.db, None)[0]
    words, pair_bm25 = s.bm25, pair_index(records)
    doc_of = np.array([r["doc"] for r in records])
    size = {i: len(rows) for i, rows in s.intent_rows.items()}
    counters: dict[str, Callable[[list[Hit]], dict[str, float]]] = {"vote": count}
    for c in SIZE_PRIORS:
        counters[f"best − {c} ln size"] = partial(best_minus_size, size=size, c=c)
    pool = [r for r in records if len(r["heading_path"]) >= 2]
    sample = random.Random(0).sample(pool, min(HEADINGS, len(pool)))
    texts = [r["heading_path"][-1] for r in sample]
    heading_vecs = embedder.embed_documents(texts)
    out: dict[str, dict[str, float]] = {}
    try:
        for w in PAIR_WEIGHTS:
            paired = PairedBM25(words, pair_bm25, w) if w else words
            headings: dict[str, dict[str, list]] = {c: {} for c in counters}
            s.bm25 = paired
            for r, text, vec in zip(sample, texts, heading_vecs, strict=True):
                masked = copy.copy(s)  # the heading's own doc left out, or it gives itself away
                keep = np.flatnonzero(doc_of != r["doc"])
                masked.rows_for = lambda intents, keep=keep: keep
                first = masked.search(text, vec, k=VOTERS)
                if not first:
                    continue
                voters = OfflineClassifier(masked, base.examples, base.bm25_weight).voters(
                    text, vec, first
                )
                for name, counter in counters.items():
                    votes = counter(voters)
                    base.with_examples(votes, vec)
                    top = max(votes, key=lambda i: votes[i])
                    headings[name].setdefault("headings intent acc", []).append(top == r["intent"])
                    headings[name].setdefault("headings hybrid intent hit@1", []).append(
                        first[0].intent == r["intent"]
                    )
            for where in ("search", "vote") if w else ("search",):
                s.bm25 = paired if where == "search" else words
                vote_searcher = s if where == "search" else copy.copy(s)
                vote_searcher.bm25 = paired
                figures = copy.deepcopy(headings)
                for q, vec in zip(questions or [], vecs or [], strict=True):
                    hybrid = score_question(s.search(q.question, vec, k=10), q)
                    for name, counter in counters.items():
                        clf = Counted(base, counter, vote_searcher)
                        voters = clf.voters(q.question, vec)
                        assert records[voters[0].row]["id"] == voters[0].chunk["id"]  # rows align
                        votes = counter(voters)
                        clf.with_examples(votes, vec)
                        top = max(votes, key=lambda i: votes[i])
                        figures[name].setdefault("intent acc", []).append(top in q.intents)
                        router.classifier = clf
                        routed = score_question(router.route(q.question, vec, 10).hits, q)
                        for key in ("intent_hit@1", "hit@1", "mrr@10"):
                            if hybrid[key] is not None:
                                figures[name].setdefault(f"hybrid {key}", []).append(hybrid[key])
                                figures[name].setdefault(f"routed {key}", []).append(routed[key])
                router.classifier = base
                for name, fig in figures.items():
                    out[pair_label(w, where, name)] = {k: float(np.mean(v)) for k, v in fig.items()}
    finally:
        s.bm25, router.classifier = words, base
    return out


def choose(figures: dict[str, dict[str, dict[str, float]]]) -> str:
    """The protocol, fixed before openshift's questions were read: among the variants that lose
    nothing on claude-docs and examples (intent accuracy ≥ the shipped vote's, routed MRR@10 ≥
    the shipped routed MRR@10 and ≥ the variant's own unrouted MRR@10), the one with the best
    intent accuracy on openshift's headings as pseudo-questions; ties: the first in
    pair_variants's order (the smaller pair weight, pairs in the search before the vote only, the
    shipped vote before a size prior)."""
    shipped = pair_label(0.0, "search", "vote")
    labels = list(figures["claude-docs"])

    def keeps(label: str) -> bool:
        return all(
            figures[n][label]["intent acc"] >= figures[n][shipped]["intent acc"]
            and figures[n][label]["routed mrr@10"] >= figures[n][shipped]["routed mrr@10"]
            and figures[n][label]["routed mrr@10"] >= figures[n][label]["hybrid mrr@10"]
            for n in ("claude-docs", "examples")
        )

    eligible = [label for label in labels if keeps(label)]
    return max(eligible, key=lambda lb: figures["openshift-4.15"][lb]["headings intent acc"])
