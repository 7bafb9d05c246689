"""What the docs don't answer: `fieldguide gaps`.

The questions the docs did not answer well — abstained ("not in the docs"), partial, marked 👎 or
handed to a person — are embedded with the index's embedder and grouped into topics by
agglomerative clustering (average linkage on cosine distance, scipy), after the vector all of them
share (their mean) is taken out. Where the dendrogram is cut
is not a hand-set number: among the cuts in its widest gaps between merge heights, the one whose
clusters have the best mean silhouette (Rousseeuw 1987; a question alone in its topic scores 0)
is taken. Each topic gets its count, the questions nearest its centre, and the doc a search with
its centre finds first, with that doc's intent and owner.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# the newest unanswered questions clustered: an n x n distance matrix, ~13 s and ~60 MB at 2,000
# on 2 cores (bench/gaps.py)
MAX_QUESTIONS = 2000
CUT_CANDIDATES = 60  # dendrogram cuts whose silhouette is computed (the widest gaps)
EXAMPLES = 5  # questions shown per topic


@dataclass
class Topic:
    count: int
    questions: list[str]
    intent: str = ""
    doc: str = ""
    owner: str = ""
    ids: list[int] = field(default_factory=list)  # the audit rows

    def to_json(self) -> dict:
        return {
            "count": self.count,
            "questions": self.questions,
            "intent": self.intent,
            "doc": self.doc,
            "owner": self.owner,
        }


def unanswered(row: dict) -> bool:
    """Not answered well: abstained, partial, a 👎, or handed to a person."""
    return (
        row["decision"] in ("ABSTAIN", "PARTIAL")
        or "not_helpful" in (row.get("feedback") or {}).values()
        or bool(row.get("handoff"))
    )


def top_intent(row: dict) -> str:
    return (row.get("intents") or [""])[0]


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


def cluster(vectors: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(labels, cut distance, silhouette) of the average-linkage clustering of unit `vectors`."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import pdist, squareform

    n = len(vectors)
    if n < 3:
        return np.arange(n), 0.0, 0.0
    condensed = np.clip(pdist(vectors, metric="cosine"), 0.0, 2.0)
    tree = linkage(condensed, method="average")
    heights = tree[:, 2]
    gaps = np.diff(heights)
    # a natural cut lies in a gap between merge heights: the widest ones are the candidates
    widest = np.argsort(-gaps)[:CUT_CANDIDATES]
    dist = squareform(condensed)
    best = (-2.0, 0.0, np.arange(n))
    for i in widest:
        cut = float((heights[i] + heights[i + 1]) / 2)
        labels = fcluster(tree, cut, criterion="distance")
        score = silhouette(dist, labels)
        if score > best[0]:
            best = (score, cut, labels)
    return best[2], best[1], best[0]


def find_topics(
    rows: list[dict],
    embedder: Any,
    searcher: Any,
    owners: Any,
    intent: str | None = None,
    most: int = MAX_QUESTIONS,
) -> tuple[list[Topic], dict]:
    """The topics of the newest `most` unanswered questions among `rows` (audit rows, newest
    first), biggest first; and figures about the clustering."""
    from index.store import owner_of

    todo = [r for r in rows if unanswered(r) and (not intent or top_intent(r) == intent)]
    todo = todo[:most]
    info = {"unanswered": len(todo), "cut": 0.0, "silhouette": 0.0}
    if not todo:
        return [], info
    texts = [" ".join(r["question"].split()) for r in todo]
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    # what every question shares (being a question about this product: "Does Tidewater …") is
    # taken out before comparing them — the mean vector subtracted, as in Mu & Viswanath's
    # "all-but-the-top" — else a product name outweighs the topic ("Does Tidewater accept
    # Bitcoin?" sat with the Terraform questions, not the crypto ones)
    centred = vectors - vectors.mean(axis=0)
    centred /= np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-12)
    labels, cut, score = cluster(centred)
    info |= {"cut": round(cut, 4), "silhouette": round(score, 4)}
    topics = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        centre = vectors[members].mean(axis=0)
        centre /= max(float(np.linalg.norm(centre)), 1e-12)
        order = members[np.argsort(-(vectors[members] @ centre), kind="stable")]
        shown = list(dict.fromkeys(texts[i] for i in order))[:EXAMPLES]
        topic = Topic(len(members), shown, ids=[todo[i]["id"] for i in members])
        hits = searcher.search(shown[0], centre, k=1)
        if hits:
            doc = hits[0].chunk["doc"]
            topic.doc, topic.intent = doc, hits[0].intent
        else:  # no vector search: the intent the router gave these questions most often
            topic.intent = Counter(top_intent(todo[i]) for i in members).most_common(1)[0][0]
        topic.owner = owner_of(owners, topic.doc, topic.intent)
        topics.append(topic)
    topics.sort(key=lambda t: (-t.count, t.questions[0]))
    return topics, info
