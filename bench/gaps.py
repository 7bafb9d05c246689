"""`fieldguide gaps`: how long the clustering takes and how much memory it needs as the number of
unanswered questions grows to its cap (bot/gaps.py MAX_QUESTIONS), and how well it recovers topics.

    python bench/gaps.py

Questions: the eval sets' 465 questions and 60 off-topic ones, embedded with the local model; past
525, each further question is one of them with a small random offset (noise of norm 0.3 before
renormalising: a paraphrase's distance), so the sizes up to the cap have realistic structure.
Recovery: the test's three planted topics (tests/standins/gap_topics.py), 10 questions each, mixed
into the eval questions as the rest of an audit trail: how many of each topic's questions land in
the topic most of them went to, and how many other questions share it.
"""

from __future__ import annotations

import json
import resource
import time

import numpy as np
from harness import SHARED, table, write_section

from bot.gaps import MAX_QUESTIONS, cluster
from index.embedders import make_embedder
from tests.standins.gap_topics import TOPICS


def questions() -> list[str]:
    out = []
    for name in ("claude-docs", "openshift-4.15"):
        for f in ("questions.jsonl", "offtopic.jsonl"):
            out += [json.loads(line)["question"] for line in (SHARED / name / f).open()]
    return out


def centred(v: np.ndarray) -> np.ndarray:
    c = v - v.mean(axis=0)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def main() -> None:
    embedder = make_embedder()
    base = questions()
    t0 = time.perf_counter()
    vectors = np.asarray(embedder.embed_documents(base), dtype=np.float32)
    embed_ms = (time.perf_counter() - t0) * 1000 / len(base)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    # recovery of the planted topics among the eval questions
    planted = [q for qs in TOPICS.values() for q in qs]
    pv = np.asarray(embedder.embed_documents(planted), dtype=np.float32)
    pv /= np.linalg.norm(pv, axis=1, keepdims=True)
    mixed = np.vstack([pv, vectors])
    labels, cut, score = cluster(centred(mixed))
    rows = []
    for k, name in enumerate(TOPICS):
        mine = labels[k * 10 : k * 10 + 10]
        biggest = np.bincount(mine).argmax()  # the topic most of its questions went to
        kept = int((mine == biggest).sum())
        outsiders = int((labels == biggest).sum()) - kept
        rows.append([name, 10, len(set(mine.tolist())), kept, outsiders])
    recovery = table(
        ["planted topic", "questions", "topics they form", "in the biggest", "others in it"], rows
    )
    recovery += (
        f"\n\n({len(mixed)} questions in {len(set(labels))} topics; cut at cosine distance"
        f" {cut:.3f}, silhouette {score:.3f})"
    )

    rng = np.random.default_rng(0)
    rows = []
    for n in (250, 500, 1000, MAX_QUESTIONS):
        dims = vectors.shape[1]
        first = vectors[rng.permutation(len(vectors))[: min(n, len(vectors))]]
        extra = n - len(first)
        shift = rng.normal(0, 0.3 / np.sqrt(dims), (extra, dims))
        noisy = (vectors[rng.integers(0, len(vectors), extra)] + shift).astype(np.float32)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        v = np.vstack([first, noisy])
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        labels, _, score = cluster(centred(v.astype(np.float32)))
        seconds = time.perf_counter() - t0
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        rows.append([n, round(seconds, 2), round(grew, 1), len(set(labels)), round(score, 3)])
        print(rows[-1])
    speed = table(["questions", "cluster s", "peak RSS growth MB", "topics", "silhouette"], rows)
    write_section(
        "gaps",
        f"""## fieldguide gaps: clustering the unanswered questions (bench/gaps.py)

Planted topics (the test's 3 × 10 paraphrases) hidden among the eval sets' {len(base)} questions
(claude-docs and openshift-4.15, on- and off-topic):

{recovery}

Time and memory of the clustering (average linkage + the silhouette-chosen cut, on
{len(vectors[0])}-dim local embeddings) up to the cap of {MAX_QUESTIONS} questions; embedding
costs {embed_ms:.1f} ms a question with the local int8 model on top:

{speed}
""",
    )


if __name__ == "__main__":
    main()
