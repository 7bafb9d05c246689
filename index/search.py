"""Hybrid search: BM25 (rank-bm25's Okapi formula on an inverted index), cosine similarity (one
contiguous float32 matrix), and their fusion. The arrays may be memory-mapped (index/mapped.py);
chunk texts are read only for the hits used.

BM25 statistics (idf, average length) are those of the whole index, so a chunk's BM25 score does
not depend on which buckets are searched: a bucket is only a mask over the same scores.

Fusion is a min-max-normalised weighted sum (the words' share FIELDGUIDE_BM25_WEIGHT, scaled by
the question's most specific term: `words_share`) or RRF. A chunk's title and heading path count
HEADING_WEIGHT times in its BM25 terms. Measured and not shipped (bench/RESULTS.md, the code in
history): a second BM25 over headings alone ("heading-field"), a page's vector mixed into a chunk's
cosine ("page-vectors"), each term weighed by its English frequency ("english-weights").
"""

from __future__ import annotations

import bisect
import copy
import math
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache

import numpy as np

from .furniture import Furniture, count
from .links import Anchors, section_anchor

TOKEN = re.compile(r"[a-z0-9]+")
# A term is at most this long: a SHA-256 hex digest (64), the longest identifier people paste to
# look up, is still one whole term; a longer run of letters (a 4,000-letter "word", a base64 blob)
# is cut to its first 64, in the docs and in questions alike, so it still matches by its start
# and costs what a 64-letter term costs wherever terms are looked up, stemmed or compared.
MAX_TERM_CHARS = 64
# A word longer than this is no word a spelling, stem or name check can help with (the longest
# English words and identifiers in the eval docs are under 40 letters): it is read as unknown, at a
# bounded cost whatever its length.
MAX_WORD = 40
# bump when tokenize() or bm25_tokens() change: cached postings are keyed by it
TOKENIZER_VERSION = 3
# BM25 counts a chunk's title and heading path this many times: headings name what a section is
# about (the BM25F idea of a boosted title field). 1 → 3 on the eval sets, hybrid: claude-docs
# recall@3 0.707 → 0.732, examples MRR@10 0.726 → 0.744, openshift intent hit@1 0.742 → 0.748.
HEADING_WEIGHT = 3
# A question made only of words English uses everywhere ("What models are available?") says its
# subject through meaning more than through words: BM25 ranks whatever section holds "available"
# in a heading first. The words' share in the fused score is scaled by the question's most
# specific term: 1 for a term rarer than everyday English (zipf below EVERYDAY_ZIPF, the edge the
# answer decision's `rare` reads too, fitted there; a word English never uses counts as rare),
# falling linearly to 0 at COMMON_ZIPF. COMMON_ZIPF was chosen leave one corpus out among 4.5-8
# (5.5 on five folds of six; section english-weights of bench/RESULTS.md): it changes 6 of the 382
# eval questions' rankings (1 better, none worse) and brings the models page first for that
# question. Weighing each term by its zipf instead lowered MRR@10 on every corpus (the docs' own
# subjects are English words too: "model" 5.1, "token" 3.8).
EVERYDAY_ZIPF, COMMON_ZIPF = 4.0, 5.5
# fmt: off
STOPWORDS = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for", "from",
    "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on",
    "or", "our", "should", "so", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "to", "was", "we", "what", "when", "where", "which", "who", "why",
    "will", "with", "would", "you", "your",
])
# fmt: on


@lru_cache(maxsize=1 << 14)  # a question's read tokenizes its candidates' words by the thousand
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
    return [stem(t[:MAX_TERM_CHARS]) for t in TOKEN.findall(text.lower()) if t not in STOPWORDS]


@lru_cache(maxsize=65536)
def zipf(word: str) -> float:
    """A word's frequency in English on wordfreq's zipf scale (0: never seen). A word over MAX_WORD
    letters is no English word: 0 without reading wordfreq's table."""
    if len(word) > MAX_WORD:
        return 0.0
    from wordfreq import zipf_frequency

    return float(zipf_frequency(word, "en"))


def words_share(terms: list[str]) -> float:
    """How much of the words' share in the fused score a question keeps: by its most specific
    term (EVERYDAY_ZIPF, COMMON_ZIPF); 1 for a question without terms."""
    if not terms:
        return 1.0
    rarest = min(zipf(t) for t in terms)  # 0 for a word English never uses
    return min(1.0, max(0.0, COMMON_ZIPF - rarest) / (COMMON_ZIPF - EVERYDAY_ZIPF))


def bm25_tokens(search_text: str) -> list[str]:
    """A chunk's BM25 terms: its header line (title > headings) weighted, then its text."""
    header, _, body = search_text.partition("\n\n")
    return tokenize(header) * HEADING_WEIGHT + tokenize(body)


class Vocab:
    """The BM25 terms in byte order, as one blob and offsets (arrays that can be memory-mapped):
    a term's id is its position, found by binary search, so opening an index builds no dict."""

    def __init__(self, blob: np.ndarray, starts: np.ndarray):
        self.blob, self.starts = blob, starts

    @classmethod
    def of(cls, words: list[str]) -> Vocab:
        """`words` sorted by their UTF-8 bytes."""
        data = [w.encode() for w in words]
        starts = np.zeros(len(data) + 1, dtype=np.int64)
        np.cumsum([len(d) for d in data], out=starts[1:])
        return cls(np.frombuffer(b"".join(data), dtype=np.uint8), starts)

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i: int) -> bytes:
        return self.blob[self.starts[i] : self.starts[i + 1]].tobytes()

    def words(self) -> list[str]:
        return [self[i].decode() for i in range(len(self))]

    def get(self, term: str) -> int | None:
        key = term.encode()
        i = bisect.bisect_left(self, key)
        return i if i < len(self) and self[i] == key else None


class BM25:
    """Scores identical to `rank_bm25.BM25Okapi(corpus, k1, b, epsilon).get_scores(query)`, but each
    query term touches only the chunks that contain it (postings), not every chunk. Built from an
    iterable of token lists (streamed: a million chunks never sit in memory as token lists), or
    from its arrays (`from_arrays`, possibly memory-mapped)."""

    ARRAYS = ("postings_docs", "postings_weights", "offsets", "idf")

    def __init__(
        self,
        corpus: Iterable[list[str]] | None,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
    ):
        if corpus is None:
            return  # filled by from_arrays
        vocab: dict[str, int] = {}
        doc_ids, term_ids, tfs, lengths = (array("i") for _ in range(4))
        for i, doc in enumerate(corpus):
            lengths.append(len(doc))
            counts = Counter(doc)
            doc_ids.extend([i] * len(counts))
            term_ids.extend([vocab.setdefault(t, len(vocab)) for t in counts])
            tfs.extend(counts.values())
        self.size = len(lengths)
        doc_len = np.frombuffer(lengths, dtype=np.int32).astype(np.int64)
        terms = np.frombuffer(term_ids, dtype=np.int32)
        docs = np.frombuffer(doc_ids, dtype=np.int32)
        tf = np.frombuffer(tfs, dtype=np.int32).astype(np.int64)
        df = np.bincount(terms, minlength=len(vocab))
        # idf exactly as rank-bm25 computes it: math.log per term, negatives floored at
        # eps * mean idf
        idf = np.array(
            [math.log(self.size - n + 0.5) - math.log(n + 0.5) for n in df.tolist()],
            dtype=np.float64,
        )
        if len(idf):
            average_idf = sum(idf.tolist()) / len(idf)  # summed in first-seen order, like rank-bm25
            idf[idf < 0] = epsilon * average_idf
        avgdl = doc_len.sum() / self.size if self.size else 1.0
        norm = k1 * (1 - b + b * doc_len / avgdl)
        weight = idf[terms] * (tf * (k1 + 1) / (tf + norm[docs]))
        del tf, doc_len
        # term ids renumbered in byte order of the terms (the Vocab's order); each term's
        # postings keep the chunk order
        words = sorted(vocab, key=str.encode)
        new_id = np.empty(len(vocab), dtype=np.int32)
        new_id[[vocab[w] for w in words]] = np.arange(len(words), dtype=np.int32)
        terms = new_id[terms]
        order = np.argsort(terms, kind="stable")
        self.vocab = Vocab.of(words)
        self.idf = idf[np.argsort(new_id)]
        self.postings_docs = docs[order]
        self.postings_weights = weight[order]
        self.offsets = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(df[np.argsort(new_id)], out=self.offsets[1:])

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything the index is, as arrays (to store, and to map back with `from_arrays`)."""
        return {
            "bm25_size": np.array([self.size], dtype=np.int64),
            "vocab_blob": self.vocab.blob,
            "vocab_starts": self.vocab.starts,
            **{k: getattr(self, k) for k in self.ARRAYS},
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> BM25:
        bm25 = cls(None)
        bm25.size = int(arrays["bm25_size"][0])
        bm25.vocab = Vocab(arrays["vocab_blob"], arrays["vocab_starts"])
        for k in cls.ARRAYS:
            setattr(bm25, k, arrays[k])
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
        weight = self.weights(query)
        total = sum(weight.values())
        present = set(text)
        return sum(w for t, w in weight.items() if t in present) / total if total else 0.0

    def weights(self, query: list[str]) -> dict[str, float]:
        """Each term of the query with its idf (at least 0; an unseen term the rarest's), kept
        for the last WEIGHED queries: a question's units are scored against it by the hundred."""
        key = tuple(sorted(set(query)))
        cache = self.__dict__.setdefault("_weighed", {})
        found = cache.get(key)
        if found is None:
            unseen = math.log(self.size + 0.5) - math.log(0.5)
            ids = {t: self.vocab.get(t) for t in key}
            found = {
                t: max(unseen if i is None else float(self.idf[i]), 0.0) for t, i in ids.items()
            }
            if len(cache) >= WEIGHED:
                cache.clear()
            cache[key] = found
        return found


WEIGHED = 64  # the queries whose term weights BM25.weights keeps


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


class IndexChanged(Exception):
    """A hit's chunk is gone from the index: a reindex committed between the search and the read of
    its text. Asking again searches the new index."""


Fetch = Callable[[list[int]], list[dict]]


class Hit:
    """One search result. What ranking needs is held per row; `chunk`, the full record (id, doc,
    title, heading_path, text, search_text, start, end, intent, url), is read from the index on
    first use, for all the hits of one result list in one query."""

    __slots__ = ("row", "bm25", "vector", "score", "intent", "section", "_chunk", "_batch")

    def __init__(
        self,
        row: int,
        bm25: float,
        vector: float,
        score: float,  # the fused score the ranking used
        intent: str,
        section: int,  # rows of one section of one doc share it
        fetch: Fetch,
    ):
        self.row, self.bm25, self.vector, self.score = row, bm25, vector, score
        self.intent, self.section = intent, section
        self._chunk: dict | None = None
        self._batch: tuple[Fetch, list[Hit]] = (fetch, [self])

    @property
    def chunk(self) -> dict:
        if self._chunk is None:
            fetch, hits = self._batch
            todo = [h for h in hits if h._chunk is None] or [self]
            for h, record in zip(todo, fetch([h.row for h in todo]), strict=True):
                h._chunk = record
        assert self._chunk is not None
        return self._chunk

    def with_score(self, score: float) -> Hit:
        """The same hit ranked by another score (a reranker's); its record comes along."""
        hit = copy.copy(self)
        hit.score = score
        return hit

    def __repr__(self) -> str:
        return f"Hit(row={self.row}, intent={self.intent!r}, score={self.score:.4f})"


def read_together(hits: list[Hit]) -> list[Hit]:
    """The chunks of these hits are read in one query, when the first of them is used."""
    for h in hits:
        h._batch = (h._batch[0], hits)
    return hits


class Searcher:
    """What search needs, per index generation, shared by every query: the BM25 postings, the
    embedding matrix (both possibly memory-mapped), each row's intent (a small id into
    `intent_names`) and section; and the corpus's page furniture, which the offline quoter reads.
    Chunk records are read through `fetch(rows)` only for the hits used.

    `Searcher(records, vectors)` builds one in memory from full records (tests, benches);
    `Searcher.from_arrays` is how an index is opened (index/mapped.py)."""

    def __init__(self, records: list[dict], vectors: np.ndarray | None, bm25: BM25 | None = None):
        # each chunk's intent as a small integer id: a numpy array of the names themselves would
        # be chunks x the longest name wide (1.4 GB for one 100,000-character intent)
        names = sorted({r["intent"] for r in records})
        ids = {n: i for i, n in enumerate(names)}
        keys = [(r["doc"], tuple(r["heading_path"])) for r in records]
        sections: dict[tuple, int] = {}
        anchors, repeats = Anchors(), dict[tuple, int]()
        for doc, path in keys:  # in page order: each section's heading numbered as it comes
            if (doc, path) not in sections:
                sections[(doc, path)] = len(sections)
                repeats[(doc, path)] = anchors.repeat(doc, list(path))
        self._setup(
            np.array([ids[r["intent"]] for r in records], dtype=np.int32),
            names,
            np.array([sections[k] for k in keys], dtype=np.int32),
            vectors,
            bm25 or BM25(bm25_tokens(r["search_text"]) for r in records),
            lambda rows: [
                records[r] | {"anchor": section_anchor(list(keys[r][1]), repeats[keys[r]])}
                for r in rows
            ],
            count(r for r in records if "text" in r),
        )

    @classmethod
    def from_arrays(
        cls,
        intent_ids: np.ndarray,
        intent_names: list[str],
        sections: np.ndarray,
        vectors: np.ndarray | None,
        bm25: BM25,
        fetch: Fetch,
        furniture: Furniture | None = None,
    ) -> Searcher:
        searcher = cls.__new__(cls)
        searcher._setup(
            intent_ids, intent_names, sections, vectors, bm25, fetch, furniture or Furniture()
        )
        return searcher

    def _setup(self, intent_ids, intent_names, sections, vectors, bm25, fetch, furniture) -> None:
        self.size = len(intent_ids)
        self.intent_ids = intent_ids
        self.intent_names = intent_names
        self.sections = sections
        self.vectors = vectors
        self.bm25 = bm25
        self.fetch = fetch
        self.furniture = furniture
        self.base: np.ndarray | None = None  # a scope's rows (within()); None: every row
        order = np.argsort(intent_ids, kind="stable")
        bounds = np.searchsorted(intent_ids[order], np.arange(len(intent_names) + 1))
        self.intent_rows = {
            name: order[bounds[i] : bounds[i + 1]] for i, name in enumerate(intent_names)
        }

    def within(self, rows: np.ndarray) -> Searcher:
        """The same index searched only in `rows` (a channel's scope): every search, bucket and
        vote is masked to them, as a bucket is; BM25's statistics stay the whole index's."""
        view = copy.copy(self)
        view.base = np.unique(rows).astype(np.int64)
        inside = {n: r[np.isin(r, view.base)] for n, r in self.intent_rows.items()}
        view.intent_rows = {n: r for n, r in inside.items() if r.size}
        return view

    def docs(self) -> list[str]:
        """Each row's doc path: read by the index's Records, else from the records held."""
        docs = getattr(self.fetch, "docs", None)
        return docs() if docs else [r["doc"] for r in self.fetch(list(range(self.size)))]

    def rows_for(self, intents: Iterable[str] | None) -> np.ndarray:
        if intents is None:
            return np.arange(self.size) if self.base is None else self.base
        found = [self.intent_rows[i] for i in intents if i in self.intent_rows]
        return np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)

    def search(
        self,
        query: str,
        query_vec: np.ndarray | None,
        intents: Iterable[str] | None = None,
        k: int = 10,
        mode: str = "hybrid",
        bm25_weight: float = 0.4,
        exclude: np.ndarray | None = None,
    ) -> list[Hit]:
        """Top-k chunks of the given intents (None = all), less the rows in `exclude` (calibration
        hides a question's gold sections). Without a query vector (the embedding service is down)
        the search falls back to BM25 alone."""
        rows = self.rows_for(intents)
        if exclude is not None and exclude.size:
            rows = np.setdiff1d(rows, exclude, assume_unique=True)
        if rows.size == 0:
            return []
        if query_vec is None or self.vectors is None:
            mode = "bm25"
        whole = rows.size == self.size
        # each signal is computed only when the mode uses it
        terms = [] if mode == "vector" else tokenize(query)
        bm25 = np.zeros(rows.size) if mode == "vector" else self.bm25.scores(terms)
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
            bm25_weight *= words_share(terms)
            fused = bm25_weight * minmax(bm25) + (1 - bm25_weight) * minmax(vec.astype(np.float64))
        pool = max(3 * k, 30)
        top = (
            np.argpartition(-fused, pool - 1)[:pool] if fused.size > pool else np.arange(fused.size)
        )
        # by score, ties by index order: deterministic
        top = top[np.lexsort((rows[top], -fused[top]))]
        hits = [
            Hit(
                int(r),
                float(bm25[i]),
                float(vec[i]),
                float(fused[i]),
                self.intent_names[self.intent_ids[r]],
                int(self.sections[r]),
                self.fetch,
            )
            for i, r in zip(top.tolist(), rows[top].tolist(), strict=True)
        ]
        return read_together(one_per_section(hits)[:k])


def distinct(hits: list[Hit]) -> list[Hit]:
    """One hit per text: a chunk whose text (case and spacing aside) a better-ranked hit already
    holds is the same evidence again (a section copied into other docs, a doc saved twice) and is
    left out, so that forty copies weigh as one wherever the hits are read (the answer decision's
    signals, the quotes, the passages sent to Claude). Reads the hits' records."""
    seen: set[int] = set()
    out: list[Hit] = []
    for h in hits:
        text = hash(" ".join(h.chunk["text"].lower().split()))
        if text not in seen:
            seen.add(text)
            out.append(h)
    return out


def one_per_section(hits: list[Hit]) -> list[Hit]:
    """Pieces of one split section say much the same thing: keep the best piece of each section in
    place and move the other pieces after the distinct sections, so the top results cover more
    ground."""
    seen: set[int] = set()
    first: list[Hit] = []
    later: list[Hit] = []
    for h in hits:
        (later if h.section in seen else first).append(h)
        seen.add(h.section)
    return first + later
