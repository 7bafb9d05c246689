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

from bot.evaluation.retrieval import load_questions, paired_difference, score_question
from index.embedders import make_embedder
from index.search import Searcher, bm25_tokens, tokenize
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


# the page vector's share in a chunk's cosine tried (search.PAGE_WEIGHT), leave one corpus out
PAGE_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
# what a page's vector is: its title embedded alone; each section's title > heading path embedded
# alone (a "page" per section); the mean of its chunks' vectors (nothing more embedded)
PAGE_KINDS = ("title", "heading path", "mean of chunks")


def page_vectors(kind: str, records: list[dict], vectors: np.ndarray, embedder):
    """(each row's page, each page's unit vector) for one kind of page vector."""
    if kind == "heading path":
        keys = [r["search_text"].partition("\n\n")[0] for r in records]
    else:
        keys = [r["doc"] for r in records]
    names = sorted(set(keys))
    ids = {k: i for i, k in enumerate(names)}
    pages = np.array([ids[k] for k in keys], dtype=np.int32)
    if kind == "mean of chunks":
        pooled = np.zeros((len(names), vectors.shape[1]), dtype=np.float64)
        np.add.at(pooled, pages, vectors)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pages, pooled.astype(np.float32)
    text = (
        names
        if kind == "heading path"
        else [{r["doc"]: r["title"] for r in records}[d] for d in names]
    )
    return pages, np.asarray(embedder.embed_documents(text), dtype=np.float32)


def objective(m: dict) -> float:
    """What a weight is chosen on: MRR@10 where the set has gold sections, else intent hit@1."""
    return m["mrr@10"] if m["mrr@10"] is not None else m["intent_hit@1"]


def mean_of(rows: list[dict]) -> dict:
    keys = ("hit@1", "hit@5", "mrr@10", "recall@3", "intent_hit@1")
    return {
        k: (
            float(np.mean([r[k] for r in rows if r[k] is not None]))
            if rows[0][k] is not None
            else None
        )
        for k in keys
    }


PAGE_QUESTION = ("claude-docs", "What models are available?", "docs/about-claude/models.md")


def page_rank(searcher: Searcher, embedder, mode: str = "hybrid") -> int | None:
    """The rank (1-based, top 20) of PAGE_QUESTION's page's first chunk for its question."""
    _, question, doc = PAGE_QUESTION
    hits = searcher.search(question, embedder.embed_query(question), k=20, mode=mode)
    return next((i + 1 for i, h in enumerate(hits) if h.chunk["doc"] == doc), None)


def page_signal(only: list[str] | None = None) -> None:
    """Whether a page's vector should weigh in a chunk's meaning: for each kind of page vector and
    share (PAGE_GRID), hybrid search (unrouted) on every corpus; the kind and share for each corpus
    chosen on the others (best mean `objective`), reported on the corpus left out with a paired
    bootstrap interval against share 0."""
    from harness import REAL_SETS, laid_out, set_dir

    embedder = make_embedder()
    names = ["examples", "claude-docs", *[n for n in REAL_SETS if laid_out(n)]]
    names = [n for n in names if not only or n in only]
    found: dict[str, dict[tuple[str, float], list[dict]]] = {}
    probe: dict[tuple[str, float], int | None] = {}
    for name in names:
        questions = [q for q in load_questions(set_dir(name) / "questions.jsonl") if q.gold]
        records, vectors = load_chunks(open_db(eval_db(name, embedder)), embedder.name)
        searcher = Searcher(records, vectors)
        qvecs = [embedder.embed_query(q.question) for q in questions]
        found[name] = {}
        for kind in PAGE_KINDS:
            t = time.perf_counter()
            assert vectors is not None  # the eval indexes are embedded
            searcher.pages, searcher.page_vectors = page_vectors(kind, records, vectors, embedder)
            made = time.perf_counter() - t
            for w in PAGE_GRID:
                searcher.page_weight = w
                found[name][kind, w] = [
                    score_question(searcher.search(q.question, v, k=10), q)
                    for q, v in zip(questions, qvecs, strict=True)
                ]
                if name == PAGE_QUESTION[0]:
                    probe[kind, w] = page_rank(searcher, embedder)
                    if w == 0.0:
                        for mode in ("bm25", "vector"):
                            probe[mode, w] = page_rank(searcher, embedder, mode)
            print(
                name,
                kind,
                f"{made:.1f}s",
                [round(objective(mean_of(found[name][kind, w])), 3) for w in PAGE_GRID],
                flush=True,
            )
    choices = [(kind, w) for kind in PAGE_KINDS for w in PAGE_GRID]
    score = {n: {c: objective(mean_of(found[n][c])) for c in choices} for n in names}
    fits = [(kind, [c for c in choices if c[0] == kind]) for kind in PAGE_KINDS]
    fits.append(("any kind", choices))
    rows: list[list] = []
    for fit, among in fits:
        moved: dict[str, list[float]] = {"mrr@10": [], "hit@5": []}
        for name in names:
            others = [n for n in names if n != name]
            best = max(among, key=lambda c: (np.mean([score[n][c] for n in others]), -c[1]))
            base, after = found[name][PAGE_KINDS[0], 0.0], found[name][best]
            row: list = [fit, name, best[1] if fit != "any kind" else f"{best[0]}, {best[1]}"]
            for metric in moved:
                d = paired_difference(after, base, "page", "without", metric)
                moved[metric].append(d["difference"])
                lo, hi = d["ci95"]
                before = mean_of(base)[metric]
                row.append(f"{before:.3f} → {before + d['difference']:.3f} [{lo:+.3f}, {hi:+.3f}]")
            rows.append(row)
        rows.append([fit, "**mean**", ""] + [f"**{np.mean(v):+.3f}**" for v in moved.values()])
    overall = max(choices, key=lambda c: (np.mean([score[n][c] for n in names]), -c[1]))
    grid = table(
        ["page vector", "share"] + names + ["mean"],
        [
            [k, w, *[f"{score[n][k, w]:.3f}" for n in names]]
            + [f"{np.mean([score[n][k, w] for n in names]):.3f}"]
            for k, w in choices
        ],
    )
    probe_rows: list[list] = [
        [w] + [probe.get((k, w)) or "not in top 20" for k in PAGE_KINDS]
        for w in PAGE_GRID
        if (PAGE_KINDS[0], w) in probe
    ]
    alone = {m: probe.get((m, 0.0)) or "not in top 20" for m in ("bm25", "vector")}
    body = f"""## A page's vector in a chunk's meaning (bench/retrieval.py --page-vectors)

`python bench/retrieval.py --page-vectors` — hybrid search (unrouted): a chunk's cosine to the
question becomes (1 − share) × its own + share × its page's (search.PAGE_WEIGHT) before words and
meaning are fused. A page's vector is one of: its title embedded alone ("title", one text per page
embedded at index time), each section's title > heading path embedded alone ("heading path", one
per section), or the mean of its chunks' vectors ("mean of chunks", nothing embedded). Kind and
share, among {list(PAGE_GRID)}, are chosen for each corpus on the other corpora (mean MRR@10) and
reported on the corpus left out: the share alone for each kind, then kind and share together.
Questions with gold sections only. Corpora: {", ".join(names)}.

Each row: the corpus left out, the share (and kind) best on the others, and on the corpus left
out its MRR@10 and hit@5 (a gold section in the top 5) without → with, and the 95% interval of
the per-question paired difference (seeded bootstrap); "mean": the mean difference over the
corpora left out.

{table(["page vector fitted", "left out", "chosen", "MRR@10", "hit@5"], rows)}

Fitted on every corpus: {overall[0]}, {overall[1]}. Each kind and share on each corpus (MRR@10):

{grid}

"{PAGE_QUESTION[1]}" on {PAGE_QUESTION[0]}: rank of the first chunk of {PAGE_QUESTION[2]}
(top 20, hybrid, unrouted, by share and kind of page vector). Without page vectors, words alone
(BM25) rank it {alone["bm25"]}, meaning alone (cosine) {alone["vector"]}.

{table(["share"] + list(PAGE_KINDS), probe_rows)}

Not shipped. Fitted leave one corpus out, no kind of page vector helps both figures on average,
and every interval holds 0: the heading path's share (0.3; 0.4 with duckdb left out) moves MRR@10
+0.008 on average but hit@5 −0.010 (traefik −0.047, duckdb −0.035); the mean of chunks +0.002 and
+0.009, with claude-docs lower (0 questions better, 3 worse); the title's share is chosen 0 on five
corpora of six; kind and share chosen together move MRR@10 −0.003 and hit@5 −0.010. Nor is the
short question's miss where a page vector acts: the meaning alone already ranks the models page
first, the words alone 20th ("available" is in Bedrock's heading "List available models", which
BM25 counts 3 times, while "model" is on most pages), and the fusion's words share brings Bedrock
first and the page 7th. Only the title at a share of 0.3 or more brings it into the top 5, a
share that lowers MRR@10 on four corpora of six and on average (0.663 → 0.653 at 0.3).
"""
    write_section("page-vectors", body)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 26000, 100000, 200000])
    p.add_argument("--queries", type=int, default=100)
    p.add_argument(
        "--rank-bm25-up-to", type=int, default=100000, help="largest size to compare with rank-bm25"
    )
    p.add_argument("--page-vectors", action="store_true", help="only fit and report PAGE_WEIGHT")
    p.add_argument("--sets", nargs="+", help="the corpora PAGE_WEIGHT is fitted on (default: all)")
    args = p.parse_args()
    if args.page_vectors:
        page_signal(args.sets)
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
