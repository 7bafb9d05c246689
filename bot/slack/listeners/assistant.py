"""The assistant side panel: a greeting and suggested questions when a thread opens; questions in
it answered with the panel's status (no placeholder message) and the thread titled."""

from __future__ import annotations

from logging import Logger

from slack_bolt import App, Assistant, Say
from slack_bolt.context.set_suggested_prompts import SetSuggestedPrompts
from slack_sdk import WebClient

from ..slack_rules import GREETING, is_user_message
from .common import Bot


def register(app: App, bot: Bot) -> None:
    assistant = Assistant()

    @assistant.thread_started
    def on_thread_started(
        payload: dict, say: Say, set_suggested_prompts: SetSuggestedPrompts, logger: Logger
    ) -> None:
        say(GREETING)
        thread = payload.get("assistant_thread") if isinstance(payload, dict) else None
        channel = thread.get("channel_id") if isinstance(thread, dict) else None
        examples = bot.answerer.examples(channel or "")
        if examples:
            set_suggested_prompts(prompts=examples, title="For example:")

    @assistant.user_message
    def on_user_message(payload: dict, body: dict, client: WebClient, logger: Logger) -> None:
        if not is_user_message(payload, bot.bot_user):
            return
        bot.ask(client, logger, payload, body, in_thread=True, assistant=True)

    app.use(assistant)
