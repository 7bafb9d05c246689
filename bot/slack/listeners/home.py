"""The App Home tab (bot/slack/home.py): published with views.publish for whoever opens it; its
reindex button (admins only) runs the same Reindexer, under the same lock, as /docs-reindex."""

from __future__ import annotations

from logging import Logger

from slack_bolt import Ack, App
from slack_sdk import WebClient

from ..answers import SLACK_FAILURES
from ..home import REINDEX_ACTION, home_view
from ..reindex import Reporter
from .common import Bot


def register(app: App, bot: Bot) -> None:
    def publish(client: WebClient, user: str, logger: Logger) -> None:
        settings = bot.guide.settings
        admin = user in settings.admin_ids
        view = home_view(user, admin, bot.guide)
        try:
            client.views_publish(user_id=user, view=view)
        except SLACK_FAILURES as e:
            logger.warning("could not publish the Home tab for %s: %s", user, e)

    @app.event("app_home_opened")
    def on_home_opened(event: dict, client: WebClient, logger: Logger) -> None:
        if event.get("tab", "home") == "home" and event.get("user"):
            publish(client, event["user"], logger)

    @app.action(REINDEX_ACTION)
    def on_reindex(ack: Ack, body: dict, client: WebClient, logger: Logger) -> None:
        ack()
        user = body["user"]["id"]
        if user not in bot.guide.settings.admin_ids:  # the button is shown to admins only
            logger.warning("Home reindex click by %s, who is not an admin", user)
            return

        def dm(text: str) -> bool:
            try:
                client.chat_postMessage(channel=user, text=text)
                return True
            except SLACK_FAILURES as e:
                logger.warning("could not tell %s about the reindex: %s", user, e)
                return False

        bot.reindexer.run(Reporter(dm, dm))
        publish(client, user, logger)  # the new figures
