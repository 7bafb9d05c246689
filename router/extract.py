"""Claude's extraction: the verbatim passages of the top chunks that answer the question, through a
structured output (`output_config.format`: no forced tool call, which the 5.5 models refuse); each
passage checked against its chunk. The offline counterpart is
router/offline.py `extract`."""

from __future__ import annotations

import logging

from index.search import Hit
from prompts import render

from .answer import Passage, occurs_in
from .citations import label
from .claude import MessagesClient, Unusable
from .messages import data, structured, unescaped

log = logging.getLogger(__name__)

SCHEMA = {
    "type": "object",
    "properties": {
        "passages": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"chunk": {"type": "integer"}, "text": {"type": "string"}},
                "required": ["chunk", "text"],
            },
        },
        "nothing_relevant": {"type": "boolean"},
    },
    "required": ["passages", "nothing_relevant"],
}


def extract(
    client: MessagesClient, model: str, question: str, hits: list[Hit]
) -> tuple[list[Passage], int, dict]:
    """(passages found verbatim in their chunks, how many were dropped, token usage)."""
    chunks = "\n\n".join(
        data(
            "chunk",
            f"\n{h.chunk['text']}\n",
            number=i,
            title=label(h.chunk["title"], h.chunk["heading_path"]),
        )
        for i, h in enumerate(hits, 1)
    )
    reply, usage = structured(
        client,
        model,
        render("extract"),
        f"{chunks}\n\n{data('question', question)}",
        SCHEMA,
        4000,
        "extract",
    )
    items = reply.get("passages")
    if not isinstance(items, list):
        raise Unusable("no passages in the structured reply")
    passages, dropped = [], 0
    for item in items:
        try:
            n = int(item["chunk"])
            if not 1 <= n <= len(hits):
                raise IndexError(n)
            hit, text = hits[n - 1], unescaped(str(item["text"]))
        except (KeyError, TypeError, ValueError, IndexError):
            dropped += 1
            continue
        if occurs_in(text, hit.chunk["text"]):
            passages.append(Passage(hit.chunk["id"], text.strip(), hit.score))
        else:
            dropped += 1
            log.info("dropped a passage not found in chunk %s: %r", hit.chunk["id"], text[:80])
    return passages, dropped, usage
