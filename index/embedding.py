"""What every embedder shares: the `Embedder` interface (a `name` recorded in the index,
`embed_documents` and `embed_queries` for indexing, `embed_query` and `embed_now` at question
time, all returning L2-normalised float32 rows), its error and
the normalisation. The embedders themselves are in embedders.py (Voyage, torch) and
onnx_model.py (the local default), which both build on this module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

Progress = Callable[[int], None]  # called with the number of texts just embedded


class EmbeddingError(Exception):
    """The embedding service failed after its retries; the message is fit to show a user."""


class Embedder(Protocol):
    name: str

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Questions embedded as queries, patiently (indexing: intents.yaml's examples)."""
        ...

    def embed_now(self, texts: list[str]) -> np.ndarray:
        """A few passages at question time: one short try (the offline extraction's units)."""
        ...


def normalise(rows) -> np.ndarray:
    """Rows as float32, each scaled to unit length (a zero row stays zero)."""
    m = np.asarray(rows, dtype=np.float32)
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1, norms)


# A text is cut to this many characters per token the model reads before it is tokenised (or
# sent): ordinary text averages 3-5 characters a token (code fewer), so the cut lies past what
# the model would read anyway and changes no embedding (tests/test_bad_input.py checks the example
# docs), while a 10 MB chunk costs no more than its first few thousand characters.
CHARS_PER_TOKEN = 16


def fit_text(text: str, max_tokens: int) -> str:
    """`text` cut to what a model reading `max_tokens` tokens can use (CHARS_PER_TOKEN)."""
    return text[: max_tokens * CHARS_PER_TOKEN]
