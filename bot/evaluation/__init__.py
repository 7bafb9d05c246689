"""`fieldguide eval`: retrieval scoring (`retrieval.py`) and the whole ask path (`answers.py`)."""

# reranked: the routed list reordered by the reranker (needs a Voyage key), what the bot serves
# then. Here, not in retrieval.py, so that the CLI names the modes without loading the eval code.
ALL_MODES = ("bm25", "vector", "hybrid", "rrf", "routed", "reranked", "oracle")
