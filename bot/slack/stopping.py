"""Stopping `serve` without losing what it acknowledged: on SIGTERM (what `systemctl stop` and
`docker stop` send) or SIGINT (Ctrl-C) it stops taking events (HTTP: the port is closed; Socket
Mode: the connection; an event still arriving gets 503, so Slack sends it again), lets the
listeners hand on what they hold, and goes on answering what is queued and in flight for up to
FIELDGUIDE_DRAIN_SECONDS. What is left then keeps its claim: the next start (on one machine) or
another replica (in a fleet) answers it, or apologises in its thread when it has grown too old
(bot/slack/orphans.py). A second signal stops at once, leaving the rest the same way.
docs/deploy.md, "Stopping and restarting", says how this meets a service manager's stop timeout.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from ..logs import say

if TYPE_CHECKING:
    from .listeners.common import Bot

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stop(SystemExit):
    """Raised in the main thread by the first stop signal, to end the HTTP server's loop (waitress
    ends its loop on SystemExit); a second signal raises it again, to end the drain."""


class StopSignals:
    """SIGTERM and SIGINT, caught from `install` on: `requested` is set by the first; with
    `interrupt`, each signal also raises Stop in the main thread."""

    def __init__(self, interrupt: bool):
        self.interrupt = interrupt
        self.requested = threading.Event()

    def install(self) -> StopSignals:
        for sig in SIGNALS:
            signal.signal(sig, self._caught)
        return self

    def _caught(self, _signum: int, _frame: object) -> None:
        again = self.requested.is_set()
        self.requested.set()
        if again or self.interrupt:  # nothing printed here: the main thread may be printing
            raise Stop(0)


def drain(bot: Bot, seconds: float) -> int:
    """Stop taking events and answer what was taken, for up to `seconds`; how many questions are
    left unanswered (each kept for the next start). The caller has stopped the transport."""
    started = time.monotonic()
    deadline = started + seconds
    bot.app.accepting = False
    for part in (bot.sweeper, bot.home_tabs):
        if part is not None:
            part.close()
    if bot.refresher is not None:
        bot.refresher.stop()
    waiting = bot.answerer.pending()
    say(
        f"fieldguide: stopping: answering the {waiting} question(s) in hand"
        f" for up to {seconds:g} s (FIELDGUIDE_DRAIN_SECONDS)"
    )
    left = 0
    try:
        # the listeners still running hand their questions on; then the answers
        bot.app.listeners.shutdown(wait=True)
        left = bot.answerer.drain(deadline)
    except Stop:
        say("fieldguide: stop signal again: stopping now")
        left = bot.answerer.pending()
    if left:
        say(
            f"fieldguide: stopped with {left} question(s) unanswered: the next start answers"
            " them (or, in a fleet, another replica does)"
        )
    else:
        say(f"fieldguide: stopped, every question answered ({time.monotonic() - started:.1f} s)")
    return left


def leave() -> None:
    """End the process now, its output flushed: answer threads still inside the model's native
    code would abort the interpreter's exit (their claims are written: nothing is lost)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)
