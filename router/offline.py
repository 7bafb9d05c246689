"""The offline extract and answer steps: the best blocks of the top chunks, quoted with their
sources. Used when no Claude key is set and when a Claude step fails."""

from __future__ import annotations

import numpy as np

from index.chunker import context_header, split_blocks
from index.embedders import Embedder, EmbeddingError
from index.search import BM25, Hit, tokenize

from .answer import Answer, Citation, Passage, Source, occurs_in, squash

# offline extraction: a block's score = CHUNK_WEIGHT * its chunk's fused score + the rest from the
# block itself (0.3 and 0.0 put a gold-section passage first less often on claude-docs: 0.86, 0.83
# vs 0.89)
CHUNK_WEIGHT = 0.5


def extract(
    question: str, query_vec: np.ndarray | None, hits: list[Hit], bm25: BM25, embedder: Embedder
) -> list[Passage]:
    """The blocks of the top chunks that score best against the question, by the retrieval's own
    signals: the chunk's fused score, and the block's idf-weighted term coverage and cosine
    similarity, each block read with its chunk's title and heading path (a block under
    "#### TW-1429" is about TW-1429 even when its sentences don't repeat the code)."""
    q_tokens = tokenize(question)
    blocks = [(h, b) for h in hits for b in split_blocks(h.chunk["text"])]
    if not blocks:
        return []
    texts = [
        f"{context_header(h.chunk['title'], h.chunk['heading_path'])}\n\n{b}" for h, b in blocks
    ]
    block_scores = np.array([bm25.coverage(q_tokens, tokenize(t)) for t in texts])
    if query_vec is not None:
        try:
            sims = embedder.embed_documents(texts) @ query_vec
            block_scores = 0.4 * block_scores + 0.6 * np.clip(sims, 0, None)
        except EmbeddingError:  # the embedding service failing here only costs the vector half
            pass
    scores = (
        CHUNK_WEIGHT * np.array([h.score for h, _ in blocks]) + (1 - CHUNK_WEIGHT) * block_scores
    )
    best = float(scores.max())
    chosen: list[int] = []
    chars, seen = 0, set()
    for i in np.argsort(-scores, kind="stable"):
        h, b = blocks[i]
        if scores[i] < 0.85 * best or len(chosen) == 4 or (chosen and chars + len(b) > 1800):
            break
        if squash(b) in seen:  # overlapping pieces of a split section repeat a block
            continue
        seen.add(squash(b))
        chosen.append(i)
        chars += len(b)
    return [
        Passage(blocks[i][0].chunk["id"], blocks[i][1].strip(), float(scores[i])) for i in chosen
    ]


def compose(passages: list[Passage], by_chunk: dict[str, Source], ans: Answer) -> str:
    """The passages quoted, each with its numbered source; each quote is a citation of its
    chunk."""
    chunk_text = {h["id"]: h["text"] for h in ans.hits}
    out = []
    for p in passages:
        src = by_chunk[p.chunk_id]
        ans.citations.append(
            Citation(
                src.n,
                src.doc,
                src.section,
                src.url,
                p.text,
                occurs_in(p.text, chunk_text[p.chunk_id]),
            )
        )
        quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in p.text.split("\n"))
        out.append(f"{quoted}\n— {src.label} [{src.n}]")
    return "From the docs:\n\n" + "\n\n".join(out)
