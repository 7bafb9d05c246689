"""The owners' loop in the audit's database, the same statements for SQLite and PostgreSQL (`mark`
is the driver's placeholder): gap topics and their state, drafts made from hand-off replies,
the questions replayed after a reindex (apart from the askers' audit), and claims that make a
message go out once across a fleet (an asker told, a weekly note, a reply offered as a draft).
Their tables are bot/state/sqlite.py's AUDIT_MIGRATIONS and bot/state/postgres/schema.py's
STATE_MIGRATIONS."""

from __future__ import annotations

import json
from collections.abc import Callable

from index.store import utc_now

# run(sql, params) -> rows: one statement in its own transaction
Run = Callable[[str, list], list[tuple]]

TOPIC_COLUMNS = (
    "id",
    "state",
    "ids",
    "doc",
    "section",
    "owner",
    "title",
    "answered_before",
    "answered_after",
    "created",
    "updated",
)
DRAFT_COLUMNS = (
    "id",
    "topic_id",
    "answer_id",
    "doc",
    "section",
    "branch",
    "commit_sha",
    "pushed",
    "patch",
    "by_user",
    "replier",
    "created",
)


def tables(serial: str) -> list[str]:
    """The loop's tables; `serial`: the database's auto-increment key type."""
    return [
        f"""CREATE TABLE IF NOT EXISTS gap_topics (
            id {serial}, state TEXT NOT NULL, ids TEXT NOT NULL, doc TEXT, section TEXT,
            owner TEXT, title TEXT, answered_before TEXT, answered_after TEXT, created TEXT,
            updated TEXT)""",
        f"""CREATE TABLE IF NOT EXISTS gap_drafts (
            id {serial}, topic_id BIGINT, answer_id BIGINT, doc TEXT, section TEXT, branch TEXT,
            commit_sha TEXT, pushed INTEGER, patch TEXT, by_user TEXT, replier TEXT,
            created TEXT)""",
        f"""CREATE TABLE IF NOT EXISTS replays (
            id {serial}, topic_id BIGINT, answer_id BIGINT, question TEXT, decision TEXT,
            cited TEXT, answered INTEGER, created TEXT)""",
        "CREATE INDEX IF NOT EXISTS replays_topic ON replays(topic_id)",
        """CREATE TABLE IF NOT EXISTS owner_claims (
            kind TEXT NOT NULL, key TEXT NOT NULL, created TEXT, PRIMARY KEY (kind, key))""",
        "ALTER TABLE handoffs ADD COLUMN posted TEXT",
    ]


class Loop:
    """The statements, over `run` with placeholder `mark` (`?` or `%s`)."""

    def __init__(self, run: Run, mark: str):
        self._run, self._m = run, mark

    def topics(self) -> list[dict]:
        rows = self._run(f"SELECT {', '.join(TOPIC_COLUMNS)} FROM gap_topics ORDER BY id", [])
        out = []
        for row in rows:
            t = dict(zip(TOPIC_COLUMNS, row, strict=True))
            t["ids"] = json.loads(t["ids"] or "[]")
            t["before"], t["after"] = t["answered_before"] or "", t["answered_after"] or ""
            out.append(t)
        return out

    def save_topic(self, topic: dict) -> int:
        """Insert `topic` ({"state", "ids", "doc", "section", "owner", "title", and "id" to update
        that one}), its figures (`before`, `after`) kept when not given; its id."""
        m, now = self._m, utc_now()
        values = [
            topic["state"],
            json.dumps(sorted(set(topic["ids"]))),
            topic.get("doc") or "",
            topic.get("section") or "",
            topic.get("owner") or "",
            topic.get("title") or "",
        ]
        figures = [topic.get("before"), topic.get("after")]
        if topic.get("id"):  # what is not given stays as it is
            given = [topic.get(k) for k in ("doc", "section", "owner", "title")]
            self._run(
                f"UPDATE gap_topics SET state = {m}, ids = {m}, doc = COALESCE({m}, doc),"
                f" section = COALESCE({m}, section), owner = COALESCE({m}, owner),"
                f" title = COALESCE({m}, title), answered_before = COALESCE({m}, answered_before),"
                f" answered_after = COALESCE({m}, answered_after), updated = {m} WHERE id = {m}",
                [*values[:2], *given, *figures, now, topic["id"]],
            )
            return int(topic["id"])
        rows = self._run(
            "INSERT INTO gap_topics (state, ids, doc, section, owner, title, answered_before,"
            f" answered_after, created, updated) VALUES ({', '.join([m] * 10)}) RETURNING id",
            [*values, *figures, now, now],
        )
        return int(rows[0][0])

    def set_state(self, topic_id: int, state: str) -> None:
        self._run(
            f"UPDATE gap_topics SET state = {self._m}, updated = {self._m} WHERE id = {self._m}",
            [state, utc_now(), topic_id],
        )

    def record_draft(self, draft: dict) -> int:
        columns = DRAFT_COLUMNS[1:-1]
        rows = self._run(
            f"INSERT INTO gap_drafts ({', '.join(columns)}, created)"
            f" VALUES ({', '.join([self._m] * (len(columns) + 1))}) RETURNING id",
            [draft.get(c) for c in columns] + [utc_now()],
        )
        return int(rows[0][0])

    def drafts(self) -> list[dict]:
        rows = self._run(f"SELECT {', '.join(DRAFT_COLUMNS)} FROM gap_drafts ORDER BY id DESC", [])
        return [dict(zip(DRAFT_COLUMNS, r, strict=True)) for r in rows]

    def record_replays(self, topic_id: int, replays: list[dict]) -> None:
        m = self._m
        for r in replays:
            self._run(
                "INSERT INTO replays (topic_id, answer_id, question, decision, cited, answered,"
                f" created) VALUES ({', '.join([m] * 7)})",
                [
                    topic_id,
                    r["answer_id"],
                    r["question"],
                    r["decision"],
                    json.dumps(r["cited"]),
                    int(r["answered"]),
                    utc_now(),
                ],
            )

    def replays(self, topic_id: int) -> list[dict]:
        rows = self._run(
            "SELECT answer_id, question, decision, cited, answered, created FROM replays"
            f" WHERE topic_id = {self._m} ORDER BY id",
            [topic_id],
        )
        keys = ("answer_id", "question", "decision", "cited", "answered", "created")
        return [dict(zip(keys, r, strict=True)) | {"cited": json.loads(r[3] or "[]")} for r in rows]

    def claim(self, kind: str, key: str) -> bool:
        """True for the first claim of (kind, key), across every replica."""
        rows = self._run(
            f"INSERT INTO owner_claims (kind, key, created) VALUES ({self._m}, {self._m},"
            f" {self._m}) ON CONFLICT (kind, key) DO NOTHING RETURNING kind",
            [kind, key, utc_now()],
        )
        return bool(rows)

    def release(self, kind: str, key: str) -> None:
        """Forget a claim whose message could not be sent, so it is tried again."""
        self._run(
            f"DELETE FROM owner_claims WHERE kind = {self._m} AND key = {self._m}", [kind, key]
        )

    def note_posted(self, answer_id: int, channel: str, ts: str) -> None:
        """Where a hand-off's message was posted (an owners' channel), so replies under it count."""
        self._run(
            f"UPDATE handoffs SET posted = {self._m} WHERE answer_id = {self._m}",
            [f"{channel}/{ts}", answer_id],
        )

    def handoff_in_thread(self, channel: str, thread_ts: str) -> dict | None:
        """The hand-off whose asker's thread, or whose message's thread in the owners' channel,
        this is: {"answer_id", "owner", "target", "user"}; None."""
        m = self._m
        rows = self._run(
            'SELECT h.answer_id, h.owner, h.target, a."user" FROM handoffs h'
            " JOIN answers a ON a.id = h.answer_id"
            f" WHERE (a.channel = {m} AND a.thread_ts = {m}) OR h.posted = {m}"
            " ORDER BY h.answer_id DESC LIMIT 1",
            [channel, thread_ts, f"{channel}/{thread_ts}"],
        )
        if not rows:
            return None
        return dict(zip(("answer_id", "owner", "target", "user"), rows[0], strict=True))
