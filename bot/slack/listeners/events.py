"""Mentions in channels, direct messages, and follow-ups in threads the bot has answered in:
each answered in its own thread (a DM's too, as in Slack's agent messaging experience)."""

from __future__ import annotations

from logging import Logger

from slack_bolt import App
from slack_sdk import WebClient

from ..slack_rules import is_user_message, message_kind
from .common import Bot


def register(app: App, bot: Bot) -> None:
    @app.event("app_mention")
    def on_mention(event: dict, body: dict, client: WebClient, logger: Logger) -> None:
        if not is_user_message(event, bot.bot_user):
            return  # a bot's message or an edit: never answered (see is_user_message)
        bot.ask(client, logger, event, body, in_thread=True)

    @app.event("message")
    def on_message(event: dict, body: dict, client: WebClient, logger: Logger) -> None:
        thread = event.get("thread_ts") or ""
        answered = (
            bool(thread)
            and event.get("channel_type") != "im"
            and bot.guide.state.thread_answered(event.get("channel", ""), thread)
        )
        kind = message_kind(event, bot.bot_user, answered)
        if kind in ("dm", "follow_up"):
            bot.ask(client, logger, event, body, in_thread=True)
