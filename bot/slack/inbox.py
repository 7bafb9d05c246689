"""Slack events written down before they are acknowledged, so that none is lost to a stop or a
crash between Slack's ack and the question's own claim.

Bolt acknowledges an Events API event before its listener runs, and Slack does not send an
acknowledged event again. So `InboxApp.dispatch` (the one way in, over HTTP and Socket Mode)
claims each event with the body Slack sent ("inbox:" + its event id, `State.claim_event`) before
Bolt sees it, and the claim is closed once the listener has run: by then the listener has claimed
the question itself with what is needed to answer it (bot/slack/listeners/common.py), or found
nothing to answer. A process stopped or killed in between leaves the claim open; the next process
(or, in a fleet, another replica) takes it over (bot/slack/orphans.py) and hands the body to Bolt
again (`redeliver`), whose listeners then decide as they would have.

Where the claim cannot be made durable (a fleet whose PostgreSQL is away) the event is not
acknowledged (503) so that Slack sends it again, to this replica or another, except its last retry,
which is answered from memory rather than refused for good. While `serve` stops, new events get
503 too (bot/slack/stopping.py).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from slack_bolt import App, BoltRequest, BoltResponse

log = logging.getLogger(__name__)

INBOX = "inbox:"  # the prefix of an event's key while its listener has not run
SLACK_LAST_RETRY = 3  # Slack retries an event 3 times (about at once, after 1 and 5 minutes)
LISTENER_THREADS = 5  # Bolt's own default


class InboxApp(App):
    """Bolt's App, with each event claimed before it is dispatched (see the module docstring);
    `listeners` runs the listeners (Bolt's listener executor)."""

    def __init__(self, *, state: Any, **kwargs: Any):
        self.state = state
        self.accepting = True  # False while `serve` stops: events get 503 (Slack resends them)
        self._current = threading.local()  # the event being dispatched on this thread, if any
        self._listening = threading.local()  # when the event a listener thread runs came in
        self.listeners = ListenerExecutor(self)
        super().__init__(listener_executor=self.listeners, **kwargs)

    def dispatch(self, req: BoltRequest) -> BoltResponse:
        body = req.body if isinstance(req.body, dict) else {}
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if not isinstance(event_id, str) or not event_id:
            return super().dispatch(req)
        if not self.accepting:
            return BoltResponse(status=503, body="stopping: retry")
        retry = int((req.headers.get("x-slack-retry-num") or ["0"])[0] or 0)
        if self.state.fleet and retry < SLACK_LAST_RETRY and not self.state.durable():
            return BoltResponse(status=503, body="PostgreSQL unavailable: retry")
        key = INBOX + event_id
        stored = {"keys": [key], "inbox": body, "received": time.time()}
        try:
            claimed = self.state.claim_event(key, event=stored)
        except Exception:  # not written down: still handled, as before there was an inbox
            log.exception("could not write event %s down before acknowledging it", event_id)
            claimed = False
        # not claimed: received before (a retry, a second delivery) or not written down: the
        # listener's own claim decides whether it is answered
        return self.handle(req, key if claimed else None)

    def handle(
        self, req: BoltRequest, key: str | None, received: float | None = None
    ) -> BoltResponse:
        """Dispatch `req`, closing the claim `key` once its listener has run (at once when no
        listener runs); `received`: when it first came in, if not now."""
        self._current.key, self._current.handed = key, False
        self._current.received = received
        try:
            return super().dispatch(req)
        finally:
            handed = self._current.handed
            self._current.key = None
            if key and not handed:
                self.close(key)

    def received(self) -> float:
        """When the event a listener is running for came in: now, unless it is handled again
        after a stop (`redeliver`)."""
        return getattr(self._listening, "received", None) or time.time()

    def close(self, key: str) -> None:
        try:
            self.state.done_event(key)
        except Exception:  # the claim then waits for its lease: answered again rather than lost
            log.exception("could not close the claim %s", key)


class ListenerExecutor(Executor):
    """Bolt's listener executor: the listeners of an event claimed by `InboxApp.dispatch` close
    its claim when they return."""

    def __init__(self, app: InboxApp):
        self.app = app
        self.pool = ThreadPoolExecutor(LISTENER_THREADS, thread_name_prefix="listener")

    def submit(self, fn, /, *args: Any, **kwargs: Any) -> Future:
        current, listening = self.app._current, self.app._listening
        key, received = getattr(current, "key", None), getattr(current, "received", None)
        if key:
            current.handed = True

        def run():
            listening.received = received
            try:
                return fn(*args, **kwargs)
            finally:
                listening.received = None
                if key:
                    self.app.close(key)

        return self.pool.submit(run)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait=wait, cancel_futures=cancel_futures)


def redeliver(app: InboxApp, stored: dict) -> None:
    """An event taken over from a process that acknowledged it and died before its listener ran:
    Slack's body dispatched again (as a Socket Mode request: it was checked when it came in), its
    claim closed once the listener has run."""
    body, [key] = stored["inbox"], stored["keys"]
    log.warning(
        "handling event %s: the process that acknowledged it stopped before handling it",
        body.get("event_id"),
    )
    app.handle(BoltRequest(body=body, mode="socket_mode"), key, stored.get("received"))
