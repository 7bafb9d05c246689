"""Voyage's API as the real voyageai client meets it: /embeddings (deterministic vectors), rate
limits, /rerank. Handlers for a StubServer (server.py)."""

from __future__ import annotations

import hashlib
import threading

from .server import Request

INPUT_TYPES = (None, "query", "document")  # the embeddings page's input_type values


def voyage_embeddings(dim: int = 8):
    """A Voyage /embeddings handler: deterministic vectors from each text's hash (and its
    input_type: a query and a document differ, as Voyage's prompts make them); 400 for what the
    API rejects (no model, an input_type it does not know, no texts, more than 1,000)."""

    def handler(req: Request):
        body = req.json
        texts = body.get("input")
        kind = body.get("input_type")
        if not body.get("model") or kind not in INPUT_TYPES:
            return 400, {"detail": "model is required; input_type is null, query or document"}
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or len(texts) > 1000:
            return 400, {"detail": "input must be a list of 1 to 1,000 texts"}
        data = []
        for i, t in enumerate(texts):
            h = hashlib.sha256(f"{kind}\n{t}".encode() if kind == "query" else t.encode()).digest()
            data.append({"embedding": [b / 255 - 0.5 for b in h[:dim]], "index": i})
        return 200, {"data": data, "usage": {"total_tokens": sum(len(t.split()) for t in texts)}}

    return handler


def voyage_rate_limited(seconds: int = 0):
    """Voyage's 429, which carries Retry-After as the real service's does (seconds; 0 by default
    so tests don't wait)."""
    return 429, {"detail": "rate limit exceeded, please retry later"}, {"retry-after": str(seconds)}


def voyage_rerank(prefer: str = ""):
    """A Voyage /rerank handler shaped like the real one: `data` sorted by `relevance_score` (in
    [0, 1]) best first, each with its document's `index`, cut to `top_k`; 400 on a request the API
    rejects. Relevance is the share of the query's words a document holds, and a document holding
    `prefer` scores 1 (a test's way to say which chunk the reranker likes)."""

    def handler(req: Request):
        body = req.json
        docs, query = body.get("documents"), body.get("query")
        if not isinstance(query, str) or not query or not body.get("model"):
            return 400, {"detail": "query and model are required"}
        if not isinstance(docs, list) or not docs or len(docs) > 1000:
            return 400, {"detail": "documents must be a list of 1 to 1,000 strings"}
        words = set(query.lower().split())
        scores = [
            1.0
            if prefer and prefer in d
            else round(len(words & set(d.lower().split())) / (len(words) + 1), 4)
            for d in docs
        ]
        order = sorted(range(len(docs)), key=lambda i: -scores[i])[: body.get("top_k") or None]
        data = [{"index": i, "relevance_score": scores[i]} for i in order]
        tokens = sum(len(d.split()) for d in docs) + len(docs) * len(query.split())
        return 200, {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"total_tokens": tokens},
        }

    return handler


def voyage_hanging(release: threading.Event, seconds: float = 60.0):
    """A Voyage endpoint that accepts the connection and answers nothing until `release` is set
    (or `seconds` pass)."""

    def handler(req: Request):
        release.wait(seconds)
        return 503, {"detail": "service unavailable"}

    return handler
