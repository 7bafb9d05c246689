"""Slack's agent messaging experience (the manifest's `agent_view`): the app's Messages tab, where
each question starts a thread the answer streams into (listeners/events.py asks them).

- `app_home_opened` with `tab: "messages"`: suggested questions of the scope the user's questions
  are answered in (Bolt's `set_suggested_prompts`), and the greeting on a first visit (a DM with
  no message yet; it names example questions itself where Slack takes no suggestions);
- `app_context_changed`: the channel the user is looking at beside the app, kept (State.viewing)
  so their DM questions are answered in that channel's scope (answers.py).
"""

from __future__ import annotations

from logging import Logger

from slack_bolt import App
from slack_bolt.context.set_suggested_prompts import SetSuggestedPrompts
from slack_sdk import WebClient

from ...asking import GREETING, greeting
from ..answers import SLACK_FAILURES
from ..slack_rules import viewed_channel
from .common import Bot

PROMPTS_TITLE = "For example:"


def messages_tab(event: dict) -> bool:
    return event.get("tab") == "messages"


def register(app: App, bot: Bot) -> None:
    def note(event: dict, logger: Logger) -> bool:
        """Keep what the event says the user is looking at; False when it names no user/DM."""
        user, channel = event.get("user"), event.get("channel")
        if not (isinstance(user, str) and isinstance(channel, str) and user and channel):
            logger.warning("%s without a user and channel: ignored", event.get("type"))
            return False
        if "context" in event:  # an app_home_opened without one says nothing new
            bot.guide.state.note_viewing(user, channel, viewed_channel(event["context"]))
        return True

    @app.event("app_home_opened", matchers=[messages_tab])
    def on_messages_tab(
        event: dict,
        client: WebClient,
        set_suggested_prompts: SetSuggestedPrompts,
        logger: Logger,
    ) -> None:
        if not note(event, logger):
            return
        examples = bot.answerer.examples(event["user"], event["channel"])
        suggested = False
        if examples:
            try:
                set_suggested_prompts(prompts=examples, title=PROMPTS_TITLE)
                suggested = True
            except SLACK_FAILURES as e:  # an app without the agent view has no suggestions
                logger.info("no suggested prompts in %s: %s", event["channel"], e)
        try:
            first = not client.conversations_history(channel=event["channel"], limit=1).get(
                "messages"
            )
            if first:
                text = GREETING if suggested else greeting(examples)
                client.chat_postMessage(channel=event["channel"], text=text)
        except SLACK_FAILURES as e:
            logger.warning("could not greet %s: %s", event["user"], e)

    @app.event("app_context_changed")
    def on_context_changed(event: dict, logger: Logger) -> None:
        note(event, logger)
