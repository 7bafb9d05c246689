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


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 26000, 100000, 200000])
    p.add_argument("--queries", type=int, default=100)
    p.add_argument(
        "--rank-bm25-up-to", type=int, default=100000, help="largest size to compare with rank-bm25"
    )
    args = p.parse_args()

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
