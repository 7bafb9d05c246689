"""Feedback clicks: Slack's native feedback buttons under an answer (and the older 👍/👎 buttons),
stored last-write-wins per user and answer; a 👎 offers "Ask a person", whose click hands the
question to the docs' owners (bot/slack/handoff.py)."""

from __future__ import annotations

import re
from logging import Logger

from slack_bolt import Ack, App
from slack_sdk import WebClient

from ..answers import SLACK_FAILURES
from ..handoff import hand_off, may_hand_off
from ..slack_format import (
    ASK_PERSON,
    FEEDBACK_ACTION,
    LEGACY_FEEDBACK_ACTIONS,
    NOT_HELPFUL,
    answer_id_of,
    ask_person_block,
    parse_feedback,
)
from .common import Bot

FEEDBACK_IDS = re.compile("^(" + "|".join((FEEDBACK_ACTION, *LEGACY_FEEDBACK_ACTIONS)) + ")$")
NOT_HELPFUL_OFFER = "Sorry this didn't help. Want the people who own these docs to take a look?"


def register(app: App, bot: Bot) -> None:
    def tell(client: WebClient, logger: Logger, body: dict, answer_id: int, **message) -> None:
        """An ephemeral note to the clicker, in the answer's thread."""
        row = bot.guide.state.get_answer(answer_id) or {}
        channel = str(row.get("channel") or (body.get("channel") or {}).get("id") or "")
        try:
            client.chat_postEphemeral(
                channel=channel,
                user=body["user"]["id"],
                thread_ts=row.get("thread_ts") if not channel.startswith("D") else None,
                **message,
            )
        except SLACK_FAILURES as e:
            logger.warning("could not tell %s about answer %s: %s", channel, answer_id, e)

    @app.action(FEEDBACK_IDS)
    def on_feedback(ack: Ack, body: dict, action: dict, client: WebClient, logger: Logger) -> None:
        ack()
        parsed = parse_feedback(action)
        if parsed is None:
            logger.warning("feedback click with an unknown value: %r", action.get("value"))
            return
        answer_id, value = parsed
        user = body["user"]["id"]
        bot.guide.state.record_feedback(answer_id, user, value)
        row = bot.guide.state.get_answer(answer_id) or {}
        # a person is offered only to whoever may hand the answer on (bot/slack/handoff.py)
        admin = user in bot.guide.settings.admin_ids
        if value == NOT_HELPFUL and may_hand_off(row, user, admin):
            tell(
                client,
                logger,
                body,
                answer_id,
                text=NOT_HELPFUL_OFFER,
                blocks=ask_person_block(answer_id, NOT_HELPFUL_OFFER),
            )

    @app.action(ASK_PERSON)
    def on_ask_person(
        ack: Ack, body: dict, action: dict, client: WebClient, logger: Logger
    ) -> None:
        ack()
        answer_id = answer_id_of(action.get("value", ""))
        if answer_id is None:
            logger.warning("ask-a-person click with an unknown value: %r", action.get("value"))
            return
        user = body["user"]["id"]
        note = hand_off(
            client,
            bot.guide.state,
            bot.guide.owners(),
            answer_id,
            user,
            admin=user in bot.guide.settings.admin_ids,
        )
        tell(client, logger, body, answer_id, text=note)
