"""Bolt listeners grouped by kind, as in Slack's bolt-python-assistant-template: each module has
one `register(app, bot)` that adds its listeners, which take Bolt's injected `client` / `logger`."""

from __future__ import annotations

from slack_bolt import App

from . import actions, agent, assistant, commands, events, home, owners
from .common import Bot

__all__ = ["Bot", "register"]


def register(app: App, bot: Bot) -> None:
    assistant.register(app, bot)  # first: it takes the assistant threads' messages
    owners.register(app, bot)  # then people's answers in hand-off threads
    agent.register(app, bot)
    events.register(app, bot)
    actions.register(app, bot)
    commands.register(app, bot)
    home.register(app, bot)
