"""What the docs don't answer: `fieldguide gaps`.

The questions the docs did not answer well — abstained ("not in the docs"), partial, marked 👎 or
handed to a person — are embedded with the index's embedder and grouped into topics by
agglomerative clustering (average linkage on cosine distance). Before they are compared, what
they share with everything else is taken out (Mu & Viswanath's "all-but-the-top"): the docs'
own mean direction and their top d/100 principal directions (what any text about this product
says: its name, its vocabulary, "a question about Tidewater"). The names a question holds that
the docs lack (the decision's unknown words and phrases: what a gap is about) join its meaning as
search joins words and meaning. The dendrogram is cut at a distance fitted on labelled topics
(`TOPIC_CUT`, with the names' share `NAMES_WEIGHT`). Each topic gets its count, the questions
nearest its centre, and the section most of them find first when searched, with that doc's
intent, owner and link.

What an owner can do about a question depends on its kind, and a topic takes the kind most of
its questions have (`KINDS`): off-topic for these docs (nearer to none of their sections than
`OFF_TOPIC_SIM`), answered unsure (an answer quoted the section it found: check it), not covered
(it names something the docs lack, or its answer said what they lack: write it up), or possibly
missed by search (everything it names, the docs name too: its closest section is shown). What the
answers said the docs lack, in their words (the sentences the claim check read as saying so,
router/review.py), comes with the topic, from questions asked in a channel only. A topic's state
(open, drafted, fixed, won't fix) is kept in the audit's database (bot/state) and found again by
the questions it holds (`match_states`).

Small talk ("hi", "thanks") is no gap: a message the embedding model reads as nearer to an empty
message than to anything in the docs, and in which the decision found no name the docs lack, says
nothing the docs could answer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# the newest unanswered questions clustered: an n x n distance matrix (bench/gaps.py measures it)
MAX_QUESTIONS = 2000
CUT_CANDIDATES = 60  # dendrogram cuts whose silhouette is computed (the widest gaps)
EXAMPLES = 5  # questions shown per topic
UNRELATED = 1.0  # cosine distance of two vectors with nothing in common (after centring)
DOC_SAMPLE = 20_000  # rows of the index read to find the docs' common directions
# the decision's signals of a name the docs lack (router/decide.py): a word rare in English they
# never use, one no English either, words standing together nowhere in them
LACKED_NAMES = ("rare", "unseen", "phrase")
# How much a question not answered well says that the docs lack its topic: the chance that a
# question given this decision was one the docs do not answer, measured on the dev sets' answers
# offline (bench/answers-*.json: examples, claude-docs, openshift-4.15; bench/gaps.py prints it):
# of 71 refusals 66 were off-topic questions, of 58 unsure answers 17. An unsure answer quoted the
# section it found, so it is much weaker evidence of a gap than a refusal. A 👎 or a hand-off is a
# person saying the answer did not do: full evidence.
EVIDENCE = {"ABSTAIN": 0.93, "PARTIAL": 0.29}
# Where the dendrogram is cut, and the share of the names a question lacks in comparing it: the
# pair that best recovers the planted topics of the examples' audit trail (bench/gaps.py,
# "Where the dendrogram is cut": adjusted Rand index 0.72 against the 3 planted topics, every other
# question its own; the silhouette-chosen cut it replaces: 0.63). Left out, the test's other
# planted set among the eval sets' 525 questions: crypto 10/10 in a topic of 10, terraform 10/10
# in 14, hipaa 10/10 in 12; and ten questions of one topic alone stay one topic (a silhouette
# cannot say "one").
TOPIC_CUT = 0.84
NAMES_WEIGHT = 0.2
# Off-topic for these docs: a question whose nearest section has a cosine below this (the local
# model's embeddings). Fitted on the example docs (bench/gaps.py, "Off-topic for these docs"):
# the threshold of best balanced accuracy (Youden's J) between examples/offtopic.jsonl's 20
# questions about anything else and the 65 about the product (examples/gaps.jsonl,
# questions.jsonl): all 20 below, 56 of 65 above. Left out, with the same 20 questions: below on
# claude-docs, fastapi and chezmoi 19 of 20 each; above, every one of their own 130, 78 and 94.
OFF_TOPIC_SIM = 0.287
# a topic's kind, as owners read it, in the order topics are listed
KINDS = {
    "missing": "the docs don't cover it: write this up",
    "missed": "the docs may cover it but search missed it: check the closest section answers it,"
    " in the askers' words",
    "unsure": "answered unsure: check the section covers it",
    "offtopic": "off-topic for these docs: nothing to write (say where to ask, if it keeps coming)",
}


@dataclass
class Topic:
    count: int
    questions: list[str]
    intent: str = ""
    doc: str = ""
    owner: str = ""
    section: str = ""  # the nearest section's heading ("" for the doc's top)
    url: str = ""  # where it is read: the doc's url (or FIELDGUIDE_DOCS_BASE_URL + path) + anchor
    ids: list[int] = field(default_factory=list)  # the audit rows
    unsure: int = 0  # of `count`, answered unsure (the others: not answered, a 👎, handed on)
    evidence: float = 0.0  # the summed `evidence` of its questions: how topics are ranked
    kind: str = "missing"  # KINDS
    state: str = "open"  # open, drafted, fixed or wontfix: as kept (bot/state) for its questions
    topic_id: int | None = None  # its stored row, once it has one
    before: str = ""  # closure: answered before and after the docs changed ("0/10", "9/10")
    after: str = ""
    missing: list[str] = field(default_factory=list)  # what its answers said the docs lack

    def to_json(self) -> dict:
        return {
            "count": self.count,
            "kind": self.kind,
            "action": KINDS[self.kind],
            "state": self.state,
            "topic_id": self.topic_id,
            "answered_before": self.before,
            "answered_after": self.after,
            "questions": self.questions,
            "intent": self.intent,
            "doc": self.doc,
            "section": self.section,
            "url": self.url,
            "owner": self.owner,
            "ids": self.ids,
            "unanswered": self.count - self.unsure,
            "unsure": self.unsure,
            "missing": self.missing,
            "evidence": round(self.evidence, 2),
        }


def unanswered(row: dict) -> bool:
    """Not answered well: abstained, partial, a 👎, or handed to a person."""
    return (
        row["decision"] in ("ABSTAIN", "PARTIAL")
        or "not_helpful" in (row.get("feedback") or {}).values()
        or bool(row.get("handoff"))
    )


def evidence(row: dict) -> float:
    """How surely this question's topic is missing from the docs (EVIDENCE); 0 when answered."""
    if "not_helpful" in (row.get("feedback") or {}).values() or row.get("handoff"):
        return 1.0
    return EVIDENCE.get(row["decision"], 0.0)


def asked_privately(row: dict) -> bool:
    """Was the audit row's question asked in a direct message (counted, never shown)?"""
    return (row.get("channel") or "").startswith("D")


def named_gaps(row: dict) -> list[str]:
    """The sentences in which the row's answer said the docs lack a part (router/review.py)."""
    return [" ".join(str(s).split()) for s in (row.get("routing") or {}).get("gaps") or []]


def said_missing(row: dict) -> list[str]:
    """What the row's answer said the docs lack, to show: none for a question asked in a direct
    message, whose answer is as private as the question."""
    return [] if asked_privately(row) else named_gaps(row)


def unsure_only(row: dict) -> bool:
    """Answered unsure, and nobody said it did not do."""
    return row["decision"] == "PARTIAL" and evidence(row) < 1.0


def confirmed(row: dict) -> bool:
    """Answered and someone said so: a 👍, and no 👎 or hand-off. An answer nobody rated may be
    a confident wrong one, so only these count as the docs covering a question."""
    return not unanswered(row) and "helpful" in (row.get("feedback") or {}).values()


def top_intent(row: dict) -> str:
    return (row.get("intents") or [""])[0]


def says_nothing(row: dict, vector: np.ndarray, empty: np.ndarray | None) -> bool:
    """Small talk: the message is nearer an empty message than the docs' nearest passage is to
    it (the decision's `sim`), and the decision found no name in it the docs lack (LACKED_NAMES:
    a lone "Kotlin" the model reads as little is still a question)."""
    evidence = row.get("evidence") or {}
    if empty is None or evidence.get("sim") is None:
        return False
    if any(evidence.get(signal) for signal in LACKED_NAMES):
        return False
    return float(vector @ empty) > float(evidence["sim"])


def silhouette(dist: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette of a clustering given its distance matrix; a singleton's is 0."""
    ids, labels = np.unique(labels, return_inverse=True)
    k = len(ids)
    if k < 2 or k >= len(labels):
        return -1.0
    onehot = np.zeros((len(labels), k))
    onehot[np.arange(len(labels)), labels] = 1.0
    sizes = onehot.sum(axis=0)
    sums = dist @ onehot  # each point's summed distance to each cluster
    own = sizes[labels]
    a = sums[np.arange(len(labels)), labels] / np.maximum(own - 1, 1)
    others = sums / sizes
    others[np.arange(len(labels)), labels] = np.inf
    b = others.min(axis=1)
    s = np.where(own > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)
    return float(s.mean())


def average_linkage(dist: np.ndarray) -> list[tuple[float, int, int]]:
    """The merges of average-linkage (UPGMA) clustering of a distance matrix, lowest first, each
    (height, a, b): the clusters holding points a and b join at that average distance. Found by
    the nearest-neighbour chain (O(n²) time: a cluster and its nearest neighbour that are each
    other's nearest are merged), with Lance-Williams updates of the matrix; average linkage is
    monotone, so the clusters at a height are the merges up to it."""
    n = len(dist)
    d = dist.astype(np.float64, copy=True)
    np.fill_diagonal(d, np.inf)
    size = np.ones(n)
    merges: list[tuple[float, int, int]] = []
    chain: list[int] = []
    alive = list(range(n))
    while len(merges) < n - 1:
        if not chain:
            chain.append(alive[0])
        a = chain[-1]
        b = int(np.argmin(d[a]))
        if len(chain) > 1 and d[a, chain[-2]] <= d[a, b]:
            b = chain[-2]  # ties go back along the chain, so it always ends
        if len(chain) > 1 and b == chain[-2]:
            chain.pop()
            chain.pop()
            merges.append((float(d[a, b]), a, b))
            # the merged cluster lives on as `a`: its distance to every other is the average over
            # both clusters' points
            d[a] = (size[a] * d[a] + size[b] * d[b]) / (size[a] + size[b])
            d[:, a] = d[a]
            d[a, a] = np.inf
            d[b, :] = np.inf
            d[:, b] = np.inf
            size[a] += size[b]
            alive.remove(b)
        else:
            chain.append(b)
    return sorted(merges)


def flat(merges: list[tuple[float, int, int]], n: int, cut: float) -> np.ndarray:
    """The clusters at `cut`: every merge at or below it applied (union-find); labels 0..k-1."""
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for height, a, b in merges:
        if height > cut:
            break
        parent[root(b)] = root(a)
    return np.unique([root(i) for i in range(n)], return_inverse=True)[1]


def cluster(vectors: np.ndarray, at: float | None = None) -> tuple[np.ndarray, float, float]:
    """(labels, cut distance, silhouette) of the average-linkage clustering of unit `vectors`,
    cut at `at` (else where the silhouette is best)."""
    n = len(vectors)
    if n < 2 or (n < 3 and at is None):
        return np.arange(n), 0.0, 0.0
    dist = np.clip(1.0 - vectors @ vectors.T, 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    merges = average_linkage(dist)
    if at is not None:
        labels = flat(merges, n, at)
        return labels, at, silhouette(dist, labels)
    heights = np.array([m[0] for m in merges])
    gaps = np.diff(heights)
    # a natural cut lies in a gap between merge heights: the widest ones are the candidates
    best = (0.0, 0.0, np.arange(n))  # no cut below UNRELATED: every question alone (silhouette 0)
    first = True
    for i in np.argsort(-gaps, kind="stable")[:CUT_CANDIDATES]:
        cut = float((heights[i] + heights[i + 1]) / 2)
        if cut >= UNRELATED:
            continue
        labels = flat(merges, n, cut)
        score = silhouette(dist, labels)
        if first or score > best[0]:
            best, first = (score, cut, labels), False
    return best[2], best[1], best[0]


def common_directions(docs: np.ndarray | None) -> np.ndarray | None:
    """What every text about these docs shares, as orthonormal rows: the docs' mean direction and
    their top d/100 principal directions (Mu & Viswanath's rule of thumb for how many dominate),
    read from at most DOC_SAMPLE evenly spaced rows of the index; None without vectors."""
    if docs is None or len(docs) < 2:
        return None
    rows = np.asarray(docs[:: max(1, len(docs) // DOC_SAMPLE)], dtype=np.float64)
    mean = rows.mean(axis=0)
    top = max(1, round(rows.shape[1] / 100))
    _, _, vt = np.linalg.svd(rows - mean, full_matrices=False)
    basis, _ = np.linalg.qr(np.vstack([mean, vt[:top]]).T)
    return basis.T


def comparable(vectors: np.ndarray, common: np.ndarray | None) -> np.ndarray:
    """Unit `vectors` with what every text about these docs shares taken out (`common`, the docs'
    directions), renormalised. Not the questions' own mean: when most of them ask one thing, that
    mean is the thing, and taking it out scatters them."""
    v = vectors.astype(np.float64)
    if common is not None:
        v = v - (v @ common.T) @ common
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def lacked_names(row: dict) -> set[str]:
    """The names a question holds that the docs lack, as the decision found them (its unknown
    words and phrases), as search terms: what a gap is about ("terraform", "ios", "sdk")."""
    from index.search import tokenize

    evidence = row.get("evidence") or {}
    found = (evidence.get("unknown_words") or []) + (evidence.get("unknown_phrases") or [])
    return {term for name in found for term in tokenize(str(name))}


def with_names(meaning: np.ndarray, names: list[set[str]], weight: float) -> np.ndarray:
    """Each question as its meaning and the names it lacks, fused as search fuses a question's
    meaning and words: cosines weighted 1 - `weight` and `weight` (the index's BM25 share). Two
    questions naming the same thing the docs lack ("terraform apply … webhook endpoint", "a
    Terraform provider") are that much closer, whatever else their sentences say."""
    vocab = {term: i for i, term in enumerate(sorted(set().union(*names)))}
    if not vocab:
        return meaning
    words = np.zeros((len(names), len(vocab)))
    for i, terms in enumerate(names):
        words[i, [vocab[t] for t in terms]] = 1.0
    words /= np.maximum(np.linalg.norm(words, axis=1, keepdims=True), 1e-12)
    both = np.hstack([np.sqrt(1 - weight) * meaning, np.sqrt(weight) * words])
    return both / np.maximum(np.linalg.norm(both, axis=1, keepdims=True), 1e-12)


def find_topics(
    rows: list[dict],
    embedder: Any,
    searcher: Any,
    owners: Any,
    intent: str | None = None,
    most: int = MAX_QUESTIONS,
    base_url: str = "",
    names_weight: float = NAMES_WEIGHT,
) -> tuple[list[Topic], dict]:
    """The topics of the newest `most` unanswered questions among `rows` (audit rows, newest
    first), biggest first — only those labelled `intent` when given (a topic's intent is its
    nearest doc's) —, and figures about the clustering. `names_weight`: the share of the names a
    question lacks in comparing it (`with_names`: FIELDGUIDE_BM25_WEIGHT)."""
    from index.embedding import EmbeddingError
    from index.store import owner_of
    from router.citations import link_for, section_path

    todo = [r for r in rows if unanswered(r)][:most]
    info = {"unanswered": len(todo), "small_talk": 0, "cut": 0.0, "silhouette": 0.0}
    if not todo:
        return [], info
    texts = [" ".join(r["question"].split()) for r in todo]
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    try:
        empty = np.asarray(embedder.embed_documents([""])[0], dtype=np.float32)
        empty /= max(float(np.linalg.norm(empty)), 1e-12)
    except EmbeddingError:  # an embedding service that takes no empty text: nothing is left out
        empty = None
    talk = [says_nothing(r, v, empty) for r, v in zip(todo, vectors, strict=True)]
    keep = [i for i, t in enumerate(talk) if not t]
    todo, texts, vectors = [todo[i] for i in keep], [texts[i] for i in keep], vectors[keep]
    info |= {"unanswered": len(todo), "small_talk": len(talk) - len(keep)}
    if not todo:
        return [], info
    docs = getattr(searcher, "vectors", None)
    kinds = question_kinds(todo, vectors, docs)
    meaning = comparable(vectors, common_directions(docs))
    names = [lacked_names(r) for r in todo]
    labels, cut, score = cluster(with_names(meaning, names, names_weight), TOPIC_CUT)
    info |= {"cut": round(cut, 4), "silhouette": round(score, 4)}
    groups = [np.flatnonzero(labels == label) for label in np.unique(labels)]
    topics = []
    for members in groups:
        centre = vectors[members].mean(axis=0)
        centre /= max(float(np.linalg.norm(centre)), 1e-12)
        order = members[np.argsort(-(vectors[members] @ centre), kind="stable")]
        shown = list(dict.fromkeys(texts[i] for i in order))[:EXAMPLES]
        votes = Counter(kinds[i] for i in members)
        topic = Topic(
            len(members),
            shown,
            ids=[todo[i]["id"] for i in members],
            unsure=sum(unsure_only(todo[i]) for i in members),
            evidence=sum(evidence(todo[i]) for i in members),
            kind=max(votes, key=lambda k: (votes[k], -list(KINDS).index(k))),
            missing=list(dict.fromkeys(s for i in order for s in said_missing(todo[i])))[:EXAMPLES],
        )
        hits = nearest_section(searcher, [(texts[i], vectors[i]) for i in order[:EXAMPLES]])
        if hits:
            chunk = hits[0].chunk
            topic.doc, topic.intent = chunk["doc"], hits[0].intent
            topic.section = " › ".join(section_path(chunk["title"], chunk["heading_path"]))
            topic.url = link_for(chunk, base_url)
        else:  # no vector search: the intent the router gave these questions most often
            topic.intent = Counter(top_intent(todo[i]) for i in members).most_common(1)[0][0]
        topic.owner = owner_of(owners, topic.doc, topic.intent)
        topics.append(topic)
    if intent:
        topics = [t for t in topics if t.intent == intent]
        info["unanswered"] = sum(t.count for t in topics)
    topics.sort(key=lambda t: (list(KINDS).index(t.kind), -t.evidence, -t.count, t.questions[0]))
    return topics, info


def question_kinds(rows: list[dict], vectors: np.ndarray, docs: np.ndarray | None) -> list[str]:
    """Each unanswered question's kind (KINDS): answered unsure (not covered when its answer said
    what the docs lack); off-topic (no section nearer than OFF_TOPIC_SIM; not told without the
    docs' vectors); not covered (it names something the docs lack); else possibly missed by
    search."""
    near = None
    if docs is not None and len(docs):
        near = np.full(len(vectors), -1.0)
        for s in range(0, len(docs), 8192):  # a bounded block of the docs at a time
            block = np.asarray(docs[s : s + 8192], dtype=np.float32)
            block = block / np.maximum(np.linalg.norm(block, axis=1, keepdims=True), 1e-12)
            near = np.maximum(near, (vectors @ block.T).max(axis=1))
    out = []
    for i, row in enumerate(rows):
        if unsure_only(row):
            out.append("missing" if named_gaps(row) else "unsure")
        elif near is not None and near[i] < OFF_TOPIC_SIM:
            out.append("offtopic")
        else:
            out.append("missing" if lacked_names(row) else "missed")
    return out


def match_states(topics: list[Topic], stored: list[dict]) -> None:
    """Give each topic the state of the stored topic (bot/state: {"id", "state", "ids", "before",
    "after"}) holding most of its questions, when that is more than half of them; a stored topic
    is matched once, to the topic that holds most of its questions."""
    pairs = []
    for n, t in enumerate(topics):
        mine = set(t.ids)
        for s in stored:
            shared = len(mine & set(s["ids"]))
            if shared * 2 > len(mine):
                pairs.append((-shared, n, s))
    taken: set[int] = set()
    for _, n, s in sorted(pairs, key=lambda p: (p[0], p[1])):
        t = topics[n]
        if t.topic_id is None and s["id"] not in taken:
            taken.add(s["id"])
            t.topic_id, t.state = s["id"], s["state"]
            t.before, t.after = s.get("before") or "", s.get("after") or ""


def nearest_section(searcher: Any, questions: list[tuple[str, np.ndarray]]) -> list:
    """The section the topic's questions find: each of its nearest questions searched as the bot
    searches it (words and meaning), and the section found first by most of them (ties: the best
    summed score) — not one question's, nor the centre's, which no one asked."""
    votes: Counter = Counter()
    score: Counter = Counter()
    first: dict[int, Any] = {}
    for text, vector in questions:
        hits = searcher.search(text, vector, k=1)
        if hits:
            votes[hits[0].section] += 1
            score[hits[0].section] += hits[0].score
            first.setdefault(hits[0].section, hits[0])
    if not votes:
        return []
    best = max(votes, key=lambda s: (votes[s], score[s]))
    return [first[best]]
