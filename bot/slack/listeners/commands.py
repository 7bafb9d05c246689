"""/docs-reindex (admins): reindex the docs in the background, `status`, `help`."""

from __future__ import annotations

from logging import Logger

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from ..answers import SLACK_FAILURES
from ..reindex import Reporter
from ..slack_rules import REINDEX_USAGE, reindex_action
from .common import Bot


def reporter(command: dict, respond: Respond, client: WebClient, logger: Logger) -> Reporter:
    """Reports by the command's response_url, every post's status checked, falling back to
    chat.postEphemeral."""

    def by_response_url(text: str) -> bool:
        try:
            resp = respond(text=text, response_type="ephemeral", replace_original=False)
        except SLACK_FAILURES as e:
            logger.warning("response_url post failed: %s", e)
            return False
        if resp.status_code != 200:  # respond() does not raise: "used_url", "expired_url", 5xx
            logger.warning("response_url refused a post: %s %s", resp.status_code, resp.body)
        return resp.status_code == 200

    def by_ephemeral(text: str) -> bool:
        try:
            client.chat_postEphemeral(
                channel=command["channel_id"], user=command["user_id"], text=text
            )
            return True
        except SLACK_FAILURES as e:  # Reporter logs that nothing got through
            logger.warning("chat.postEphemeral failed: %s", e)
            return False

    return Reporter(by_response_url, by_ephemeral)


def register(app: App, bot: Bot) -> None:
    settings = bot.guide.settings
    usage = REINDEX_USAGE.format(cmd=settings.reindex_command)

    def reindex_ack(ack: Ack, command: dict) -> None:
        action = reindex_action(command.get("text", ""))
        if action == "help":
            ack(response_type="ephemeral", text=usage)
        elif command["user_id"] not in settings.admin_ids:
            ack(
                response_type="ephemeral",
                text="Sorry, only fieldguide admins can reindex the docs.",
            )
        elif action == "status":
            ack(response_type="ephemeral", text=bot.reindexer.status())
        else:
            # Bolt starts the lazy run alongside this ack, so a "running?" check here could see
            # that very run: Reindexer.run takes the lock and says when another reindex holds it
            ack(response_type="ephemeral", text="Reindexing the docs; I'll post progress here.")

    def reindex_run(command: dict, respond: Respond, client: WebClient, logger: Logger) -> None:
        if (
            command["user_id"] in settings.admin_ids
            and reindex_action(command.get("text", "")) == "run"
        ):
            bot.reindexer.run(reporter(command, respond, client, logger))

    app.command(settings.reindex_command)(ack=reindex_ack, lazy=[reindex_run])
