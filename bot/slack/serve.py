"""`fieldguide serve`: the Slack bot until the process is stopped — the fleet's newest index first
(in a fleet), the engine warmed, /healthz, then Socket Mode or HTTP; on SIGTERM or SIGINT it
stops taking events and answers what it took for up to FIELDGUIDE_DRAIN_SECONDS (stopping.py)."""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from waitress import wasyncore

from index.redact import redact_logs

from ..logs import say
from .stopping import Stop, StopSignals, drain, leave

if TYPE_CHECKING:
    from .guide import Guide
    from .listeners.common import Bot


class CannotServe(Exception):
    """`serve` cannot start; the message is fit to show, `status` is the exit status."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def serve(guide: Guide, http: int | None, host: str) -> None:
    """Run the bot of `guide` (Socket Mode, or HTTP on port `http`); CannotServe when it cannot
    start (a token missing or refused, the health port taken)."""
    from ..health import Health, auth_test_slack, serve_health, socket_mode_slack
    from .slack_app import SlackStartupError, build_bot, http_server

    settings = guide.settings
    redact_logs(*settings.urls())  # the handlers logs.configure added redact too
    # the pool would log each failed reconnection; bot/state/postgres.py says it once per outage
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    # the tokens' shapes first: a wrong one would otherwise be found after the index has loaded
    # and Slack has been asked (and, unreachable, retried for FIELDGUIDE_SLACK_STARTUP_SECONDS)
    if problems := settings.slack_token_problems(http=bool(http)):
        raise CannotServe(f"{'; '.join(problems)} (see README, 'Slack in five steps')", status=2)
    if settings.database_url:
        from ..indexing import start_follower, sync_published

        held = sync_published(settings)
        say(
            f"fieldguide: fleet mode, serving published index generation {held}"
            if held is not None
            else "fieldguide: fleet mode, nothing published yet: serving the local index"
        )
    guide.engine.warm()  # the index, the model and the docs' words now, not on a question
    if settings.database_url:
        start_follower(settings, guide.engine)
    health = Health(guide.engine, settings.database_url)
    if settings.health_port:  # up before Slack is reached: a probe sees why it is not ready
        try:
            serve_health(health, settings.health_port, settings.health_host)
        except OSError as e:  # in use, or a privileged port
            raise CannotServe(
                f"cannot serve /healthz on {settings.health_host}:{settings.health_port}"
                f" (FIELDGUIDE_HEALTH_PORT): {e.strerror or e}"
            ) from None
    try:
        bot = build_bot(guide)
    except SlackStartupError as e:
        raise CannotServe(str(e)) from None
    app = bot.app
    if http:
        health.slack = auth_test_slack(app.client)
        server = http_server(app, settings.slack_signing_secret, host, http, health=health)
        say(f"fieldguide: serving Slack over HTTP at http://{host}:{http}/slack/events")
        signals = StopSignals(interrupt=True).install()
        with contextlib.suppress(Stop):  # raised before the loop began
            server.run()  # until a stop signal: waitress then ends its request threads
        wasyncore.close_all(server._map)  # the port and its connections: nothing more is taken
        if signals.requested.is_set():
            stopped(bot, guide, settings.drain_seconds)
        return
    from slack_bolt.adapter.socket_mode import SocketModeHandler
    from slack_bolt.util.utils import get_boot_message
    from slack_sdk.errors import SlackApiError

    handler = SocketModeHandler(app, settings.slack_app_token)
    signals = StopSignals(interrupt=False).install()
    health.slack = socket_mode_slack(handler.client)
    try:
        handler.connect()
    except SlackApiError as e:
        raise CannotServe(
            f"Slack refused SLACK_APP_TOKEN ({e.response.get('error', '?')}):"
            " check the app-level token (xapp-…, with connections:write) and that Socket"
            " Mode is on"
        ) from None
    say("fieldguide: connected to Slack over Socket Mode")
    app.logger.info(get_boot_message())  # what SocketModeHandler.start() does after connect()
    signals.requested.wait()
    app.accepting = False  # an event still arriving is not acknowledged: Slack sends it again
    handler.client.auto_reconnect_enabled = False
    handler.close()  # the connection: nothing more is taken
    stopped(bot, guide, settings.drain_seconds)


def stopped(bot: Bot, guide: Guide, seconds: float) -> None:
    """Drain for up to `seconds`, give the state back; with questions left, end at once."""
    left = drain(bot, seconds)
    guide.state.close()
    if left:
        leave()
