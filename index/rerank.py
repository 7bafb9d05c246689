"""Reranking the fused candidates with Voyage's reranker (a cross-encoder reading the question and
each chunk together), when a Voyage key is set. Offline there is no reranker and the fused order
stands; a failed call falls back to the fused order with a note, as a failed embedding does."""

from __future__ import annotations

import logging

from .retries import voyage_retrying
from .search import Hit

log = logging.getLogger(__name__)


class RerankError(Exception):
    """The reranker failed; the message is fit to show a user."""


class VoyageReranker:
    """`rerank-3` (a setting: Voyage's rerankers, docs.voyageai.com/docs/reranker) over the top
    `depth` fused chunks (their title, headings and text, as BM25 sees them)."""

    def __init__(
        self,
        api_key: str,
        model: str = "rerank-3",
        depth: int = 40,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
    ):
        import voyageai

        self.model = model
        self.depth = depth
        self.name = f"voyage:{model}"
        self.max_retries = max_retries
        # retried here (retries.py: backoff with jitter or Retry-After), not by the client, whose
        # retries neither cover 5xx nor read Retry-After; waits are short: a question is waiting
        self.client = voyageai.Client(
            api_key=api_key, base_url=base_url or None, timeout=timeout, max_retries=0
        )

    def scores(self, question: str, texts: list[str]) -> list[float]:
        """Relevance of each text to the question, in the texts' order."""
        import voyageai.error as verr

        retrying = voyage_retrying(self.max_retries, max_backoff=2.0, max_retry_after=2.0)
        try:
            result = retrying(
                lambda: self.client.rerank(question, texts, model=self.model, truncation=True)
            )
        except verr.VoyageError as e:
            raise RerankError(f"{type(e).__name__}") from e
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as e:
            # the client library reading a response out of shape
            raise RerankError(f"unusable answer: {type(e).__name__}") from e
        out: list[float | None] = [None] * len(texts)
        for r in getattr(result, "results", None) or []:
            index, score = getattr(r, "index", None), getattr(r, "relevance_score", None)
            if not isinstance(index, int) or not 0 <= index < len(texts):
                raise RerankError(f"unusable answer: a result for document {index!r}")
            if not isinstance(score, (int, float)):
                raise RerankError(f"unusable answer: a relevance score {score!r}")
            out[index] = float(score)
        if any(s is None for s in out):
            raise RerankError("the reranker did not score every chunk")
        return [float(s) for s in out if s is not None]

    def rerank(self, question: str, hits: list[Hit]) -> tuple[list[Hit], str]:
        """(hits, note): the top `depth` hits reordered by the reranker's relevance (its score
        becomes the hit's `score`), the rest after them; on failure the fused order and a note."""
        head, tail = hits[: self.depth], hits[self.depth :]
        if len(head) < 2:
            return hits, ""
        try:
            relevance = self.scores(question, [h.chunk["search_text"] for h in head])
        except RerankError as e:
            log.warning("reranking failed (%s); fused order kept", e)
            return hits, f"reranking unavailable ({e}); results in fused order"
        order = sorted(range(len(head)), key=lambda i: -relevance[i])  # stable: ties keep fusion
        return [head[i].with_score(relevance[i]) for i in order] + tail, ""
