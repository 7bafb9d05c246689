"""Retrieval latency from ~2k to 200k chunks, and BM25 against rank-bm25 on the same corpus and
queries.

    python bench/retrieval.py [--sizes 2000 26000 100000 200000] [--queries 100]

Corpora: the openshift-4.15 index (26k chunks, real embeddings); 2k is its first 2,000 chunks; 100k
and 200k repeat it with varied text (each copy drops a different 10% of every chunk's words and adds
a copy tag) and random unit vectors. Queries are the set's questions; their embedding is timed
apart.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from harness import SHARED, WORK, eval_db, ms, table, write_section

from bot.evaluation.retrieval import load_questions
from index.embedders import make_embedder
from index.search import BM25, Searcher, bm25_tokens, tokenize
from index.store import load_chunks, open_db
from router.classify import OfflineClassifier
from router.policy import Router


def grow(records, vectors, size, rng):
    """`size` chunks: the real ones, then varied copies with random unit vectors."""
    if size <= len(records):
        return records[:size], vectors[:size]
    out, vecs, copy = list(records), [vectors], 1
    while len(out) < size:
        take = min(len(records), size - len(out))
        for r in records[:take]:
            words = r["search_text"].split()
            keep = rng.random(len(words)) > 0.1
            text = " ".join(w for w, k in zip(words, keep, strict=True) if k) + f" copy{copy}"
            out.append(
                r
                | {"id": f"{r['id']}-{copy}", "search_text": text, "doc": f"copy{copy}/{r['doc']}"}
            )
        v = rng.standard_normal((take, vectors.shape[1])).astype(np.float32)
        vecs.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        copy += 1
    return out, np.ascontiguousarray(np.vstack(vecs))


def bench_size(records, vectors, questions, qvecs, with_rank_bm25: bool) -> dict:
    t = time.perf_counter()
    searcher = Searcher(records, vectors)
    build_s = time.perf_counter() - t
    router = Router(searcher, OfflineClassifier(searcher))
    times: dict[str, list[float]] = {
        m: [] for m in ("in-bucket", "hybrid (all)", "bm25 (all)", "vector (all)", "routed")
    }
    for q, v in zip(questions, qvecs, strict=True):
        bucket = [i for i in q.intents if i in searcher.intent_rows][:1] or [records[0]["intent"]]
        for name, call in (
            ("in-bucket", lambda q=q, v=v, b=bucket: searcher.search(q.question, v, intents=b)),
            ("hybrid (all)", lambda q=q, v=v: searcher.search(q.question, v)),
            ("bm25 (all)", lambda q=q, v=v: searcher.search(q.question, v, mode="bm25")),
            ("vector (all)", lambda q=q, v=v: searcher.search(q.question, v, mode="vector")),
            ("routed", lambda q=q, v=v: router.route(q.question, v)),
        ):
            t = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t)
    out = {
        "chunks": len(records),
        "build_s": build_s,
        "modes": {k: ms(v) for k, v in times.items()},
    }
    if with_rank_bm25:
        from rank_bm25 import BM25Okapi

        corpus = [bm25_tokens(r["search_text"]) for r in records]
        ref, ours = BM25Okapi(corpus), searcher.bm25
        ref_t, our_t, diff = [], [], 0.0
        for q in questions[:20]:
            tokens = tokenize(q.question)
            t = time.perf_counter()
            a = ref.get_scores(tokens)
            ref_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            b = ours.scores(tokens)
            our_t.append(time.perf_counter() - t)
            diff = max(diff, float(np.abs(a - b).max()))
        out["rank_bm25"] = {
            "rank_bm25_ms": ms(ref_t)[0],
            "ours_ms": ms(our_t)[0],
            "speedup": float(np.median(ref_t) / np.median(our_t)),
            "max_abs_diff": diff,
        }
    return out


def plot(results: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for mode in results[0]["modes"]:
        ax.plot(
            [r["chunks"] for r in results],
            [r["modes"][mode][0] for r in results],
            marker="o",
            label=mode,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks in the index")
    ax.set_ylabel("p50 latency per query (ms)")
    ax.set_title("fieldguide retrieval latency (2 cores, query embedding excluded)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# the title-and-headings field's weight tried (BM25F's weighted sum of fields)
FIELD_GRID = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)


def objective(m: dict) -> float:
    """What a weight is chosen on: MRR@10 where the set has gold sections, else intent hit@1."""
    return m["mrr@10"] if m["mrr@10"] is not None else m["intent_hit@1"]


class WithHeadings(Searcher):
    """The index's search with a page's title and heading path also weighing as a field of their
    own: a BM25 over them alone, added at `weight` times to the body's BM25 (which already counts
    them 3 times) before the words and the meaning are fused. Measured here, not shipped."""

    weight = 0.0

    def __init__(self, records, vectors):
        super().__init__(records, vectors)
        self.headings = BM25(tokenize(r["search_text"].partition("\n\n")[0]) for r in records)
        self.body = self.bm25

    def search(
        self, query, query_vec, intents=None, k=10, mode="hybrid", bm25_weight=0.4, exclude=None
    ):
        extra = self.headings.scores(tokenize(query)) * self.weight
        self.bm25 = _Plus(self.body, extra)
        try:
            return super().search(query, query_vec, intents, k, mode, bm25_weight, exclude)
        finally:
            self.bm25 = self.body


class _Plus(BM25):
    """A BM25 whose scores are another's plus fixed extra scores (one query's)."""

    def __init__(self, bm25, extra):
        super().__init__(None)
        self.bm25, self.extra = bm25, extra

    def scores(self, query):
        return self.bm25.scores(query) + self.extra


def heading_field(only: list[str] | None = None) -> None:
    """Whether a page's title and headings should weigh as a field of their own: the weight
    chosen leave one corpus out (best mean `objective` on the others), reported on the corpus
    left out; hybrid search, unrouted."""
    from harness import REAL_SETS, laid_out, set_dir

    from bot.evaluation.retrieval import run_eval

    embedder = make_embedder()
    names = ["examples", "claude-docs", "openshift-4.15"]
    names += [n for n in REAL_SETS if laid_out(n)]
    names = [n for n in names if not only or n in only]
    found: dict[str, dict[float, dict]] = {}
    for name in names:
        questions = [q for q in load_questions(set_dir(name) / "questions.jsonl") if q.intents]
        records, vectors = load_chunks(open_db(eval_db(name, embedder)), embedder.name)
        searcher = WithHeadings(records, vectors)
        vecs = {q.question: embedder.embed_query(q.question) for q in questions}
        found[name] = {}
        for weight in FIELD_GRID:
            searcher.weight = weight
            out = run_eval(questions, searcher, vecs.__getitem__, modes=["hybrid"])
            found[name][weight] = out["modes"]["hybrid"]
            print(name, weight, found[name][weight], flush=True)
    rows = []
    for name in names:
        others = [n for n in names if n != name]
        best = max(
            FIELD_GRID, key=lambda h: (np.mean([objective(found[n][h]) for n in others]), -h)
        )
        for label, h in (("without", 0.0), ("chosen on the others", best)):
            m = found[name][h]
            rows.append(
                [name, label, h]
                + [m[k] if m[k] is not None else "—" for k in ("hit@1", "hit@5", "mrr@10")]
                + [m["intent_hit@1"]]
            )
    grid = table(
        ["weight"] + names,
        [[h] + [f"{objective(found[n][h]):.3f}" for n in names] for h in FIELD_GRID],
    )
    body = f"""## A page's title and headings as a field of their own (bench/retrieval.py)

`python bench/retrieval.py --heading-field` — hybrid search (unrouted) with a BM25 over each
chunk's title and heading path alone added, at a weight, to the body's BM25 (BM25F's weighted sum
of fields; the body's BM25 already counts the title and headings 3 times, search.HEADING_WEIGHT)
before words and meaning are fused. The weight for each corpus is the one best on the other
corpora (mean MRR@10, or intent hit@1 where a set has no gold sections), tried among
{list(FIELD_GRID)}, and reported on the corpus left out. Corpora: {", ".join(names)}.

{table(["corpus", "field weight", "weight", "hit@1", "hit@5", "MRR@10", "intent hit@1"], rows)}

Each weight on each corpus (MRR@10; a set without gold sections: intent hit@1):

{grid}

Not shipped: on every corpus left out the others choose 0, and no weight helps on average (a
fused min-max share of the field, 0.05 to 0.4, lost more: examples MRR@10 0.744 → 0.704 at 0.15).
The headings' 3-fold count in the body's BM25 is the field weight the data supports.
"What models are available?" on claude-docs misses the models overview through the meaning
(cosine 0.32 to Bedrock's "List available models"), not the words.
"""
    write_section("heading-field", body)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 26000, 100000, 200000])
    p.add_argument("--queries", type=int, default=100)
    p.add_argument(
        "--rank-bm25-up-to", type=int, default=100000, help="largest size to compare with rank-bm25"
    )
    p.add_argument("--heading-field", action="store_true", help="only fit and report HEADING_FIELD")
    p.add_argument(
        "--sets", nargs="+", help="the corpora HEADING_FIELD is fitted on (default: all)"
    )
    args = p.parse_args()
    heading_field(args.sets)
    if args.heading_field:
        return

    embedder = make_embedder()
    db = eval_db("openshift-4.15", embedder)
    records, vectors = load_chunks(open_db(db), embedder.name)
    questions = load_questions(SHARED / "openshift-4.15" / "questions.jsonl")[: args.queries]
    embed_t, qvecs = [], []
    embedder.embed_query("warm up")
    for q in questions:
        t = time.perf_counter()
        qvecs.append(embedder.embed_query(q.question))
        embed_t.append(time.perf_counter() - t)
    print(
        f"query embedding ({embedder.name}): "
        f"p50 {ms(embed_t)[0]:.1f} ms, p95 {ms(embed_t)[1]:.1f} ms"
    )

    rng = np.random.default_rng(7)
    results = []
    for size in args.sizes:
        recs, vecs = grow(records, vectors, size, rng)
        r = bench_size(recs, vecs, questions, qvecs, size <= args.rank_bm25_up_to)
        results.append(r)
        print(json.dumps(r))

    modes = list(results[0]["modes"])
    rows = [
        [f"{r['chunks']:,}", f"{r['build_s']:.1f}"]
        + [f"{r['modes'][m][0]:.2f} / {r['modes'][m][1]:.2f}" for m in modes]
        for r in results
    ]
    bm_rows = [
        [
            f"{r['chunks']:,}",
            f"{r['rank_bm25']['rank_bm25_ms']:.1f}",
            f"{r['rank_bm25']['ours_ms']:.3f}",
            f"{r['rank_bm25']['speedup']:.0f}x",
            f"{r['rank_bm25']['max_abs_diff']:.1e}",
        ]
        for r in results
        if "rank_bm25" in r
    ]
    bm_table = table(
        ["chunks", "rank-bm25 get_scores ms", "fieldguide ms", "speed-up", "max abs score diff"],
        bm_rows,
    )
    png = WORK.parent.parent / "bench" / "retrieval-latency.png"
    plot(results, png)
    body = f"""## Retrieval latency

`python bench/retrieval.py` — {len(questions)} openshift-4.15 questions per size; p50 / p95 ms per
query. Query embedding ({embedder.name}) is not included: p50 {ms(embed_t)[0]:.1f} ms,
p95 {ms(embed_t)[1]:.1f} ms. "build s" is building the in-memory index from records (tokenising
every chunk; a running bot loads cached postings instead). Sizes above 26k repeat the corpus with
varied text and random unit vectors.

{table(["chunks", "build s"] + [f"{m} p50 / p95" for m in modes], rows)}

![latency against corpus size](retrieval-latency.png)

### BM25 against rank-bm25 (same corpus, same tokens, 20 queries)

{bm_table}
"""
    write_section("retrieval", body)


if __name__ == "__main__":
    main()
