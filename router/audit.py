"""The audit trail: every answer, with what led to it, and the feedback users gave on it."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from datetime import UTC, datetime

# one writer at a time on a connection shared by Slack's worker threads
_write_lock = threading.Lock()

AUDIT_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT, question TEXT, condensed TEXT,
    decision TEXT, intents TEXT, routing TEXT, hits TEXT, passages TEXT, dropped_passages INTEGER,
    models TEXT, prompts TEXT, answer TEXT, citations TEXT, evidence TEXT, offline INTEGER,
    notes TEXT, timings_ms TEXT, usage TEXT, channel TEXT, user TEXT, thread_ts TEXT,
    message_ts TEXT);
CREATE INDEX IF NOT EXISTS answers_created ON answers(created);
CREATE INDEX IF NOT EXISTS answers_thread ON answers(channel, thread_ts);
CREATE TABLE IF NOT EXISTS feedback (
    answer_id INTEGER, user TEXT, value TEXT, created TEXT, PRIMARY KEY (answer_id, user));
"""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def ensure_tables(db) -> None:
    """Create the tables; the Pipeline does it once when it opens its audit connection, so the
    per-answer writes below don't repeat it."""
    db.conn.executescript(AUDIT_SCHEMA)


def record_answer(db, ans, context: dict) -> int:
    row = {
        "created": _now(),
        "question": ans.question,
        "condensed": ans.condensed,
        "decision": ans.decision,
        "intents": json.dumps(ans.intents),
        "routing": json.dumps(ans.route),
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
                for h in ans.hits
            ]
        ),
        "passages": json.dumps([asdict(p) for p in ans.passages]),
        "dropped_passages": ans.dropped_passages,
        "models": json.dumps(ans.models),
        "prompts": json.dumps(ans.prompts),
        "answer": ans.text,
        "citations": json.dumps([asdict(c) for c in ans.citations]),
        "evidence": json.dumps(ans.evidence),
        "offline": int(ans.offline),
        "notes": json.dumps(ans.notes),
        "timings_ms": json.dumps(ans.timings_ms),
        "usage": json.dumps(ans.usage),
        "channel": context.get("channel"),
        "user": context.get("user"),
        "thread_ts": context.get("thread_ts"),
        "message_ts": context.get("message_ts"),
    }
    with _write_lock, db.atomic():
        return db["answers"].insert(row).last_pk


def record_feedback(db, answer_id: int, user: str, value: str) -> None:
    """Last choice per user and answer wins."""
    with _write_lock, db.atomic():
        db["feedback"].upsert(
            {"answer_id": answer_id, "user": user, "value": value, "created": _now()},
            pk=("answer_id", "user"),
        )


def list_answers(
    db, since: str | None = None, decision: str | None = None, limit: int = 50
) -> list[dict]:
    ensure_tables(db)
    where, args = [], []
    if since:
        where.append("a.created >= ?")
        args.append(since)
    if decision:
        where.append("a.decision = ?")
        args.append(decision.upper())
    where_sql = "WHERE " + " AND ".join(where) if where else ""
    sql = f"""SELECT a.*, (SELECT json_group_object(f.user, f.value) FROM feedback f
                           WHERE f.answer_id = a.id) AS feedback
              FROM answers a {where_sql} ORDER BY a.id DESC LIMIT ?"""
    rows = []
    for r in db.query(sql, [*args, limit]):
        for key in (
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
        ):
            r[key] = json.loads(r[key]) if r[key] else ({} if key == "feedback" else None)
        r["offline"] = bool(r["offline"])
        rows.append(r)
    return rows
