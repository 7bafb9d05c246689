"""Hybrid search over the index held in memory: BM25 (rank-bm25's Okapi formula on an inverted
index), cosine similarity (one contiguous float32 matrix), and their fusion.

BM25 statistics (idf, average length) are those of the whole index, so a chunk's BM25 score does
not depend on which buckets are searched: a bucket is only a mask over the same scores.
"""

from __future__ import annotations

import io
import math
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

TOKEN = re.compile(r"[a-z0-9]+")
# bump when tokenize() or bm25_tokens() change: cached postings are keyed by it
TOKENIZER_VERSION = 2
# BM25 counts a chunk's title and heading path this many times: headings name what a section is
# about (the BM25F idea of a boosted title field). 1 → 3 on the eval sets, hybrid: claude-docs
# recall@3 0.707 → 0.732, examples MRR@10 0.726 → 0.744, openshift intent hit@1 0.742 → 0.748.
HEADING_WEIGHT = 3
# fmt: off
STOPWORDS = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for", "from",
    "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on",
    "or", "our", "should", "so", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "to", "was", "we", "what", "when", "where", "which", "who", "why",
    "will", "with", "would", "you", "your",
])
# fmt: on


def stem(word: str) -> str:
    """Harman's S-stemmer: folds plurals only (keys/key, policies/policy), which is safe for
    technical words where heavier stemming conflates different terms."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    return [stem(t) for t in TOKEN.findall(text.lower()) if t not in STOPWORDS]


def bm25_tokens(search_text: str) -> list[str]:
    """A chunk's BM25 terms: its header line (title > headings) weighted, then its text."""
    header, _, body = search_text.partition("\n\n")
    return tokenize(header) * HEADING_WEIGHT + tokenize(body)


class BM25:
    """Scores identical to `rank_bm25.BM25Okapi(corpus, k1, b, epsilon).get_scores(query)`, but each
    query term touches only the chunks that contain it (postings), not every chunk."""

    ARRAYS = ("postings_docs", "postings_weights", "offsets", "idf")

    def __init__(
        self,
        corpus: list[list[str]] | None,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
    ):
        if corpus is None:
            return  # filled by from_bytes
        self.size = len(corpus)
        self.vocab: dict[str, int] = {}
        doc_ids: list[int] = []
        term_ids: list[int] = []
        tfs: list[int] = []
        doc_len = np.fromiter((len(d) for d in corpus), dtype=np.int64, count=self.size)
        for i, doc in enumerate(corpus):
            for term, count in Counter(doc).items():
                doc_ids.append(i)
                term_ids.append(self.vocab.setdefault(term, len(self.vocab)))
                tfs.append(count)
        terms = np.asarray(term_ids, dtype=np.int64)
        docs = np.asarray(doc_ids, dtype=np.int32)
        tf = np.asarray(tfs, dtype=np.int64)
        df = np.bincount(terms, minlength=len(self.vocab))
        # idf exactly as rank-bm25 computes it: math.log per term, negatives floored at
        # eps * mean idf
        idf = np.array(
            [math.log(self.size - n + 0.5) - math.log(n + 0.5) for n in df.tolist()],
            dtype=np.float64,
        )
        if len(idf):
            average_idf = sum(idf.tolist()) / len(idf)  # summed in first-seen order, like rank-bm25
            idf[idf < 0] = epsilon * average_idf
        self.idf = idf
        avgdl = doc_len.sum() / self.size if self.size else 1.0
        norm = k1 * (1 - b + b * doc_len / avgdl)
        weight = idf[terms] * (tf * (k1 + 1) / (tf + norm[docs]))
        order = np.argsort(terms, kind="stable")
        self.postings_docs = docs[order]
        self.postings_weights = weight[order]
        self.offsets = np.zeros(len(self.vocab) + 1, dtype=np.int64)
        np.cumsum(df, out=self.offsets[1:])

    def to_bytes(self) -> bytes:
        """The built index, so a process can load it instead of re-tokenising every chunk."""
        buf = io.BytesIO()
        vocab = np.frombuffer("\n".join(self.vocab).encode(), dtype=np.uint8)
        np.savez(
            buf,
            vocab=vocab,
            size=np.array([self.size]),
            **{k: getattr(self, k) for k in self.ARRAYS},
        )
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> BM25:
        z = np.load(io.BytesIO(data))
        bm25 = cls(None)
        bm25.size = int(z["size"][0])
        words = z["vocab"].tobytes().decode().split("\n") if z["vocab"].size else []
        bm25.vocab = dict(zip(words, range(len(words)), strict=True))
        for k in cls.ARRAYS:
            setattr(bm25, k, z[k])
        return bm25

    def scores(self, query: list[str]) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.float64)
        for term in query:  # repeated query terms count again, as in rank-bm25
            t = self.vocab.get(term)
            if t is not None:
                s, e = self.offsets[t], self.offsets[t + 1]
                out[self.postings_docs[s:e]] += self.postings_weights[s:e]
        return out

    def coverage(self, query: list[str], text: list[str]) -> float:
        """Share of the query's idf weight that `text` contains. A term the index has never seen
        weighs as much as the rarest possible term: a question about things the docs never mention
        scores ~0."""
        unseen = math.log(self.size + 0.5) - math.log(0.5)
        terms = set(query)
        if not terms:
            return 0.0
        weight = {t: (self.idf[self.vocab[t]] if t in self.vocab else unseen) for t in terms}
        total = sum(max(w, 0.0) for w in weight.values())
        present = set(text)
        return sum(max(w, 0.0) for t, w in weight.items() if t in present) / total if total else 0.0


def minmax(x: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; all-equal scores carry no ranking signal and become 0."""
    if x.size == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def rrf(*rankings: np.ndarray, k: int = 60) -> np.ndarray:
    """Reciprocal rank fusion of score arrays over the same candidates (higher score = better)."""
    fused = np.zeros(rankings[0].size, dtype=np.float64)
    for scores in rankings:
        ranks = np.empty(scores.size, dtype=np.int64)
        ranks[np.argsort(-scores, kind="stable")] = np.arange(1, scores.size + 1)
        fused += 1.0 / (k + ranks)
    return fused


@dataclass
class Hit:
    row: int
    chunk: dict
    bm25: float
    vector: float
    score: float  # the fused score the ranking used


class Searcher:
    """The whole index in memory: chunk records, the BM25 postings, the embedding matrix and a row
    mask per intent. Built once per index generation and shared by every query."""

    def __init__(self, records: list[dict], vectors: np.ndarray | None, bm25: BM25 | None = None):
        self.records = records
        self.vectors = vectors
        self.bm25 = bm25 or BM25([bm25_tokens(r["search_text"]) for r in records])
        # each chunk's intent as a small integer id: a numpy array of the names themselves would
        # be chunks x the longest name wide (1.4 GB for one 100,000-character intent)
        ids: dict[str, int] = {}
        intent_ids = np.fromiter(
            (ids.setdefault(r["intent"], len(ids)) for r in records),
            dtype=np.int32,
            count=len(records),
        )
        self.intent_rows = {name: np.flatnonzero(intent_ids == ids[name]) for name in sorted(ids)}

    def rows_for(self, intents) -> np.ndarray:
        if intents is None:
            return np.arange(len(self.records))
        found = [self.intent_rows[i] for i in intents if i in self.intent_rows]
        return np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)

    def search(
        self,
        query: str,
        query_vec: np.ndarray | None,
        intents=None,
        k: int = 10,
        mode: str = "hybrid",
        bm25_weight: float = 0.4,
    ) -> list[Hit]:
        """Top-k chunks of the given intents (None = all). Without a query vector (the embedding
        service is down) the search falls back to BM25 alone."""
        rows = self.rows_for(intents)
        if rows.size == 0:
            return []
        if query_vec is None or self.vectors is None:
            mode = "bm25"
        whole = rows.size == len(self.records)
        # each signal is computed only when the mode uses it
        bm25 = np.zeros(rows.size) if mode == "vector" else self.bm25.scores(tokenize(query))
        bm25 = bm25 if whole or mode == "vector" else bm25[rows]
        if mode == "bm25":
            vec = np.zeros(rows.size, dtype=np.float32)
        else:
            assert query_vec is not None and self.vectors is not None  # else mode is "bm25"
            vec = (self.vectors if whole else self.vectors[rows]) @ query_vec.astype(np.float32)
        if mode == "bm25":
            fused = bm25
        elif mode == "vector":
            fused = vec.astype(np.float64)
        elif mode == "rrf":
            fused = rrf(bm25, vec.astype(np.float64))
        else:
            fused = bm25_weight * minmax(bm25) + (1 - bm25_weight) * minmax(vec.astype(np.float64))
        pool = max(3 * k, 30)
        top = (
            np.argpartition(-fused, pool - 1)[:pool] if fused.size > pool else np.arange(fused.size)
        )
        # by score, ties by index order: deterministic
        top = top[np.lexsort((rows[top], -fused[top]))]
        hits = [
            Hit(int(rows[i]), self.records[rows[i]], float(bm25[i]), float(vec[i]), float(fused[i]))
            for i in top
        ]
        return one_per_section(hits)[:k]


def one_per_section(hits: list[Hit]) -> list[Hit]:
    """Pieces of one split section say much the same thing: keep the best piece of each section in
    place and move the other pieces after the distinct sections, so the top results cover more
    ground."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    first: list[Hit] = []
    later: list[Hit] = []
    for h in hits:
        key = (h.chunk["doc"], tuple(h.chunk["heading_path"]))
        (later if key in seen else first).append(h)
        seen.add(key)
    return first + later
