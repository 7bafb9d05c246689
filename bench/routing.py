"""Routing measured against unrouted search on the three shared sets (claude-docs, openshift-4.15,
examples): the shipped policy's paired difference with its bootstrap interval, the alternatives
to a hard bucket that were measured and not shipped, a learned offline intent classifier
trained at index time on each set's own headings (pseudo-questions), not shipped either, and other
ways to count the offline vote or add intent profiles to it (bench/_votes.py), not shipped either.

    python bench/routing.py          # ~20 min, most of it openshift's pseudo-questions, profiles
                                     # and the 28 word-pair variants
    python bench/routing.py --pairs --blind   # the word-pair variants alone, printed, without
                                              # reading openshift's questions (~2 min)
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable

import numpy as np
from _util import ROOT, SHARED, WORK, eval_db, table, write_section
from _votes import choose, pair_label, pair_variants
from _votes import variants as vote_variants

from bot.evaluation.retrieval import load_questions, paired_difference, score_question
from bot.settings import Settings
from bot.wiring import make_engine
from index.embedders import make_embedder
from index.indexer import index_folder
from index.search import Hit, one_per_section
from index.store import load_chunks
from router.classify import FEEDBACK, FEEDBACK_WEIGHT
from router.policy import prefer_intents

SETS = ("claude-docs", "openshift-4.15", "examples")
DEPTH = 100  # unrouted candidates the alternatives reorder
# ../shared beside the repo, or two levels up from a worktree in wt/
SETS_DIR = next((p for p in (SHARED, ROOT.parents[1] / "shared" / "eval") if p.exists()), SHARED)
CANDIDATES = 5  # intents the learned classifier chooses among (the vote's top 5)
PSEUDO = 600  # headings sampled per set as pseudo-questions


def open_set(name: str, embedder):
    """(engine, questions): the indexed sets in .fieldguide/eval are reused (never re-embed
    openshift); the examples are indexed here (seconds)."""
    if name == "examples":
        db = WORK / "examples-local.db"
        index_folder(db, ROOT / "examples" / "docs", embedder)
        qfile = ROOT / "examples" / "questions.jsonl"
    else:
        cached = ROOT / ".fieldguide" / "eval" / f"{name}.db"
        db = cached if cached.exists() else eval_db(name, embedder)
        qfile = SETS_DIR / name / "questions.jsonl"
    return make_engine(Settings.load(environ={}, dotenv=None), str(db)), load_questions(qfile)


def metric_of(questions) -> str:
    return "mrr@10" if any(q.gold for q in questions) else "intent_hit@1"


def votes(hits: list[Hit]) -> dict[str, float]:
    """The shipped vote (score / rank², equal scores share a rank), as shares."""
    out: dict[str, float] = {}
    rank = 0
    for n, h in enumerate(hits[:50]):
        if h.score != hits[rank].score:
            rank = n
        out[h.chunk["intent"]] = out.get(h.chunk["intent"], 0.0) + max(h.score, 0) / (rank + 1) ** 2
    total = sum(out.values()) or 1.0
    return {i: v / total for i, v in out.items()}


class Features:
    """Per (question, candidate intent): what retrieval says (votes with and without feedback,
    best fused / BM25 / cosine score of the intent, its share of the top 10, whether it holds the
    top chunk) and what the intent's doc titles say (best and top-3 cosine to the question)."""

    def __init__(self, engine):
        self.searcher = engine.loaded().searcher
        docs: dict[str, tuple[str, str]] = {}
        for r in load_chunks(engine.db, None)[0]:
            docs.setdefault(r["doc"], (r["title"], r["intent"]))
        self.doc = np.array(list(docs))
        self.intent = np.array([docs[d][1] for d in docs])
        self.title_vecs = engine.embedder.embed_documents([docs[d][0] for d in docs])

    def __call__(self, text: str, vec: np.ndarray, exclude_doc: str | None = None):
        s = self.searcher

        def search(v):
            return [h for h in s.search(text, v, k=DEPTH + 20) if h.chunk["doc"] != exclude_doc][
                :DEPTH
            ]

        hits = search(vec)
        if not hits:  # a small set where the heading's own doc holds every match
            return [], np.zeros((0, 9))
        moved = vec + FEEDBACK_WEIGHT * s.vectors[[h.row for h in hits[:FEEDBACK]]].mean(axis=0)
        fed = search(moved / np.linalg.norm(moved))
        v0, v1 = votes(hits), votes(fed)
        cands = [i for i, _ in sorted(v1.items(), key=lambda x: -x[1])[:CANDIDATES]]
        top = hits[0].score or 1.0
        bmax = max(h.bm25 for h in hits) or 1.0
        sims = self.title_vecs @ vec
        rows = []
        for intent in cands:
            mine = [h for h in hits if h.chunk["intent"] == intent]
            t = np.sort(sims[(self.intent == intent) & (self.doc != exclude_doc)])[::-1]
            t = t if t.size else np.zeros(1)
            rows.append(
                [
                    v1.get(intent, 0.0),
                    v0.get(intent, 0.0),
                    float(hits[0].chunk["intent"] == intent),
                    max((h.score for h in mine), default=0.0) / top,
                    max((h.bm25 for h in mine), default=0.0) / bmax,
                    max((h.vector for h in mine), default=0.0),
                    sum(h.chunk["intent"] == intent for h in hits[:10]) / 10,
                    float(t[0]),
                    float(t[:3].mean()),
                ]
            )
        return cands, np.nan_to_num(np.array(rows))


def fit(X: list[np.ndarray], y: list[int], l2: float = 1e-2, steps: int = 400) -> np.ndarray:
    """A conditional logit (softmax over each question's candidates), by gradient descent."""
    w = np.zeros(X[0].shape[1])
    for _ in range(steps):
        g = l2 * w
        for x, t in zip(X, y, strict=True):
            p = np.exp(x @ w - (x @ w).max())
            g += (x.T @ (p / p.sum()) - x[t]) / len(X)
        w -= 0.5 * g
    return w


def alternatives() -> dict[str, Callable]:
    """Ways to let the router's intents inform the ranking without walling the others off:
    (unrouted top 100, the classifier's ranking, the shipped decision) → top 10."""

    def boost(lam):
        def fn(every, ranked, d):
            prior = dict(ranked)
            hs = sorted(every, key=lambda h: -(h.score + lam * prior.get(h.chunk["intent"], 0)))
            return one_per_section(hs)[:10]

        return fn

    def gate(tau):
        return lambda every, ranked, d: d.hits if ranked and ranked[0][1] >= tau else every[:10]

    def top1(every, ranked, d):
        return [d.hits[0]] + [h for h in every if h.row != d.hits[0].row][:9]

    def bucket_boost(every, ranked, d):
        if d.searched is None:
            return every[:10]
        hs = sorted(every, key=lambda h: -(h.score + 0.1 * (h.chunk["intent"] in d.searched)))
        return prefer_intents(one_per_section(hs), ranked)[:10]

    return {
        **{
            f"intent prior boosts the fused score (λ {lam})": boost(lam) for lam in (0.02, 0.1, 0.5)
        },
        **{f"route only when the top intent holds ≥ {tau}": gate(tau) for tau in (0.5, 0.7)},
        "routed top 1, the rest unrouted": top1,
        "bucket chunks +0.1 instead of a filter": bucket_boost,
        "shipped policy": lambda every, ranked, d: d.hits,
    }


def mean_of(rows: list[dict], metric: str) -> str:
    return f"{np.mean([r[metric] for r in rows if r[metric] is not None]):.3f}"


def pseudo_questions(engine, embedder) -> tuple[Features, list[np.ndarray], list[int]]:
    """Section headings of the set's own docs as questions whose intent is their doc's."""
    feats = Features(engine)
    pool = [r for r in load_chunks(engine.db, None)[0] if len(r["heading_path"]) >= 2]
    sample = random.Random(0).sample(pool, min(PSEUDO, len(pool)))
    X, y = [], []
    texts = [r["heading_path"][-1] for r in sample]
    for r, text, vec in zip(sample, texts, embedder.embed_documents(texts), strict=True):
        # the heading's own doc is left out, or its own chunk would give the answer away
        cands, F = feats(text, vec, exclude_doc=r["doc"])
        if r["intent"] in cands:
            X.append(F)
            y.append(cands.index(r["intent"]))
    return feats, X, y


PAIR_COLUMNS = (
    ("claude-docs", "intent acc"),
    ("claude-docs", "hybrid hit@1"),
    ("claude-docs", "hybrid mrr@10"),
    ("claude-docs", "routed mrr@10"),
    ("examples", "intent acc"),
    ("examples", "hybrid hit@1"),
    ("examples", "hybrid mrr@10"),
    ("examples", "routed mrr@10"),
    ("openshift-4.15", "headings intent acc"),
    ("openshift-4.15", "headings hybrid intent hit@1"),
    ("openshift-4.15", "intent acc"),
    ("openshift-4.15", "hybrid intent_hit@1"),
    ("openshift-4.15", "routed intent_hit@1"),
)


def pairs_table(figures: dict[str, dict[str, dict[str, float]]], chosen: str) -> str:
    short = {"claude-docs": "cd", "examples": "ex", "openshift-4.15": "os"}
    rows = []
    for label in figures["claude-docs"]:
        cells = [
            f"{figures[n][label][k]:.3f}" if k in figures[n][label] else "—"
            for n, k in PAIR_COLUMNS
        ]
        rows.append([f"**{label}** (chosen)" if label == chosen else label, *cells])
    return table(["variant", *(f"{short[n]} {k}" for n, k in PAIR_COLUMNS)], rows)


def pairs(blind: bool) -> tuple[dict, str]:
    """The word-pair variants on the three sets; `blind`: openshift's questions not read."""
    embedder = make_embedder()
    figures = {}
    for name in SETS:
        engine, questions = open_set(name, embedder)
        if blind and name == "openshift-4.15":
            figures[name] = pair_variants(engine, embedder)
        else:
            vecs = [embedder.embed_query(q.question) for q in questions]
            figures[name] = pair_variants(engine, embedder, questions, vecs)
    return figures, choose(figures)


def main() -> None:
    embedder = make_embedder()
    policy_rows: list[list] = []
    learned_rows: list[list] = []
    variants: dict[str, dict[str, str]] = {}
    data: dict[str, dict] = {}
    counted: dict[str, dict[str, float]] = {}
    paired: dict[str, dict[str, dict[str, float]]] = {}
    for name in SETS:
        engine, questions = open_set(name, embedder)
        loaded = engine.loaded()
        metric = metric_of(questions)
        per_q = []
        for q in questions:
            vec = embedder.embed_query(q.question)
            every = loaded.searcher.search(q.question, vec, k=DEPTH)
            ranked = loaded.router.classifier.classify(q.question, vec, every[:50]).ranked
            per_q.append((q, vec, every, ranked, loaded.router.route(q.question, vec, 10)))
        hybrid = [score_question(every[:10], q) for q, _, every, _, _ in per_q]
        routed = [score_question(d.hits, q) for q, _, _, _, d in per_q]
        p = paired_difference(routed, hybrid, "routed", "hybrid")
        policy_rows.append(
            [
                name,
                len(questions),
                metric,
                mean_of(hybrid, metric),
                mean_of(routed, metric),
                f"{p['difference']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]",
                f"{p['better']} / {p['worse']}",
            ]
        )
        for label, fn in alternatives().items():
            rows = [score_question(fn(every, ranked, d), q) for q, _, every, ranked, d in per_q]
            diff = paired_difference(rows, hybrid, label, "hybrid")["difference"]
            variants.setdefault(label, {})[name] = f"{diff:+.3f}"
        counted[name] = vote_variants(engine, embedder, questions, [v for _, v, *_ in per_q])
        paired[name] = pair_variants(engine, embedder, questions, [v for _, v, *_ in per_q])
        feats, X, y = pseudo_questions(engine, embedder)
        scored = [(feats(q.question, vec), q.intents) for q, vec, *_ in per_q if q.intents]
        data[name] = {"X": X, "y": y, "questions": scored}
    for train in SETS:
        w = fit(data[train]["X"], data[train]["y"])
        cells = []
        for name in SETS:
            qs = data[name]["questions"]
            acc = np.mean([cands[int(np.argmax(F @ w))] in gold for (cands, F), gold in qs])
            cells.append(f"{acc:.3f}")
        learned_rows.append([f"trained on {train}'s headings", *cells])
    for label, hit in (
        ("the vote (shipped)", lambda c, g: c[0] in g),
        ("gold among the vote's top 5", lambda c, g: any(i in g for i in c)),
    ):
        learned_rows.append(
            [
                label,
                *(
                    f"{np.mean([hit(c, g) for (c, _), g in data[n]['questions']]):.3f}"
                    for n in SETS
                ),
            ]
        )
    chosen = choose(paired)
    got = paired["openshift-4.15"][chosen]["intent acc"]
    shipped = paired["openshift-4.15"][pair_label(0.0, "search", "vote")]["intent acc"]
    body = "\n\n".join(
        [
            "`python bench/routing.py`. Offline (local int8 model, offline router). The metric is "
            "MRR@10 where the set has gold sections, intent hit@1 where it names only the book; "
            "the interval is a seeded percentile bootstrap over questions (2,000 resamples), as "
            "`fieldguide eval` prints it.",
            "### Shipped policy: routed against unrouted hybrid",
            table(
                [
                    "set",
                    "questions",
                    "metric",
                    "hybrid",
                    "routed",
                    "routed − hybrid [95% interval]",
                    "better / worse",
                ],
                policy_rows,
            ),
            "### Routing as evidence: alternatives to the bucket (routed − hybrid, same metric)",
            "Chosen on claude-docs, read on the other two. None is at least the shipped policy on "
            "every set, so none replaced it: the shipped policy already treats the bucket as "
            "evidence (it is searched only when it holds the unrouted best chunk, and topped up "
            "from the unrouted list).",
            table(
                ["variant", *SETS],
                [[k, *(v[n] for n in SETS)] for k, v in variants.items()],
            ),
            "### A learned offline intent classifier (not shipped)",
            "A conditional logit over the vote's top 5 intents, features from retrieval and from "
            "the intents' doc titles, trained at index time on 600 section headings of the set's "
            "own docs as pseudo-questions (their own doc left out). Intent accuracy on the "
            "questions that name an intent. It does not beat the vote on any set it was not "
            "trained on, so the router does not use it.",
            table(["classifier", *SETS], learned_rows),
            "### Other ways to count the vote, and intent profiles as evidence (not shipped)",
            "Offline intent accuracy as `fieldguide eval` counts it (every question): the same "
            "voters (the question's vector moved toward its 3 best chunks) counted other ways, "
            "and the vote's shares plus λ × a softmax (temperature 0.05 over cosines; naive "
            "Bayes log-likelihoods as they are) of a profile's scores over the vote's top 5 "
            "intents. Profiles: the centroid of an intent's chunk vectors; the best cosine of "
            "its titles and headings; its offline `fieldguide intents --describe` draft; its "
            "name; a multinomial naive Bayes over its words (Dirichlet μ 1000). Constants were "
            "set on claude-docs, examples and openshift's headings as pseudo-questions, but "
            "openshift's question figures were seen alongside while trying them. None reaches "
            "0.80 on openshift and none is better than the shipped vote on every set, so the "
            "router keeps it. The word-pair BM25 gains on openshift without losing elsewhere "
            "(on openshift's headings as pseudo-questions, own doc left out, 0.640 → 0.657), "
            "short of the bar.",
            table(
                ["vote", *SETS],
                [
                    [label, *(f"{counted[n][label]:.3f}" for n in SETS)]
                    for label in counted[SETS[0]]
                ],
            ),
            "### Word pairs as a retrieval improvement, and with the size prior (not shipped)",
            "Adjacent content-word pairs (stopwords dropped; the header's pairs weighted as its "
            "words are) get a BM25 of their own, added × w to the words' BM25 either in the "
            "search itself (unrouted search, the vote and the routed search) or in the vote's "
            "search only (what is ranked stays the shipped search's); the vote counted as "
            "shipped or as each intent's best chunk − c ln(intent size). cd / ex: claude-docs' "
            "and the examples' questions; os headings: 600 section headings of openshift's docs "
            "as pseudo-questions whose intent is their doc's, their own doc left out of the "
            "search; os: openshift's questions. The protocol was fixed, and the variant chosen, "
            "before openshift's questions were read: among the variants that lose nothing on "
            "claude-docs and examples (intent accuracy ≥ the shipped vote's, routed MRR@10 ≥ "
            "the shipped routed MRR@10 and ≥ its own unrouted), the best on openshift's "
            "headings; ties to the smaller weight, pairs in the search, the shipped count. "
            f"Chosen: **{chosen}**; on openshift's questions, read once, it gives intent "
            f"accuracy **{got:.3f}** (shipped {shipped:.3f}), "
            + (
                "reaching the 0.80 bar."
                if got >= 0.8
                else "short of the 0.80 bar, so the router is unchanged. Pairs in the search "
                "itself cost the examples' MRR@10; the size prior, which gained on openshift's "
                "questions, loses on its headings."
            ),
            pairs_table(paired, chosen),
        ]
    )
    print(body)
    write_section("routing", body)


if __name__ == "__main__":
    if (
        "--pairs" in sys.argv
    ):  # the word-pair variants alone, printed (--blind: no openshift questions)
        figures, chosen = pairs(blind="--blind" in sys.argv)
        print(pairs_table(figures, chosen))
        print(f"chosen: {chosen}")
    else:
        main()
