"""The sweeper: answers the events a stopped or killed process acknowledged and did not answer.

Bolt acknowledges an event at once, so Slack does not send it again if the process that got it
stops before answering. Its claims keep it (bot/state/): the event as Slack sent it until its
listener has run (bot/slack/inbox.py), then the question with what is needed to answer it. At
start and every few seconds the sweeper takes over a few open claims whose process is gone (on
one machine: the process before this one, stopped or killed; in a fleet: a dead replica, whose
PostgreSQL session is gone), each as claiming does it, so two never take the same one, and
handles them as live events are handled: an event's body goes to Bolt again, a question to the
answer queue (where one too old to answer gets an apology instead: `Bot.queue`), answered in the
placeholder the dead process left.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from .inbox import redeliver

if TYPE_CHECKING:
    from .listeners.common import Bot

log = logging.getLogger(__name__)

SWEEP_SECONDS = 2.0  # how often a process looks for orphaned events
SWEEP_LIMIT = 10  # events taken over per pass at most (and no more than the answer queue has room)


class Sweeper:
    """A daemon thread running `sweep` at once, then every `every` seconds until `close`."""

    def __init__(self, bot: Bot, every: float = SWEEP_SECONDS):
        self.bot, self.every = bot, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="orphan-sweeper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sweep()
            except Exception:  # the sweeper must outlive any one pass
                log.exception("sweeping orphaned events failed")
            self._stop.wait(self.every)

    def sweep(self) -> int:
        """Take over and queue what the line of questions has room for; how many were taken."""
        room = self.bot.guide.asking.line.room()
        events = self.bot.guide.state.take_orphans(min(SWEEP_LIMIT, room))
        for e in events:
            if "inbox" in e:  # acknowledged, its listener never ran
                redeliver(self.bot.app, e)
                continue
            log.warning(
                "answering event %s: the process that acknowledged it stopped before answering",
                e["body"].get("event_id"),
            )
            self.bot.queue(
                self.bot.app.client,
                e["event"],
                e["body"],
                e["in_thread"],
                e["assistant"],
                tuple(e["keys"]),
                e.get("placeholder"),  # the dead process's, answered in rather than left behind
                e.get("received"),
            )
        return len(events)

    def close(self) -> None:
        self._stop.set()
