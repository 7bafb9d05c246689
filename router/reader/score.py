"""The runtime reader: how far each of a few sections says what a question asks.

Two forms behind one call, `Reader.score(question, sections, idf) -> list[float]`:

- `CrossReader`: the trained cross-encoder (`reader-int8.onnx` + `tokenizer.json` beside this file,
  written by router/reader/train.py): the question and a section as one BERT pair (the question
  cut to QUESTION_TOKENS tokens, the pair to PAIR_TOKENS), one logit each, higher = the section
  answers. Absent weights are no error: `reader_for` then gives the late-interaction reader.
- `LateReader`: late interaction over the local embedder's own MiniLM token embeddings (no
  extra weights): each asked term of the question (its content words, read by
  `reading.read(...).asking`) matched to its closest token of the section, the cosines averaged
  weighted by each term's idf in the docs (MaxSim, ColBERT's form; Khattab & Zaharia 2020). A
  declined feature request and a how-to sit as close to the docs as a whole; term by term, the
  request's own terms find nothing that says them.

Each is loaded once per process, lazily and under a lock, and reads at most READ_K sections per
question: the cost per question is bounded whatever the docs.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from index.search import STOPWORDS

HERE = Path(__file__).parent
WEIGHTS, TOKENIZER = HERE / "reader-int8.onnx", HERE / "tokenizer.json"
QUESTION_TOKENS, PAIR_TOKENS = 64, 256  # the trained reader's contract (train.py)
# sections read per question: the top of the search (recall of the gold section within them is
# measured per corpus: bench/RESULTS.md, section calibration)
READ_K = 5
SECTIONS_KEPT = 512
ASKED_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")

Idf = Callable[[str], float]  # a word's idf in the docs, 0-1 (1: a word the docs never use)


class Reader(Protocol):
    name: str

    def score(self, question: str, sections: Sequence[str], idf: Idf) -> list[float]: ...


class LateReader:
    """MaxSim of the question's asked terms over a section's token embeddings (module doc)."""

    name = "late"

    def __init__(self, embedder) -> None:
        self.embedder = embedder  # an index.onnx_model.OnnxEmbedder (token_vectors)
        # sections read lately (a section is read again by the next question on its topic),
        # float16, at most SECTIONS_KEPT of them (~100 KB each)
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def _sections(self, sections: Sequence[str]) -> list[np.ndarray]:
        with self._lock:
            kept = {s: self._kept[s] for s in sections if s in self._kept}
        new = [s for s in dict.fromkeys(sections) if s not in kept]
        if new:
            for s, (v, _) in zip(new, self.embedder.token_vectors(new), strict=True):
                kept[s] = v.astype(np.float16)
            with self._lock:
                for s in new:
                    self._kept[s] = kept[s]
                while len(self._kept) > SECTIONS_KEPT:
                    self._kept.popitem(last=False)
        return [kept[s].astype(np.float32) for s in sections]

    def score(self, question: str, sections: Sequence[str], idf: Idf) -> list[float]:
        if not sections:
            return []
        from router import reading

        asked = reading.read(question).asking or question
        qv, offsets = self.embedder.token_vectors([asked])[0]
        weights = np.zeros(len(offsets), dtype=np.float32)
        for m in ASKED_WORD.finditer(asked):
            word = m.group().lower()
            if word in STOPWORDS or len(word) < 3:
                continue
            inside = [i for i, (s, e) in enumerate(offsets) if s >= m.start() and e <= m.end()]
            for i in inside:  # a word's pieces share its weight
                weights[i] = idf(word) / len(inside)
        if not weights.any():
            return [0.0] * len(sections)
        out = []
        for sv in self._sections(sections):
            best = (qv @ sv.T).max(axis=1) if len(sv) else np.zeros(len(qv))
            out.append(float((weights * best).sum() / weights.sum()))
        return out


class CrossReader:
    """The trained cross-encoder (module doc), on onnxruntime."""

    name = "cross"

    def __init__(self, weights: Path = WEIGHTS, tokenizer: Path = TOKENIZER, threads: int = 1):
        self.weights, self.tokenizer_file, self.threads = weights, tokenizer, threads
        self._lock = threading.Lock()
        self._loaded: tuple | None = None

    def _load(self):
        with self._lock:
            if self._loaded is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                tok = Tokenizer.from_file(str(self.tokenizer_file))
                tok.no_padding()
                tok.enable_truncation(max_length=PAIR_TOKENS, strategy="only_second")
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = self.threads
                opts.inter_op_num_threads = 1
                session = ort.InferenceSession(
                    str(self.weights), opts, providers=["CPUExecutionProvider"]
                )
                self._loaded = (session, tok)
            return self._loaded

    def score(self, question: str, sections: Sequence[str], idf: Idf) -> list[float]:
        if not sections:
            return []
        session, tok = self._load()
        q = tok.encode(question, add_special_tokens=False)
        if len(q.ids) > QUESTION_TOKENS:  # the question cut at its 64th token
            question = question[: q.offsets[QUESTION_TOKENS - 1][1]]
        encodings = tok.encode_batch([(question, s) for s in sections])
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask, types = np.zeros_like(ids), np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n], mask[row, :n], types[row, :n] = e.ids, 1, e.type_ids
        logits = session.run(
            ["logits"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )[0]
        return [float(x) for x in np.asarray(logits).reshape(len(sections), -1)[:, 0]]


_CROSS: CrossReader | None = None
_CROSS_LOCK = threading.Lock()


def trained() -> CrossReader | None:
    """The trained reader when its weights ship beside this file, one per process."""
    global _CROSS
    if not (WEIGHTS.is_file() and TOKENIZER.is_file()):
        return None
    with _CROSS_LOCK:
        if _CROSS is None:
            _CROSS = CrossReader()
        return _CROSS


def reader_for(embedder, form: str) -> Reader | None:
    """The reader of this form ("cross": the trained one, "late": late interaction over the
    embedder's tokens), or None when it cannot run here (no trained weights; an embedder without
    token vectors, such as Voyage's): the decision then reads today's signals alone."""
    if form == "cross":
        return trained()
    if form == "late" and hasattr(embedder, "token_vectors"):
        return LateReader(embedder)
    return None
