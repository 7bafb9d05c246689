"""A fleet replica's sweeper: answers the events whose replica died after acknowledging them.

Bolt acknowledges an event at once, so Slack does not send it again if the replica that got it
dies before answering. Its claim in PostgreSQL keeps the event (bot/state/postgres.py); every few
seconds each replica takes over a few unanswered claims whose owner's session is gone (the same
CLAIM statement as a live event, so two replicas never take the same one) and answers them the way
a live event is answered: the answer posted, the claim closed with the audit row.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .listeners.common import Bot

log = logging.getLogger(__name__)

SWEEP_SECONDS = 2.0  # how often a replica looks for orphaned events
SWEEP_LIMIT = 10  # events taken over per pass at most (and no more than the answer queue has room)


class Sweeper:
    """A daemon thread running `sweep` every `every` seconds until `close`."""

    def __init__(self, bot: Bot, every: float = SWEEP_SECONDS):
        self.bot, self.every = bot, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="orphan-sweeper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.sweep()
            except Exception:  # the sweeper must outlive any one pass
                log.exception("sweeping orphaned events failed")

    def sweep(self) -> int:
        """Take over and queue what the line of questions has room for; how many were taken."""
        room = self.bot.guide.asking.line.room()
        events = self.bot.guide.state.take_orphans(min(SWEEP_LIMIT, room))
        for e in events:
            log.warning(
                "answering event %s: the replica that acknowledged it died before answering",
                e["body"].get("event_id"),
            )
            self.bot.queue(
                self.bot.app.client,
                e["event"],
                e["body"],
                e["in_thread"],
                e["assistant"],
                tuple(e["keys"]),
                e.get("placeholder"),  # the dead replica's, answered in rather than left behind
            )
        return len(events)

    def close(self) -> None:
        self._stop.set()
