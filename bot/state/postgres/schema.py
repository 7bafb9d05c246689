"""The state's tables in PostgreSQL (the audit trail, event claims, rate windows, hand-offs, what
users are looking at), as
SQLite's are bot/state/sqlite.py's: their migrations, merged with the index's (index/pg.py) into
the fleet's versions. `upgrade` is `fieldguide db upgrade`."""

from __future__ import annotations

from index import pg

from ..loop import tables

# Append only: version n's statements run with the index's version n (index.pg.merged).
STATE_MIGRATIONS: dict[int, str] = {
    # 1: the audit trail, event claims and per-user rate windows
    1: """
    CREATE TABLE answers (
        id BIGSERIAL PRIMARY KEY, created TEXT, question TEXT, condensed TEXT, decision TEXT,
        intents TEXT, routing TEXT, hits TEXT, passages TEXT, dropped_passages INTEGER,
        models TEXT, prompts TEXT, answer TEXT, citations TEXT, evidence TEXT, offline INTEGER,
        notes TEXT, timings_ms TEXT, usage TEXT, channel TEXT, "user" TEXT, thread_ts TEXT,
        message_ts TEXT);
    CREATE INDEX answers_created ON answers(created);
    CREATE INDEX answers_thread ON answers(channel, thread_ts);
    CREATE TABLE feedback (
        answer_id BIGINT, "user" TEXT, value TEXT, created TEXT, PRIMARY KEY (answer_id, "user"));
    CREATE TABLE event_claims (
        key TEXT PRIMARY KEY, owner_pid INTEGER, owner_start TIMESTAMPTZ,
        claimed TIMESTAMPTZ NOT NULL DEFAULT now(), done BOOLEAN NOT NULL DEFAULT false);
    CREATE INDEX event_claims_claimed ON event_claims(claimed);
    CREATE TABLE rate_windows (user_id TEXT PRIMARY KEY, times TIMESTAMPTZ[] NOT NULL);
    """,
    # 2: the event with its claim (what Slack sent, enough to answer it), so another replica
    # answers an event whose claimer died after acknowledging it (Slack does not send it again)
    2: """
    ALTER TABLE event_claims ADD COLUMN event JSONB;
    """,
    # 3: "Ask a person" hand-offs, one per answer whichever replica gets the click
    3: """
    CREATE TABLE handoffs (
        answer_id BIGINT PRIMARY KEY, "user" TEXT, owner TEXT, target TEXT, created TEXT);
    """,
    # 4: the owners' loop (bot/state/loop.py): gap topics, drafts, replays, once-only claims
    4: ";\n".join(tables("BIGSERIAL PRIMARY KEY")) + ";",
    # 5: the channel each user is looking at beside the app's DM (Slack's app_context_changed),
    # whichever replica got the event
    5: """
    CREATE TABLE viewing (
        user_id TEXT, channel TEXT, viewing TEXT NOT NULL,
        updated TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (user_id, channel));
    """,
}
MIGRATIONS = pg.merged(pg.INDEX_MIGRATIONS, STATE_MIGRATIONS)
LATEST = len(MIGRATIONS)  # the schema version this fieldguide needs


def upgrade(url: str) -> tuple[int, int]:
    """Apply the fleet's migrations not applied yet: (version before, version after)."""
    return pg.upgrade(url, MIGRATIONS)
