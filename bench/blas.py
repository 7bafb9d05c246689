"""A question's vector product on numpy's BLAS thread pool and on one thread (router/engine.py
`one_blas_thread`): the real sets' indexes, each product timed after the process sat idle as a
server does between questions (the section "blas").

    python bench/blas.py [--idle SECONDS] [--questions N]

Each arm in turn, question by question, as a question's path goes: `--idle` seconds asleep, the
question embedded by the local model (ONNX Runtime, on threads of its own), then the search's
product (every row of the index against the question's vector, index/search.py), and the same
product once more (warm). Both arms run in one process; each sets the pool's size first.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from claude_paths import questions
from harness import QUESTION_SETS, eval_db, laid_out, set_dir, table, write_section
from threadpoolctl import threadpool_limits

from index.embedders import make_embedder
from index.mapped import open_searcher

ARMS = (("pool", os.cpu_count()), ("one thread", 1))


def timed(product) -> float:
    started = time.perf_counter()
    product()
    return (time.perf_counter() - started) * 1000


def measure(name: str, embedder, idle: float, n: int) -> list:
    db = eval_db(name, embedder)
    _, searcher = open_searcher(db, embedder.name)
    asked = questions(set_dir(name) / "questions.jsonl", n)
    after: dict[str, list[float]] = {a: [] for a, _ in ARMS}
    warm: dict[str, list[float]] = {a: [] for a, _ in ARMS}
    for question in asked:
        for arm, threads in ARMS:
            with threadpool_limits(limits=threads, user_api="blas"):
                time.sleep(idle)
                v = embedder.embed_query(question)  # as a question's path: embedded, then searched
                after[arm].append(timed(lambda v=v: searcher.vectors @ v))
                warm[arm].append(timed(lambda v=v: searcher.vectors @ v))
    row = [name, f"{searcher.vectors.shape[0]:,}", len(asked)]
    for arm, _ in ARMS:
        a = np.asarray(after[arm])
        row += [f"{np.median(a):.2f}", f"{np.percentile(a, 90):.2f}", f"{np.median(warm[arm]):.2f}"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=float, default=2.0)
    ap.add_argument("--questions", type=int, default=12)
    args = ap.parse_args()
    embedder = make_embedder()
    rows = [measure(n, embedder, args.idle, args.questions) for n in QUESTION_SETS if laid_out(n)]
    headers = ["set", "rows", "questions"]
    for arm, _ in ARMS:
        headers += [f"{arm}: after idle p50 ms", f"{arm}: after idle p90 ms", f"{arm}: warm p50 ms"]
    body = SECTION.format(idle=args.idle, cpus=os.cpu_count()) + table(headers, rows)
    print(body)
    write_section("blas", body)


SECTION = """### A question's vector product, BLAS's thread pool or one thread (`bench/blas.py`)

`python bench/blas.py --idle {idle:g}`. The search's product (the index's rows against a
question's vector, index/search.py) for each set's first answerable questions, with numpy's BLAS
on its pool ({cpus} threads here) and on one thread, the arms in turn. Each question as its path
goes: {idle:g} s asleep (a server between questions), the question embedded by the local model
(ONNX Runtime, whose own threads keep the cores for a while after), the product timed, then the
same product once more (warm). A process that answers questions holds BLAS to one thread
(router/engine.py `one_blas_thread`).

"""

if __name__ == "__main__":
    main()
