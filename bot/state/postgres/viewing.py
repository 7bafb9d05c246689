"""The channel each user is looking at beside the app's DM, shared by a fleet: one row per user
and DM, written by whichever replica got Slack's app_context_changed and read by whichever
answers the user's next question; this replica's memory while the database is away."""

from __future__ import annotations

from index.clean import storable
from index.pg import POOL_ERRORS

from .session import Session

NOTE = """INSERT INTO viewing (user_id, channel, viewing)
VALUES (%(user)s, %(channel)s, %(viewing)s)
ON CONFLICT (user_id, channel) DO UPDATE SET viewing = excluded.viewing, updated = now()"""
READ = "SELECT viewing FROM viewing WHERE user_id = %(user)s AND channel = %(channel)s"


class Viewing(Session):
    def note_viewing(self, user: str, channel: str, viewing: str) -> None:
        args = {"user": storable(user), "channel": storable(channel), "viewing": storable(viewing)}
        self._local.note_viewing(user, channel, viewing)  # what this replica reads while away
        if not self._down:
            try:
                self._run(NOTE, args)
            except POOL_ERRORS as e:
                self._failed("noting what a user is looking at", e)

    def viewing(self, user: str, channel: str) -> str:
        if not self._down:
            try:
                rows = self._run(READ, {"user": storable(user), "channel": storable(channel)})
                return rows[0][0] if rows else ""
            except POOL_ERRORS as e:
                self._failed("reading what a user is looking at", e)
        return self._local.viewing(user, channel)
