"""The App Home tab (bot/slack/home.py): published with views.publish for whoever opens it; its
reindex button (admins only) runs the same Reindexer, under the same lock, as /docs-reindex."""

from __future__ import annotations

import logging
import threading
from logging import Logger

from slack_bolt import Ack, App
from slack_sdk import WebClient

from ..answers import SLACK_FAILURES
from ..home import REINDEX_ACTION, GapsCache, HomeTabs, home_view
from ..reindex import Reporter
from .common import Bot

log = logging.getLogger(__name__)


def register(app: App, bot: Bot) -> None:
    cache = GapsCache()

    def build(user: str) -> dict:
        settings = bot.guide.settings
        admin = user in settings.admin_ids
        return home_view(user, admin, bot.guide, cache)

    def publish(client: WebClient, user: str, view: dict) -> None:
        try:
            client.views_publish(user_id=user, view=view)
        except SLACK_FAILURES as e:
            log.warning("could not publish the Home tab for %s: %s", user, e)

    tabs = bot.home_tabs = HomeTabs(build, publish)

    def home_tab(event: dict) -> bool:  # the Messages tab's opening is listeners/agent.py's
        return event.get("tab", "home") == "home"

    @app.event("app_home_opened", matchers=[home_tab])
    def on_home_opened(event: dict, client: WebClient, logger: Logger) -> None:
        if event.get("user"):
            tabs.open(client, event["user"])  # built and published off Bolt's threads

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

        def run() -> None:
            bot.reindexer.run(Reporter(dm, dm))
            tabs.open(client, user)  # the new figures

        # a reindex takes minutes: on a thread of its own, never one of Bolt's
        threading.Thread(target=run, name="home-reindex", daemon=True).start()
