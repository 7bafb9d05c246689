"""What every listener needs: fieldguide (its settings, state and engine), the bot's user id, the
answer queue and the reindexer; and `ask`, the common way into the answer queue."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient

from ..answers import SLACK_FAILURES, SORRY, Answerer, Question
from ..inbox import InboxApp
from ..reindex import Reindexer
from ..slack_rules import dedupe_keys, plain_text, reply_thread

if TYPE_CHECKING:
    from ..guide import Guide

QUESTIONS_PER_MINUTE = 6  # per user
TOO_FAST = "You're asking faster than I can read: give me a minute and ask again."
TOO_LATE = (
    ":warning: Sorry, I was restarted before I could answer this, and it is too late now for the"
    " answer to help. Please ask again."
)


@dataclass
class Bot:
    guide: Guide
    bot_user: str
    answerer: Answerer
    reindexer: Reindexer
    app: InboxApp
    sweeper: Any = None  # bot/slack/orphans.py's Sweeper, in a fleet
    refresher: Any = None  # bot/slack/reindex.py's Refresher, with FIELDGUIDE_REFRESH_EVERY
    home_tabs: Any = None  # bot/slack/home.py's HomeTabs: the worker that builds Home tabs
    owners: Any = None  # bot/slack/owners.py's OwnersWorker: replays, askers told, weekly notes

    def ask(
        self,
        client: WebClient,
        logger: logging.Logger,
        event: dict,
        body: dict,
        in_thread: bool,
        assistant: bool = False,
    ) -> None:
        """Queue the question in `event` once (Slack's retries and double deliveries dropped),
        within the user's rate limit. The claim keeps what is needed to answer it, for the next
        process (in a fleet, another replica) to answer if this one stops first
        (bot/slack/orphans.py)."""
        keys = dedupe_keys(body, event)
        received = self.app.received()  # now, unless handled again after a stop
        stored = {
            "keys": list(keys),
            "event": event,
            "body": body,
            "in_thread": in_thread,
            "assistant": assistant,
            "received": received,
        }
        try:
            claimed = self.guide.state.claim_event(*keys, event=stored)
        except Exception:  # never a silent drop: Slack has its ack and will not resend
            logger.exception("claiming event %s failed", body.get("event_id"))
            try:
                client.chat_postMessage(
                    channel=event["channel"], thread_ts=reply_thread(event, in_thread), text=SORRY
                )
            except SLACK_FAILURES as e:
                logger.warning("could not say so either: %s", e)
            return
        if not claimed:
            logger.info("event %s already claimed", body.get("event_id"))
            return
        user, thread = event.get("user", ""), reply_thread(event, in_thread)
        if not self.guide.state.allow_question(user, QUESTIONS_PER_MINUTE):
            self.guide.state.done_event(*keys)
            try:
                client.chat_postMessage(channel=event["channel"], thread_ts=thread, text=TOO_FAST)
            except SLACK_FAILURES as e:  # nothing more to say to a user who asks too fast
                logger.warning("could not post the rate-limit note: %s", e)
            return
        self.queue(client, event, body, in_thread, assistant, keys, received=received)

    def queue(
        self,
        client: WebClient,
        event: dict,
        body: dict,
        in_thread: bool,
        assistant: bool,
        keys: tuple[str, ...],
        placeholder: str | None = None,
        received: float | None = None,
    ) -> None:
        """Hand a claimed question to the answer workers (`placeholder`: a message already
        posted for it, to answer in). One that came in (`received`) longer ago than
        FIELDGUIDE_RECOVER_SECONDS, left by a stop or a crash, gets an apology instead."""
        if received is not None and time.time() - received > self.guide.settings.recover_seconds:
            self.say_too_late(client, event, in_thread, keys, placeholder)
            return
        self.answerer.submit(
            Question(
                client=client,
                channel=event["channel"],
                ts=event["ts"],
                user=event.get("user", ""),
                text=plain_text(event.get("text", "")),
                reply_thread=reply_thread(event, in_thread),
                history_thread=event.get("thread_ts"),
                team=body.get("team_id") or event.get("team", ""),
                assistant=assistant,
                keys=tuple(keys),
                extra={"placeholder": placeholder} if placeholder else {},
            )
        )

    def say_too_late(
        self,
        client: WebClient,
        event: dict,
        in_thread: bool,
        keys: tuple[str, ...],
        placeholder: str | None,
    ) -> None:
        channel, thread = event["channel"], reply_thread(event, in_thread)
        try:
            if placeholder:
                client.chat_update(channel=channel, ts=placeholder, text=TOO_LATE, blocks=[])
            else:
                client.chat_postMessage(channel=channel, thread_ts=thread, text=TOO_LATE)
        except SLACK_FAILURES as e:
            logging.getLogger(__name__).warning("could not apologise in %s: %s", channel, e)
            return  # the claim stays open: the next process tries again
        self.guide.state.done_event(*keys)

    def close(self) -> None:
        if self.sweeper is not None:
            self.sweeper.close()
        if self.refresher is not None:
            self.refresher.stop()
        if self.home_tabs is not None:
            self.home_tabs.close()
        if self.owners is not None:
            self.owners.stop()
        self.answerer.close()
