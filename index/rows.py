"""The rows an index run writes (index/indexer.py): its docs and chunks as stored, and the intent
rows they give (counts, and intents.yaml's descriptions). The run writes them in its commit and,
before it, into temporary tables to build the next generation's search arrays from: one
definition for both."""

from __future__ import annotations

import hashlib
import json

import sqlite_utils


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def doc_rows(fresh, dates: dict) -> list[dict]:
    return [
        {
            "path": d.path,
            "title": d.title,
            "intent": d.intent,
            "subcategory": d.subcategory,
            "related_intents": json.dumps(d.related_intents),
            "version": d.version,
            "url": d.url,
            "hash": d.hash,
            "size": len(d.text),
            "owner": d.owner,
            "updated": dates.get(d.path),
            "reviewed": d.reviewed,
            "review_every": d.review_every,
            "watches": json.dumps(d.watches) if d.watches else None,
        }
        for d, _ in fresh
    ]


def chunk_rows(fresh):
    return (
        {
            "id": c.id,
            "doc": c.doc,
            "ord": c.ord,
            "heading_path": json.dumps(c.heading_path),
            "text": c.text,
            "search_text": c.search_text,
            "text_hash": text_hash(c.search_text),
            "start": c.start,
            "end": c.end,
        }
        for _, chunks in fresh
        for c in chunks
    )


INTENT_COLUMNS = ("name", "description", "examples", "docs", "chunks", "owner")
INTENT_ROWS = f"SELECT {', '.join(INTENT_COLUMNS)} FROM intents ORDER BY name"


def intent_rows(db, intents_info, before: list[tuple]) -> list[tuple]:
    """The intent rows (INTENT_ROWS) the index holds after a run: every intent that docs use or
    intents.yaml describes, with doc and chunk counts. `intents_info` None (intents.yaml
    unreadable this run) keeps the descriptions already stored (`before`)."""
    counts = {
        name: (docs, chunks)
        for name, docs, chunks in db.execute(
            """SELECT d.intent, count(DISTINCT d.path), count(c.id) FROM docs d
               LEFT JOIN chunks c ON c.doc = d.path GROUP BY d.intent"""
        )
    }
    if intents_info is None:
        described = {name: (desc, ex, owner) for name, desc, ex, _, _, owner in before}
    else:
        described = {
            name: (i.description, json.dumps(i.examples), i.owner)
            for name, i in intents_info.items()
        }
    return [
        (
            name,
            *described.get(name, ("", "[]", None))[:2],
            *counts.get(name, (0, 0)),
            described.get(name, ("", "[]", None))[2],
        )
        for name in sorted(set(counts) | set(described))
    ]


def refresh_intents(db, intents_info) -> bool:
    """Write the intent rows (`intent_rows`); returns whether they changed."""
    before = db.execute(INTENT_ROWS).fetchall()
    rows = intent_rows(db, intents_info, before)
    if rows != before:
        db.execute("DELETE FROM intents")
        db["intents"].insert_all(
            (
                dict(
                    zip(
                        ("name", "description", "examples", "docs", "chunks", "owner"),
                        r,
                        strict=True,
                    )
                )
                for r in rows
            ),
            pk="name",
        )
    return rows != before


def unknown_related(db: sqlite_utils.Database) -> list[dict]:
    """A warning for each `related_intents` name that no doc uses and intents.yaml does not
    describe: most likely a typo (the router ignores it)."""
    known = {name for (name,) in db.execute("SELECT name FROM intents")}
    warnings = []
    for path, related in db.execute(
        "SELECT path, related_intents FROM docs WHERE related_intents NOT IN ('[]', '')"
        " ORDER BY path"
    ):
        for name in json.loads(related or "[]"):
            if name not in known:
                warnings.append({"path": path, "warning": f"related intent {name!r} is unknown"})
    return warnings
