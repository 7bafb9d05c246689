"""The owners' loop's listeners: a person's answer in a hand-off thread (offered to the owner as
a draft, never answered as a follow-up question), the "Draft a doc change" button and the weekly
note's "Won't fix" button (bot/slack/owners.py)."""

from __future__ import annotations

from logging import Logger

from slack_bolt import Ack, App
from slack_sdk import WebClient

from ...weekly import WONTFIX
from ..answers import SLACK_FAILURES
from ..owners import DRAFT_ACTION, answered_handoff, draft_from_reply, offer_draft, set_wontfix
from .common import Bot


def register(app: App, bot: Bot) -> None:
    def replies_a_handoff(event: dict) -> bool:
        return answered_handoff(bot.guide, event, bot.bot_user) is not None

    @app.event("message", matchers=[replies_a_handoff])
    def on_handoff_reply(event: dict, client: WebClient) -> None:
        found = answered_handoff(bot.guide, event, bot.bot_user)
        if found is not None:
            offer_draft(client, bot.guide, event, found)

    def tell(client: WebClient, logger: Logger, body: dict, text: str) -> None:
        channel = (body.get("channel") or {}).get("id") or ""
        message = body.get("message") or body.get("container") or {}
        thread = message.get("thread_ts") or message.get("message_ts")
        try:
            client.chat_postEphemeral(
                channel=channel, user=body["user"]["id"], text=text, thread_ts=thread
            )
        except SLACK_FAILURES as e:
            logger.warning("could not tell %s: %s", body["user"]["id"], e)

    @app.action(DRAFT_ACTION)
    def on_draft(ack: Ack, body: dict, action: dict, client: WebClient, logger: Logger) -> None:
        ack()
        user = body["user"]["id"]
        note = draft_from_reply(client, bot.guide, str(action.get("value", "")), user, bot.bot_user)
        tell(client, logger, body, note)

    @app.action(WONTFIX)
    def on_wontfix(ack: Ack, body: dict, action: dict, client: WebClient, logger: Logger) -> None:
        ack()
        note = set_wontfix(bot.guide, str(action.get("value", "")), body["user"]["id"])
        tell(client, logger, body, note)
