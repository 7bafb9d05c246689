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
import math
import time

import numpy as np
from harness import SHARED, WORK, eval_db, ms, table, write_section

from bot.evaluation.retrieval import load_questions, paired_difference, score_question
from index.embedders import make_embedder
from index.search import Searcher, bm25_tokens, english_zipf, tokenize
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


# where a term stops weighing in BM25 on the zipf scale (search.ENGLISH_ZIPF), leave one corpus out
ENGLISH_TOPS = (8.0, 7.0, 6.5, 6.0, 5.5, 5.0, 4.5)
# where the fall starts: at 0 (every English word weighs less), or where everyday English starts
# (decide.RARE_ZIPF 4.0: a word rarer than that keeps its full weight)
ENGLISH_STARTS = (0.0, 4.0)
OFF = ("term", 0.0, math.inf)
# how: each term's BM25 score weighed ("term"), or the words' share in the fusion scaled by the
# question's most specific term's weight ("share")
# the form that acts only on a question with no term rarer than everyday English
WATCHED = ("share", 4.0, 5.5)
ENGLISH_GRID = (
    OFF,
    *[(how, a, z) for how in ("term", "share") for a in ENGLISH_STARTS for z in ENGLISH_TOPS],
)
SHORT_QUESTION = ("claude-docs", "What models are available?", "docs/about-claude/models.md")


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


def short_rank(searcher: Searcher, embedder, mode: str = "hybrid") -> int | None:
    """The rank (1-based, top 20) of SHORT_QUESTION's page's first chunk for its question."""
    _, question, doc = SHORT_QUESTION
    hits = searcher.search(question, embedder.embed_query(question), k=20, mode=mode)
    return next((i + 1 for i, h in enumerate(hits) if h.chunk["doc"] == doc), None)


def shown(c: tuple) -> str:
    return "off" if math.isinf(c[2]) else f"{c[0]}, {c[1]:.1f} → {c[2]:.1f}"


def english_signal(only: list[str] | None = None) -> None:
    """Whether a question's term should weigh in BM25 by how specific it is in English: for each
    ENGLISH_GRID value, hybrid search (unrouted) on every corpus; the value for each corpus chosen
    on the others (best mean `objective`), reported on the corpus left out with a paired bootstrap
    interval against off."""
    from harness import REAL_SETS, laid_out, set_dir

    embedder = make_embedder()
    names = ["examples", "claude-docs", *[n for n in REAL_SETS if laid_out(n)]]
    names = [n for n in names if not only or n in only]
    found: dict[str, dict[tuple, list[dict]]] = {}
    probe: dict[tuple, int | None] = {}
    total: dict[str, int] = {}
    plain: dict[str, list[int]] = {}  # the questions whose every term is everyday English
    asked: dict[str, list[str]] = {}
    for name in names:
        questions = [q for q in load_questions(set_dir(name) / "questions.jsonl") if q.gold]
        records, vectors = load_chunks(open_db(eval_db(name, embedder)), embedder.name)
        searcher = Searcher(records, vectors)
        qvecs = [embedder.embed_query(q.question) for q in questions]
        total[name] = len(questions)
        plain[name] = [
            i
            for i, q in enumerate(questions)
            if all(english_zipf(t) >= ENGLISH_STARTS[1] for t in tokenize(q.question))
        ]
        asked[name] = [q.question for q in questions]
        found[name] = {}
        for z in ENGLISH_GRID:
            how, searcher.english_start, searcher.english_zipf = z
            searcher.english_share = how == "share"
            found[name][z] = [
                score_question(searcher.search(q.question, v, k=10), q)
                for q, v in zip(questions, qvecs, strict=True)
            ]
            if name == SHORT_QUESTION[0]:
                probe[z] = short_rank(searcher, embedder)
        print(name, [round(objective(mean_of(found[name][z])), 3) for z in ENGLISH_GRID])
    score = {n: {z: objective(mean_of(found[n][z])) for z in ENGLISH_GRID} for n in names}
    families = [
        (f"{how}, from {a:.1f}", [OFF, *[c for c in ENGLISH_GRID if c[:2] == (how, a)]])
        for how in ("term", "share")
        for a in ENGLISH_STARTS
    ]
    families.append(("any", list(ENGLISH_GRID)))
    rows: list[list] = []
    for fit, among in families:
        moved: dict[str, list[float]] = {"mrr@10": [], "hit@5": []}
        # ties go to the value nearest off (the larger top), which changes least
        for name in names:
            others = [n for n in names if n != name]
            best = max(among, key=lambda z: (np.mean([score[n][z] for n in others]), z[2]))
            base, after = found[name][OFF], found[name][best]
            row: list = [fit, name, shown(best)]
            for metric in moved:
                d = paired_difference(after, base, "english", "off", metric)
                moved[metric].append(d["difference"])
                lo, hi = d["ci95"]
                before = mean_of(base)[metric]
                row.append(f"{before:.3f} → {before + d['difference']:.3f} [{lo:+.3f}, {hi:+.3f}]")
            rows.append(row)
        rows.append([fit, "**mean**", ""] + [f"**{np.mean(v):+.3f}**" for v in moved.values()])

    def rank(r: dict) -> str:
        return str(round(1 / r["mrr@10"])) if r["mrr@10"] else "–"

    watched = [
        [n, asked[n][i], rank(found[n][OFF][i]), rank(found[n][WATCHED][i])]
        for n in names
        for i in plain[n]
    ]
    overall = max(ENGLISH_GRID, key=lambda z: (np.mean([score[n][z] for n in names]), z[2]))
    grid = table(
        ["how, start → top (zipf)", *names, "mean", "short question's rank"],
        [
            [shown(z), *[f"{score[n][z]:.3f}" for n in names]]
            + [f"{np.mean([score[n][z] for n in names]):.3f}", probe.get(z) or "not in top 20"]
            for z in ENGLISH_GRID
        ],
    )
    body = f"""## A question's words weighed by how specific they are in English

(bench/retrieval.py --english-weights)

`python bench/retrieval.py --english-weights` — hybrid search (unrouted): each question term's
BM25 score is multiplied by min(1, max(0, top − zipf) / (top − start)), zipf its frequency in
English (wordfreq, log10 per billion words; a name English never uses: 0, full weight), so that
words English uses everywhere ("available", "use") carry little topic (search.ENGLISH_START and
ENGLISH_ZIPF; off: every term weighs 1). The start is 0 (every English word weighs less) or 4.0
(decide.RARE_ZIPF, where everyday English starts: rarer words keep full weight); the top is one of
{list(ENGLISH_TOPS)}. Start and top for each corpus are chosen on the other corpora (mean MRR@10)
and reported on the corpus left out. Questions with gold sections only. Corpora:
{", ".join(names)}.

Each row: the corpus left out, the top best on the others, and on the corpus left out its MRR@10
and hit@5 (a gold section in the top 5) off → on, and the 95% interval of the per-question paired
difference (seeded bootstrap); "mean": the mean difference over the corpora left out.

{table(["fitted among", "left out", "chosen", "MRR@10", "hit@5"], rows)}

Questions whose every term is everyday English (zipf ≥ 4.0 after stopwords; where "share, from
4.0" acts at all): {", ".join(f"{n} {len(plain[n])} of {total[n]}" for n in names)}.
Their first gold section's rank (top 10; "–": none), off → "{shown(WATCHED)}":

{table(["corpus", "question", "off", shown(WATCHED)], watched)}

Fitted on every corpus: {shown(overall)}. Each top on each corpus (MRR@10), and the rank of the
first chunk of {SHORT_QUESTION[2]} for "{SHORT_QUESTION[1]}" on {SHORT_QUESTION[0]} (top 20):

{grid}

Not shipped. Weighing each term by its English frequency ("term") lowers MRR@10 on every corpus
at every top (the docs' topic words are English words too: "model" 5.1, "token" 3.8, "api" 3.7),
and LOCO chooses off everywhere; it reaches the short question only at a top of 5.0 or less
(mean MRR@10 0.663 → 0.566 or 0.601). Scaling the words' share in the fusion by the question's
most specific term ("share") from 0 moves MRR@10 −0.003 and hit@5 −0.003 left out (claude-docs
−0.015). From 4.0 (everyday English, decide.RARE_ZIPF), "share" acts only on questions with no
term rarer than everyday English (6 of the 382 here: 1 better, 6th → 3rd, none worse) and ranks
the models page 1st (top 5.5;
`fieldguide search` on a claude-docs index: models.md 1st, 3rd, 4th, Bedrock 2nd), but the sets
cannot fit it: left out it moves nothing (mean +0.000 / +0.000), and with "any" form chosen on
the others −0.002 / +0.000. The ship rule asks for a left-out gain; there is none to see until a
set holds short questions with gold sections.
"""
    write_section("english-weights", body)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 26000, 100000, 200000])
    p.add_argument("--queries", type=int, default=100)
    p.add_argument(
        "--rank-bm25-up-to", type=int, default=100000, help="largest size to compare with rank-bm25"
    )
    p.add_argument(
        "--english-weights", action="store_true", help="only fit and report ENGLISH_ZIPF"
    )
    p.add_argument("--sets", nargs="+", help="the corpora ENGLISH_ZIPF is fitted on (default: all)")
    args = p.parse_args()
    if args.english_weights:
        english_signal(args.sets)
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
