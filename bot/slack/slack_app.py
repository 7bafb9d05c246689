"""The Slack app: a WebClient that retries, the Bolt App with its listeners (listeners/), and the
WSGI entry point for HTTP mode.

Bolt acknowledges each event at once; answers run on their own bounded pool (answers.py), so acks,
feedback clicks and commands never wait behind a slow answer. Retries and double deliveries are
dropped by `State.claim_event`, which survives a restart. Each event is written down before it is
acknowledged (inbox.py), and what a stopped or killed process acknowledged and did not answer is
answered by the next one, or by another replica (orphans.py).
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from slack_bolt import App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry import all_builtin_retry_handlers
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier

from ..connections import (
    CLEANUP_SECONDS,
    IDLE_SECONDS,
    MAX_HEADER_BYTES,
    connection_limit,
)
from ..health import Health, respond
from ..settings import Settings
from .answers import Answerer
from .inbox import InboxApp
from .listeners import Bot, register
from .orphans import Sweeper
from .reindex import Refresher, Reindexer

if TYPE_CHECKING:
    from .guide import Guide

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024  # Slack's payloads are far smaller; anything bigger is refused
# auth.test errors that waiting will not fix
FATAL_AUTH = {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}


class SlackStartupError(RuntimeError):
    """Slack could not be reached or refused the token at start-up; the message says which."""


def retry_handlers() -> list:
    """Connection errors and 429s (slack_sdk's built-in pair, Retry-After honoured) plus 500/503,
    which slack_sdk has a handler for but does not include in `all_builtin_retry_handlers()`."""
    builtin = {type(h) for h in all_builtin_retry_handlers()}
    assert builtin == {ConnectionErrorRetryHandler, RateLimitErrorRetryHandler}
    return [
        ConnectionErrorRetryHandler(max_retry_count=2),
        RateLimitErrorRetryHandler(max_retry_count=2),
        ServerErrorRetryHandler(max_retry_count=2),
    ]


def make_client(settings: Settings) -> WebClient:
    return WebClient(
        token=settings.slack_bot_token,
        base_url=settings.slack_api_base_url,
        timeout=int(settings.timeout),
        retry_handlers=retry_handlers(),
    )


def connect(client: WebClient, within: float) -> dict:
    """auth.test, retried with backoff (1, 2, 4, ... s) for up to `within` seconds while Slack is
    unreachable or failing; a bad token fails at once. Raises SlackStartupError. slack_sdk's own
    log lines for each failed try (an ERROR and two INFO per retry) are held back meanwhile: one
    line says Slack is not reachable yet, and one says why it gave up."""
    deadline, delay, said = time.monotonic() + within, 1.0, False
    while True:
        try:
            with quiet_logger("slack_sdk.web.base_client"):
                return dict(client.auth_test().data)  # type: ignore[arg-type]
        except SlackApiError as e:
            error = e.response.get("error", "")
            if error in FATAL_AUTH:
                raise SlackStartupError(
                    f"Slack refused SLACK_BOT_TOKEN ({error}): check the token "
                    "(xoxb-…, from OAuth & Permissions) and that the app is installed."
                ) from None
            why = f"Slack answered {error or e.response.status_code}"
        except (SlackClientError, OSError) as e:  # unreachable: DNS, refused, timeout, TLS
            why = f"{type(e).__name__}: {e}"
        if time.monotonic() + delay > deadline:
            raise SlackStartupError(
                f"Could not reach Slack at {client.base_url} ({why}); gave up after"
                f" {within:.0f} s. Check the network and SLACK_API_BASE_URL."
            )
        if not said:
            log.warning("Slack not reachable yet (%s); retrying for up to %.0f s", why, within)
            said = True
        time.sleep(delay)
        delay *= 2


@contextlib.contextmanager
def quiet_logger(name: str) -> Iterator[None]:
    """`name`'s records below CRITICAL dropped while inside."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def quiet_token_warning() -> Iterator[None]:
    """Bolt's App reads SLACK_BOT_TOKEN from the environment itself and, given our client too,
    warns that the token "will be unused": it is the token the client already holds (Settings
    reads the same variable), so that one warning is dropped, while the App is made."""
    from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

    unused = warning_client_prioritized_and_token_skipped()
    logger = logging.getLogger("slack_bolt.App")

    def other(record: logging.LogRecord) -> bool:
        return record.getMessage() != unused

    logger.addFilter(other)
    try:
        yield
    finally:
        logger.removeFilter(other)


def build_bot(guide: Guide, client: WebClient | None = None) -> Bot:
    """The Bolt App of `guide` with every listener, and what they share."""
    settings = guide.settings
    client = client or make_client(settings)
    identity = connect(client, settings.slack_startup_seconds)
    with quiet_token_warning():
        app = InboxApp(
            state=guide.state,
            client=client,
            signing_secret=settings.slack_signing_secret or None,
            name="fieldguide.slack",  # the listeners' logger (Bolt's default: the caller's file)
        )
    if guide.scopes is not None:
        guide.scopes.resolve(client)  # channel names → ids, once; a ScopeError names the unknown
    state = guide.state
    bot = Bot(
        guide=guide,
        bot_user=identity.get("user_id", ""),
        answerer=Answerer(guide, identity.get("user_id", "")),
        reindexer=Reindexer(settings, guide.embedder, state),
        app=app,
    )
    register(app, bot)
    from .owners import OwnersWorker, summary_changed

    bot.owners = OwnersWorker(client, guide).start()
    bot.reindexer.on_changed = lambda summary: bot.owners.after_reindex(summary_changed(summary))
    # answer what a stopped or killed process (a dead replica) acknowledged and did not answer
    bot.sweeper = Sweeper(bot)
    if settings.refresh_seconds:  # pull and reindex the docs on a schedule
        bot.refresher = Refresher(
            bot.reindexer, settings.refresh_seconds, guide.engine.loaded
        ).start()
        log.info("refreshing the docs every %s", settings.refresh_every)

    @app.error
    def on_error(error, body, logger):
        logger.error("unhandled Slack error: %s", error, exc_info=error)

    return bot


# The headers' shapes, as Slack sends them: a Unix time in seconds, and "v0=" with a SHA-256 HMAC
# in hex. Anything else is unsigned before slack_sdk reads it (which turns a long number into a
# float: an OverflowError, and a non-ASCII signature into a TypeError).
SLACK_TIMESTAMP = re.compile(r"[0-9]{1,12}")
SLACK_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


def signed(verifier: SignatureVerifier, body: bytes, environ: dict) -> bool:
    """Slack's signature over the raw body; junk (headers of another shape, a body that is not
    UTF-8) is simply unsigned."""
    timestamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP") or ""
    signature = environ.get("HTTP_X_SLACK_SIGNATURE") or ""
    if not (SLACK_TIMESTAMP.fullmatch(timestamp) and SLACK_SIGNATURE.fullmatch(signature)):
        return False
    try:
        return verifier.is_valid(body=body, timestamp=timestamp, signature=signature)
    except (ValueError, UnicodeDecodeError):
        return False


# What Bolt and the listeners read of a payload, and the type each field must have when present
# (a tuple: any of them). A signed body of another shape is no Slack payload, whoever signed it:
# 400, before Bolt or a listener indexes into a string or a list (a 500 and a traceback before).
PAYLOAD_FIELDS: dict[str, type | tuple[type, ...]] = {
    "type": str,
    "event_id": str,
    "team_id": str,
    "api_app_id": str,
    "event": dict,
    "user": dict,  # an interactive payload's clicker ({id, …}); an event's user is event.user
    "channel": (dict, str),
    "team": (dict, str),
    "enterprise": (dict, str),
    "container": dict,
    "message": dict,
    "view": dict,
    "actions": list,
    "authorizations": list,
}
EVENT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "type": str,
    "subtype": str,
    "user": str,
    "bot_id": str,
    "channel": str,
    "channel_type": str,
    "team": str,
    "tab": str,
    "text": str,
    "ts": str,
    "thread_ts": str,
    "event_ts": str,
    "edited": dict,
    "bot_profile": dict,
    "message": dict,
    "previous_message": dict,
    "assistant_thread": dict,
    "context": dict,  # app_context_changed's and app_home_opened's: what the user is looking at
    "files": list,
    "blocks": list,
}


# each action of an interactive payload (what the listeners match and read)
ACTION_FIELDS: dict[str, type | tuple[type, ...]] = {
    "action_id": str,
    "block_id": str,
    "type": str,
    "value": str,
    "action_ts": str,
}
# a slash command's form: these must be there (the listeners answer the user in the channel)
COMMAND_REQUIRED = ("command", "user_id", "channel_id")


def _wrong_type(fields: dict, where: dict, what: str = "") -> str:
    for key, kind in fields.items():
        if key in where and where[key] is not None and not isinstance(where[key], kind):
            return f"'{what}{key}' is a {type(where[key]).__name__}"
    return ""


def payload_problem(body: bytes, content_type: str | None) -> str:
    """Why a (signed) body is no Slack payload ("" when it is one): read as Bolt reads it (JSON,
    `payload=` JSON, or a form), it must be an object whose fields above have their types, each
    action and authorization an object, and an interactive payload's `user` one with an id."""
    from slack_bolt.request import BoltRequest

    try:
        data = BoltRequest(body=body.decode("utf-8"), headers={"content-type": content_type or ""})
        payload = data.body
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as e:
        return f"unreadable ({type(e).__name__})"
    if not isinstance(payload, dict):
        return "not an object"
    event = payload.get("event") or {}
    if problem := _wrong_type(PAYLOAD_FIELDS, payload) or _wrong_type(EVENT_FIELDS, event):
        return problem
    for key in ("actions", "authorizations"):
        if not all(isinstance(a, dict) for a in payload.get(key) or []):
            return f"'{key}' holds a non-object"
    for action in payload.get("actions") or []:
        if problem := _wrong_type(ACTION_FIELDS, action, "actions[]."):
            return problem
    user = payload.get("user")
    if (user is not None or "actions" in payload) and not (
        isinstance(user, dict) and isinstance(user.get("id"), str)
    ):
        return "'user' has no id"
    if "command" in payload:  # a slash command's form
        missing = [k for k in COMMAND_REQUIRED if not isinstance(payload.get(k), str)]
        if missing:
            return f"a slash command without {', '.join(missing)}"
    return ""


def make_wsgi(
    app: App, signing_secret: str = "", max_body: int = MAX_BODY_BYTES, health: Health | None = None
):
    """The WSGI application `serve --http` runs under waitress: Bolt at /slack/events, /healthz for
    probes (bot/health.py's JSON report with `health`, else a plain `ok`). Before Bolt sees a
    request, bodies over `max_body` get 413 (unread) and, when a signing secret is set, a missing
    or bad signature gets 401 (unparsed); a signed body that is no Slack payload gets 400
    (`payload_problem`)."""
    from slack_bolt.adapter.wsgi import SlackRequestHandler

    slack = SlackRequestHandler(app)
    verifier = SignatureVerifier(signing_secret) if signing_secret else None

    def reply(start_response, status: str, text: str):
        start_response(status, [("content-type", "text/plain")])
        return [text.encode() + b"\n"]

    def wsgi(environ, start_response):
        if environ.get("PATH_INFO") == "/healthz":
            if health is None:
                return reply(start_response, "200 OK", "ok")
            status, body = respond(health)
            start_response(status, [("content-type", "application/json")])
            return [body]
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return reply(start_response, "400 Bad Request", "bad content-length")
        if length > max_body:
            return reply(start_response, "413 Payload Too Large", "request body too large")
        body = environ["wsgi.input"].read(length) if length else b""
        if verifier is not None and not signed(verifier, body, environ):
            return reply(start_response, "401 Unauthorized", "invalid signature")
        if problem := payload_problem(body, environ.get("CONTENT_TYPE")):
            log.warning("refused a signed request that is no Slack payload: %s", problem)
            return reply(start_response, "400 Bad Request", f"not a Slack payload: {problem}")
        environ["wsgi.input"] = io.BytesIO(body)
        return slack(environ, start_response)

    return wsgi


def http_server(
    app: App,
    signing_secret: str,
    host: str,
    port: int,
    threads: int = 8,
    health: Health | None = None,
):
    """waitress serving `make_wsgi` with the limits of bot/connections.py (`.run()` serves; port
    0: any free)."""
    import waitress

    return waitress.create_server(
        make_wsgi(app, signing_secret, health=health),
        host=host,
        port=port,
        threads=threads,
        max_request_body_size=MAX_BODY_BYTES,
        max_request_header_size=MAX_HEADER_BYTES,
        connection_limit=connection_limit(),
        channel_timeout=IDLE_SECONDS,
        cleanup_interval=CLEANUP_SECONDS,
        asyncore_use_poll=True,  # select() cannot watch descriptors past 1024
    )
