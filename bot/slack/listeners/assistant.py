"""Apps made on Slack's `assistant_view` (the assistant side panel, which Slack retires for the
agent messaging experience, listeners/agent.py): a greeting and suggested questions when a thread
opens, in the scope of the channel the user is looking at; the context kept as it changes; the
thread's questions answered in their thread and the thread titled."""

from __future__ import annotations

from logging import Logger

from slack_bolt import App, Assistant, Say
from slack_bolt.context.set_suggested_prompts import SetSuggestedPrompts
from slack_sdk import WebClient

from ...asking import GREETING
from ..slack_rules import is_user_message
from .common import Bot


def register(app: App, bot: Bot) -> None:
    assistant = Assistant()

    def note(payload: dict) -> tuple[str, str]:
        """Keep the channel the thread's context names; (user, the thread's DM)."""
        thread = payload.get("assistant_thread") if isinstance(payload, dict) else None
        thread = thread if isinstance(thread, dict) else {}
        user, channel = thread.get("user_id"), thread.get("channel_id")
        if not (isinstance(user, str) and isinstance(channel, str)):
            return "", ""
        context = thread.get("context")
        viewing = context.get("channel_id") if isinstance(context, dict) else ""
        bot.guide.state.note_viewing(user, channel, viewing if isinstance(viewing, str) else "")
        return user, channel

    @assistant.thread_started
    def on_thread_started(
        payload: dict, say: Say, set_suggested_prompts: SetSuggestedPrompts, logger: Logger
    ) -> None:
        say(GREETING)
        user, channel = note(payload)
        examples = bot.answerer.examples(user, channel)
        if examples:
            set_suggested_prompts(prompts=examples, title="For example:")

    @assistant.thread_context_changed
    def on_context_changed(payload: dict) -> None:
        note(payload)

    @assistant.user_message
    def on_user_message(payload: dict, body: dict, client: WebClient, logger: Logger) -> None:
        if not is_user_message(payload, bot.bot_user):
            return
        bot.ask(client, logger, payload, body, in_thread=True, assistant=True)

    app.use(assistant)
