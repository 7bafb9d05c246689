"""The reader at run time: how far each of a few sections says what a question asks, read from the
two together.

The trained cross-encoder (`reader-int8.onnx` + `tokenizer.json` beside this file, written by
router/reader/train.py) reads the question and one section as one BERT pair (the question cut to
QUESTION_TOKENS tokens, the pair to PAIR_TOKENS) and gives one logit, above 0 when the section
answers. Absent weights are no error: the decision then reads today's signals alone
(`decide.model_for`). Loaded once per process, lazily and under a lock; it reads at most READ_K
sections per question, so a question's cost is bounded whatever the docs hold.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
WEIGHTS, TOKENIZER = HERE / "reader-int8.onnx", HERE / "tokenizer.json"
QUESTION_TOKENS, PAIR_TOKENS = 64, 256  # the trained reader's contract (train.py)
# sections read per question: the top of the search (how often the gold section is among them is
# measured per corpus: bench/RESULTS.md, section reader)
READ_K = 5


class Reader:
    """The trained cross-encoder on onnxruntime (module doc)."""

    def __init__(self, weights: Path = WEIGHTS, tokenizer: Path = TOKENIZER, threads: int = 1):
        self.weights, self.tokenizer_file, self.threads = weights, tokenizer, threads
        self._lock = threading.Lock()
        self._loaded: tuple | None = None

    def _load(self) -> tuple:
        with self._lock:
            if self._loaded is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                tok = Tokenizer.from_file(str(self.tokenizer_file))
                tok.no_padding()
                tok.enable_truncation(max_length=PAIR_TOKENS, strategy="only_second")
                question = Tokenizer.from_file(str(self.tokenizer_file))
                question.no_truncation()
                question.no_padding()
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = self.threads
                opts.inter_op_num_threads = 1
                session = ort.InferenceSession(
                    str(self.weights), opts, providers=["CPUExecutionProvider"]
                )
                self._loaded = (session, tok, question)
            return self._loaded

    def score(self, question: str, sections: Sequence[str]) -> list[float]:
        """One logit per section, in order (above 0: the section answers the question)."""
        if not sections:
            return []
        session, tok, qtok = self._load()
        q = qtok.encode(question, add_special_tokens=False)
        if len(q.ids) > QUESTION_TOKENS:  # the question cut at its 64th token
            question = question[: q.offsets[QUESTION_TOKENS - 1][1]]
        # a long section is cut before tokenising: the tokenizer truncates only after reading all
        encodings = tok.encode_batch([(question, s[: PAIR_TOKENS * 8]) for s in sections])
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


_READER: Reader | None = None
_READER_LOCK = threading.Lock()


def trained() -> Reader | None:
    """The trained reader when its weights ship beside this file, one per process."""
    global _READER
    if not (WEIGHTS.is_file() and TOKENIZER.is_file()):
        return None
    with _READER_LOCK:
        if _READER is None:
            _READER = Reader()
        return _READER
