"""`fieldguide gaps`: how well the clustering recovers planted topics, and how long it takes and
how much memory it needs as the number of unanswered questions grows to its cap
(bot/gaps.py MAX_QUESTIONS).

    python bench/gaps.py

Recovery, in an audit trail as the bot makes it: examples/gaps.jsonl's 30 questions in three
topics the example docs don't cover (a Terraform provider, mobile SDKs, compliance certifications;
a confident answer to one of them is marked 👎 by its asker), the example set's 35 questions and
20 off-topic ones and six messages of small talk, each asked through the real offline pipeline on
the example docs (the audit trail tests/test_gaps.py builds). For each planted topic: the topic
holding most of its questions, how many of them, how pure it is and its rank. Then the two fits
bot/gaps.py ships: where the dendrogram is cut (and the names' weight), by the adjusted Rand index
against the planted topics; and the off-topic threshold, by Youden's J on the example docs, with
the other docs sets (claude-docs, and fastapi and chezmoi where their docs are laid out) left
out. Then the test's other planted set (tests/standins/gap_topics.py) hidden among the eval sets'
525 questions (harder: hundreds of real topics around it), left out of the fit.

Speed: the eval sets' 465 questions and 60 off-topic ones, embedded with the local model; past
525, each further question is one of them with a small random offset (noise of norm 0.3 before
renormalising: a paraphrase's distance), so the sizes up to the cap have realistic structure.
"""

from __future__ import annotations

import json
import resource
import shutil
import time
from collections import Counter

import numpy as np
from harness import ROOT, SHARED, WORK, table, write_section

from bot import gaps
from bot.app import FieldGuide
from bot.gaps import MAX_QUESTIONS, cluster, common_directions, comparable
from bot.settings import Settings
from index.embedders import make_embedder
from index.indexer import index_folder
from tests.standins.gap_topics import TOPICS

PLANTED = [json.loads(line) for line in (ROOT / "examples" / "gaps.jsonl").open()]
SMALL_TALK = ["hi", "thanks", "hello!", "Thank you!", "good morning", "ok"]


def evidence_fit() -> dict[str, str]:
    """bot/gaps.py EVIDENCE measured: per decision, the share of off-topic questions among those
    the offline path gave it on the dev sets (bench/answers-*.json)."""
    counts: Counter = Counter()
    for name in ("examples", "claude-docs", "openshift-4.15"):
        saved = json.loads((ROOT / "bench" / f"answers-{name}.json").read_text())
        for part, off in (("answers", False), ("offtopic", True)):
            counts.update((r["decision"], off) for r in saved[part])
    return {
        d: f"{counts[d, True]}/{counts[d, True] + counts[d, False]}"
        f" = {counts[d, True] / (counts[d, True] + counts[d, False]):.2f}"
        for d in ("ABSTAIN", "PARTIAL")
    }


def audit_trail(embedder, others: list[str] | None = None, talk=SMALL_TALK) -> FieldGuide:
    """The examples indexed, and every question asked through the offline pipeline: the planted
    ones and `others` (default: the example set's questions and off-topic ones)."""
    WORK.mkdir(parents=True, exist_ok=True)
    db = WORK / "gaps-examples.db"
    for stale in WORK.glob("gaps-examples.db*"):
        stale.unlink() if stale.is_file() else shutil.rmtree(stale)
    index_folder(db, ROOT / "examples" / "docs", embedder)
    guide = FieldGuide(Settings(db=str(db)), embedder=embedder)
    if others is None:
        others = [
            json.loads(line)["question"]
            for name in ("questions", "offtopic")
            for line in (ROOT / "examples" / f"{name}.jsonl").open()
        ]
    for i, q in enumerate([r["question"] for r in PLANTED] + others + talk):
        ans = guide.ask(q, context={"channel": "CLI", "user": f"U{i % 7}"})
        if i < len(PLANTED) and ans.decision == "ANSWER" and ans.audit_id is not None:
            guide.state.record_feedback(ans.audit_id, f"U{i % 7}", "not_helpful")
    return guide


def recovered(labels: np.ndarray, topic_of: list[str], ranked: bool = False) -> list[list]:
    """Per planted topic: [name, questions, in its biggest topic, that topic's size, purity,
    rank]; ranked: the labels are the topics' ranks as gaps lists them (else: by size)."""
    sizes = Counter(labels.tolist())
    order = sorted(sizes) if ranked else [label for label, _ in sizes.most_common()]
    rows = []
    for name in dict.fromkeys(t for t in topic_of if t):
        mine = [labels[i] for i, t in enumerate(topic_of) if t == name]
        biggest, kept = Counter(mine).most_common(1)[0]
        size = sizes[biggest]
        rows.append([name, len(mine), kept, size, f"{kept / size:.0%}", order.index(biggest) + 1])
    return rows


def planted_beside_answerable(embedder) -> str:
    """The planted-topics check: the 30 planted questions asked beside 10 answerable ones; the
    rank gaps gives each planted topic (ranked by evidence, bot/gaps.py EVIDENCE)."""
    answerable = [
        json.loads(line)["question"] for line in (ROOT / "examples" / "questions.jsonl").open()
    ][:10]
    guide = audit_trail(embedder, answerable, talk=[])
    rows = guide.state.list_answers(None, None, 10_000)
    found, _ = gaps.find_topics(rows, embedder, guide.engine.loaded().searcher, ({}, {}))
    topic = {r["question"]: r["topic"] for r in PLANTED}
    by_id = {r["id"]: r["question"] for r in rows}
    labels = np.array([n for n, t in enumerate(found) for _ in t.ids])
    tags = [topic.get(by_id[i], "") for t in found for i in t.ids]
    listed = "; ".join(
        f"#{n + 1} {t.count} questions ({t.unsure} unsure, evidence {t.evidence:.2f})"
        for n, t in enumerate(found[:4])
    )
    return (
        table(
            ["planted topic", "in the gaps", "in its topic", "that topic", "purity", "rank"],
            recovered(labels, tags, ranked=True),
        )  # fmt: skip
        + f"\n\nThe first four topics: {listed}."
    )


def main() -> None:
    embedder = make_embedder()
    fit = evidence_fit()
    print("evidence", fit, flush=True)
    beside = planted_beside_answerable(embedder)
    print(beside, flush=True)
    guide = audit_trail(embedder)
    searcher = guide.engine.loaded().searcher
    rows = guide.state.list_answers(None, None, 10_000)
    found, info = gaps.find_topics(rows, embedder, searcher, ({}, {}))
    topic = {r["question"]: r["topic"] for r in PLANTED}
    by_id = {r["id"]: r["question"] for r in rows}
    labels = np.zeros(sum(t.count for t in found), dtype=int)
    topic_of: list[str] = []
    for n, t in enumerate(found):
        for i in t.ids:
            labels[len(topic_of)] = n
            topic_of.append(topic.get(by_id[i], ""))
    planted_rows = recovered(labels, topic_of, ranked=True)
    headers = ["planted topic", "in the gaps", "in its biggest topic", "that topic", "purity"]
    recovery = table([*headers, "rank"], planted_rows)
    recovery += (
        f"\n\n({info['unanswered']} questions not answered well in {len(found)} topics;"
        f" {info['small_talk']} of the {len(SMALL_TALK)} messages of small talk left out; cut at"
        f" cosine distance {info['cut']}, silhouette {info['silhouette']})"
    )

    fits = clustering_fit(rows, embedder, searcher)
    off = off_topic_fit(embedder)
    # the test's other planted set among the eval sets' questions, left out of the fit
    base = questions()
    vectors = np.asarray(embedder.embed_documents(base), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    planted = [q for qs in TOPICS.values() for q in qs]
    pv = np.asarray(embedder.embed_documents(planted), dtype=np.float32)
    pv /= np.linalg.norm(pv, axis=1, keepdims=True)
    mixed = np.vstack([pv, vectors])
    docs = np.asarray(searcher.vectors, dtype=np.float64)
    labels, cut, score = cluster(comparable(mixed, common_directions(docs)), gaps.TOPIC_CUT)
    hidden_tags = [name for name, qs in TOPICS.items() for _ in qs] + [""] * len(base)
    hidden = table(headers + ["rank"], recovered(labels, hidden_tags))
    hidden += (
        f"\n\n({len(mixed)} questions in {len(set(labels.tolist()))} topics; cut at cosine"
        f" distance {cut:.3f})"
    )
    alone = cluster(comparable(pv[:10], common_directions(docs)), gaps.TOPIC_CUT)[0]
    hidden += f"; the ten crypto questions alone: {len(set(alone.tolist()))} topic(s)"

    rng = np.random.default_rng(0)
    speed_rows = []
    t0 = time.perf_counter()
    embedder.embed_documents(base[:100])
    embed_ms = (time.perf_counter() - t0) * 10
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
        labels, _, score = cluster(comparable(v, None))
        seconds = time.perf_counter() - t0
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        speed_rows.append([n, round(seconds, 2), round(grew, 1), len(set(labels)), round(score, 3)])
        print(speed_rows[-1])
    speed = table(
        ["questions", "cluster s", "peak RSS growth MB", "topics", "silhouette"], speed_rows
    )
    write_section(
        "gaps",
        f"""## fieldguide gaps: clustering the unanswered questions (bench/gaps.py)

**Planted topics in an audit trail as the bot makes it** (examples/gaps.jsonl's 3 × 10 questions,
the example set's 35 questions and 20 off-topic ones, {len(SMALL_TALK)} messages of small talk,
each asked through the offline pipeline on the example docs; planted questions answered anyway
are marked 👎 by their asker — the trail tests/test_gaps.py asserts on: each planted topic in
the top 3, ≥ 6 questions, ≥ 70% pure):

{recovery}

**The planted-topics check**: the 30 planted questions asked beside 10 answerable ones of the
example set (which the offline path often answers unsure, quoting the section it found). Topics
are ranked by their questions' evidence of a gap (bot/gaps.py EVIDENCE, the share of off-topic
questions among those the offline path gave each decision on the dev sets: ABSTAIN
{fit["ABSTAIN"]}, PARTIAL {fit["PARTIAL"]}; a 👎 or a hand-off 1), so an unsure answer that
quoted its section counts less than a refusal (tests/test_gaps.py asserts the three on top):

{beside}

**Where the dendrogram is cut** (bot/gaps.py TOPIC_CUT, NAMES_WEIGHT): the gap questions of the
trail above (small talk left out), the docs' common directions taken out, clustered by average
linkage and cut at each distance, with the names each question lacks fused at each weight; the
adjusted Rand index against the planted topics (every other question its own topic). The
shipped pair is the best; the silhouette-chosen cut it replaces, on the same questions with the
questions' mean also taken out (before), scores {fits["before"]:.3f}:

{fits["table"]}

**Off-topic for these docs** (bot/gaps.py OFF_TOPIC_SIM): a question's nearest section's cosine.
Fitted on the example docs (examples/offtopic.jsonl's 20 questions about anything else against
the 65 of examples/gaps.jsonl and questions.jsonl, all about the product) at the threshold of best
balanced accuracy (Youden's J); the other docs sets are left out (the same 20 questions, off-topic
for them too, against their own questions, answerable or not):

{off}

**The test's other planted set** (tests/standins/gap_topics.py, 3 × 10) hidden among the eval sets'
{len(base)} questions (claude-docs and openshift-4.15, on- and off-topic; a mixture with hundreds
of real topics of other docs, the example docs' directions taken out), cut at the shipped
distance — left out of the fit:

{hidden}

**Time and memory** of the clustering (average linkage by the nearest-neighbour chain in numpy +
the silhouette-chosen cut, on {vectors.shape[1]}-dim local embeddings) up to the cap of
{MAX_QUESTIONS} questions; embedding costs {embed_ms:.1f} ms a question with the local int8 model
on top:

{speed}
""",
    )


def ari(a: list, b: list) -> float:
    """The adjusted Rand index of two labellings (Hubert & Arabie 1985)."""
    from math import comb

    pairs = Counter(zip(a, b, strict=True))
    both = sum(comb(v, 2) for v in pairs.values())
    sa = sum(comb(v, 2) for v in Counter(a).values())
    sb = sum(comb(v, 2) for v in Counter(b).values())
    expected = sa * sb / comb(len(a), 2)
    top = (sa + sb) / 2
    return (both - expected) / (top - expected) if top != expected else 1.0


def clustering_fit(rows: list[dict], embedder, searcher) -> dict:
    """ARI of each (names weight, cut) on the trail's gap questions; and the old method's."""
    topic = {r["question"]: r["topic"] for r in PLANTED}
    gap_rows = [r for r in rows if gaps.unanswered(r) and r["question"] not in SMALL_TALK]
    texts = [r["question"] for r in gap_rows]
    labels = [topic.get(q, f"own{i}") for i, q in enumerate(texts)]
    v = np.asarray(embedder.embed_documents(texts), dtype=np.float64)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    common = common_directions(np.asarray(searcher.vectors, dtype=np.float64))
    names = [gaps.lacked_names(r) for r in gap_rows]
    meaning = comparable(v, common)
    cuts = [round(c, 2) for c in np.arange(0.70, 0.95, 0.02)]
    grid = []
    for w in (0.0, 0.2, 0.4):
        x = gaps.with_names(meaning, names, w) if w else meaning
        dist = np.clip(1 - x @ x.T, 0, 2)
        np.fill_diagonal(dist, 0)
        merges = gaps.average_linkage(dist)
        grid.append(
            [w] + [round(ari(gaps.flat(merges, len(x), c).tolist(), labels), 3) for c in cuts]
        )
    old = meaning - meaning.mean(axis=0)
    old /= np.linalg.norm(old, axis=1, keepdims=True)
    before, _, _ = cluster(gaps.with_names(old, names, 0.4))
    return {
        "table": table(["names weight", *[f"cut {c}" for c in cuts]], grid),
        "before": ari(before.tolist(), labels),
    }


def nearest(embedder, qs: list[str], vectors: np.ndarray) -> np.ndarray:
    """Each question's cosine with its nearest chunk."""
    q = np.asarray(embedder.embed_documents(qs), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return (q @ vectors.T).max(axis=1)


def off_topic_fit(embedder) -> str:
    """OFF_TOPIC_SIM's fit on the examples and the left-out sets' figures at it."""
    off = [json.loads(line)["question"] for line in (ROOT / "examples/offtopic.jsonl").open()]
    sets = {"examples": (ROOT / "examples" / "docs", [
        json.loads(line)["question"] for f in ("gaps.jsonl", "questions.jsonl")
        for line in (ROOT / "examples" / f).open()])}  # fmt: skip
    for name in ("claude-docs",):
        sets[name] = (SHARED / name / "docs", [json.loads(line)["question"]
                      for f in ("questions.jsonl", "offtopic.jsonl")
                      for line in (SHARED / name / f).open()])  # fmt: skip
    for name in ("fastapi", "chezmoi"):
        folder = ROOT / "bench" / "sets" / name
        if (folder / "docs").is_dir():
            sets[name] = (folder / "docs", [json.loads(line)["question"][:400]
                          for f in ("questions.jsonl", "offtopic.jsonl")
                          for line in (folder / f).open()])  # fmt: skip
    out, fitted = [], None
    for name, (docs, product) in sets.items():
        db = WORK / f"gaps-off-{name}.db"
        if not db.exists():
            index_folder(db, docs, embedder)
        from index.store import load_chunks, open_db

        _, vectors = load_chunks(open_db(db), embedder.name)
        assert vectors is not None
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

        a, b = nearest(embedder, off, vectors), nearest(embedder, product, vectors)
        if fitted is None:  # the examples: Youden's J over every threshold
            cands = np.unique(np.r_[a, b])
            j = [(b >= t).mean() + (a < t).mean() - 1 for t in cands]
            k = int(np.argmax(j))
            fitted = float((cands[k] + cands[k - 1]) / 2) if k else float(cands[k])
        out.append([name, len(a), int((a < fitted).sum()), len(b), int((b >= fitted).sum())])
    return f"Fitted threshold: {fitted:.3f} (shipped {gaps.OFF_TOPIC_SIM}).\n\n" + table(
        ["docs", "off-topic", "below (off-topic)", "about the product", "above (kept)"], out
    )


def questions() -> list[str]:
    out = []
    for name in ("claude-docs", "openshift-4.15"):
        for f in ("questions.jsonl", "offtopic.jsonl"):
            out += [json.loads(line)["question"] for line in (SHARED / name / f).open()]
    return out


if __name__ == "__main__":
    main()
