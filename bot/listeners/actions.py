"""Feedback clicks: Slack's native feedback buttons under an answer (and the older 👍/👎 buttons),
stored last-write-wins per user and answer."""

from __future__ import annotations

import re
from logging import Logger

from slack_bolt import Ack, App

from ..slack_format import FEEDBACK_ACTION, LEGACY_FEEDBACK_ACTIONS, parse_feedback
from .common import Bot

FEEDBACK_IDS = re.compile("^(" + "|".join((FEEDBACK_ACTION, *LEGACY_FEEDBACK_ACTIONS)) + ")$")


def register(app: App, bot: Bot) -> None:
    @app.action(FEEDBACK_IDS)
    def on_feedback(ack: Ack, body: dict, action: dict, logger: Logger) -> None:
        ack()
        parsed = parse_feedback(action)
        if parsed is None:
            logger.warning("feedback click with an unknown value: %r", action.get("value"))
            return
        answer_id, value = parsed
        bot.state.record_feedback(answer_id, body["user"]["id"], value)
