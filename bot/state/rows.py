"""What the SQLite and PostgreSQL states share: an answer as an audit row, a stored row as listed,
and the WHERE clause of a listing."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from index.store import utc_now

USAGE_BATCH = 500  # audit rows read at a time by `audit --stats`


def answer_row(ans: Any, context: dict) -> dict:
    """The audit row of an answer (a router.pipeline.Answer) with its Slack context."""
    return {
        "created": utc_now(),
        "question": ans.question,
        "condensed": ans.condensed,
        "decision": ans.decision,
        "intents": json.dumps(ans.intents),
        "routing": json.dumps(ans.trace.route),
        "hits": json.dumps(
            [
                {
                    "id": h["id"],
                    "doc": h["doc"],
                    "section": h["heading_path"][-1:] and h["heading_path"][-1],
                    "bm25": round(h["bm25"], 4),
                    "vector": round(h["vector"], 4),
                    "score": round(h["score"], 4),
                }
                for h in ans.trace.hits
            ]
        ),
        "passages": json.dumps([asdict(p) for p in ans.passages]),
        "dropped_passages": ans.trace.dropped_passages,
        "models": json.dumps(ans.trace.models),
        "prompts": json.dumps(ans.trace.prompts),
        "answer": ans.text,
        "citations": json.dumps([asdict(c) for c in ans.citations]),
        "evidence": json.dumps(ans.trace.evidence),
        "offline": int(ans.trace.offline),
        "notes": json.dumps(ans.trace.notes),
        "timings_ms": json.dumps(ans.trace.timings_ms),
        "usage": json.dumps(ans.trace.usage),
        "channel": context.get("channel"),
        "user": context.get("user"),
        "thread_ts": context.get("thread_ts"),
        "message_ts": context.get("message_ts"),
    }


JSON_COLUMNS = (
    "intents",
    "routing",
    "hits",
    "passages",
    "models",
    "prompts",
    "citations",
    "evidence",
    "notes",
    "timings_ms",
    "usage",
    "feedback",
)


def decode_row(r: dict) -> dict:
    """An audit row as stored → as listed (JSON columns parsed, offline a bool)."""
    for key in JSON_COLUMNS:
        r[key] = json.loads(r[key]) if r[key] else ({} if key == "feedback" else None)
    r["offline"] = bool(r["offline"])
    return r


def answer_filter(
    since: str | None, decision: str | None, mark: str, extra: tuple[str, list] | None = None
) -> tuple[str, list]:
    """The WHERE clause (and its arguments) of an audit listing; `mark`: the driver's placeholder
    (`?` for SQLite, `%s` for psycopg); `extra`: one more condition and its arguments."""
    where, args = [extra[0]] if extra else [], list(extra[1]) if extra else []
    if since:
        where.append(f"a.created >= {mark}")
        args.append(since)
    if decision:
        where.append(f"a.decision = {mark}")
        args.append(decision.upper())
    return ("WHERE " + " AND ".join(where) if where else ""), args
