"""`fieldguide mcp --http`: the MCP server over Streamable HTTP at /mcp, on uvicorn, with what a
server on a network owes its clients.

Every request is checked before it reaches MCP (`Guard`), in every bind mode (127.0.0.1 as
0.0.0.0): its Host must be one this server answers to (127.0.0.1, localhost, [::1], and
FIELDGUIDE_MCP_ALLOWED_HOSTS: the name a TLS proxy in front keeps), its Origin, when a browser page
sends one, one allowed (http pages on those loopback names, and FIELDGUIDE_MCP_ALLOWED_ORIGINS),
its bearer token FIELDGUIDE_MCP_TOKEN, compared in constant time. A refusal says which check
failed ("a bearer token is required", "invalid token", ...) and is logged, once a minute per
client address and reason, without the token.

Connections are bounded as the Slack server's are (bot/connections.py): at most a cap below the
process's open-file limit, where a new connection closes the one that has sat idle longest; a
connection that has sent no whole request for IDLE_SECONDS (never one, headers trickling in, idle
between requests) is closed; headers past MAX_HEADER_BYTES are refused; connections are accepted
ACCEPT_BATCH at a time, so a burst never takes the last descriptors. Should the process still run
out of descriptors, or anything else fail on the event loop or in uvicorn, one kind of failure is
logged at most once a minute with a count of the rest (bot/logs.py's Repeats).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, ClassVar

import uvicorn
from starlette.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

from .connections import (
    CLEANUP_SECONDS,
    FD_HEADROOM,
    IDLE_SECONDS,
    MAX_HEADER_BYTES,
    connection_limit,
)
from .logs import Repeats, hold_repeats
from .settings import listed

if TYPE_CHECKING:
    from .mcp_server import DocsServer
    from .settings import Settings

log = logging.getLogger(__name__)

PATH = "/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")  # names a local client reaches the server by
# connections accepted from the listening socket in one go (and its queue's length): their
# descriptors are taken before any of them is looked at, so the cap leaves room for two batches
ACCEPT_BATCH = 64
REF_CHARS = 100  # of a refused Host or Origin, logged


# -- the checks before MCP ------------------------------------------------------------------------


def split_host(value: str) -> tuple[str, str]:
    """A Host header's (name, port), the name lowercased; ("", "") when it is none."""
    m = re.fullmatch(r"(\[[0-9a-f:.]+\]|[^:\[\]]+)(?::(\d{1,5}))?", value.strip().lower())
    return (m.group(1), m.group(2) or "") if m else ("", "")


class Guard:
    """ASGI: Host, Origin and bearer token checked on every HTTP request before `app` sees it
    (the module doc); a refusal is a JSON error with the status that says which."""

    def __init__(
        self,
        app: Any,
        token: str,
        hosts: list[str],
        origins: list[str],
        repeats: Repeats | None = None,
    ):
        self.app = app
        self.digest = hashlib.sha256(token.encode()).digest()
        self.hosts = [split_host(h) for h in [*LOOPBACK, *hosts]]
        self.origins = {o.lower().rstrip("/") for o in origins}
        self.repeats = repeats or Repeats()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # the lifespan: the session manager's start and stop
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refused = self.refusal(headers)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, error, why = refused
        self.note(scope, why, headers)
        extra = {}
        if status == 401:  # RFC 6750: the scheme, and the error when the token was wrong
            wrong = ', error="invalid_token"' if error == "invalid_token" else ""
            extra["WWW-Authenticate"] = f'Bearer realm="fieldguide"{wrong}'
        response = JSONResponse(
            {"error": error, "error_description": why}, status_code=status, headers=extra
        )
        await response(scope, receive, send)

    def refusal(self, headers: dict[str, str]) -> tuple[int, str, str] | None:
        """(status, error, why) when the request is refused, else None."""
        if not self.host_allowed(headers.get("host", "")):
            return 421, "misdirected_request", "this server does not answer to that Host"
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin):
            return 403, "forbidden_origin", "requests from that Origin are not allowed"
        return self.token_refusal(headers.get("authorization"))

    def host_allowed(self, value: str) -> bool:
        name, port = split_host(value)
        return bool(name) and any(
            name == n and (not p or port == p or (not port and p in ("80", "443")))
            for n, p in self.hosts
        )

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.strip().lower().rstrip("/")
        if origin in self.origins:
            return True
        m = re.fullmatch(r"http://(.+)", origin)  # a page served from this machine
        return m is not None and split_host(m.group(1))[0] in LOOPBACK

    def token_refusal(self, authorization: str | None) -> tuple[int, str, str] | None:
        """The bearer token compared in constant time (the digests of what was given and of the
        token: equal lengths whatever was sent); what was wrong, when something was."""
        scheme, _, given = (authorization or "").partition(" ")
        digest = hashlib.sha256(given.strip().encode("latin-1")).digest()
        matches = hmac.compare_digest(digest, self.digest)
        if authorization is None or scheme.lower() != "bearer" or not given.strip():
            return 401, "invalid_request", "a bearer token is required (Authorization: Bearer …)"
        return None if matches else (401, "invalid_token", "invalid token")

    def note(self, scope: dict, why: str, headers: dict[str, str]) -> None:
        """A refusal logged once a minute per client address and reason; the Host or Origin
        refused named (cut), never a token."""
        peer = (scope.get("client") or ("unknown",))[0]
        held = self.repeats.allow((peer, why))
        if held is None:
            return
        what = ""
        if why.endswith("Host"):
            what = f" (Host {headers.get('host', '')[:REF_CHARS]!r})"
        elif why.startswith("requests from"):
            what = f" (Origin {headers.get('origin', '')[:REF_CHARS]!r})"
        more = f"; {held:,} more like it in the last minute" if held else ""
        log.warning("refused an MCP request from %s: %s%s%s", peer, why, what, more)


# -- connections ----------------------------------------------------------------------------------


class Connections:
    """The server's open connections: at most `cap`; idle ones (no request in flight) in the order
    they became idle, closed after `idle_seconds`, the longest idle closed to make room for a new
    one at the cap."""

    def __init__(self, cap: int, idle_seconds: float = IDLE_SECONDS):
        self.cap, self.idle_seconds = cap, idle_seconds
        self.idle: OrderedDict[Limited, float] = OrderedDict()
        self.working: set[Limited] = set()

    def __len__(self) -> int:
        return len(self.idle) + len(self.working)

    def opened(self, conn: Limited) -> None:
        self.idle[conn] = time.monotonic()
        if len(self) > self.cap:
            oldest = next(iter(self.idle))
            if oldest is not conn:  # else every other one is working: uvicorn answers it 503
                self.shut(oldest)

    def busy(self, conn: Limited) -> None:
        if self.idle.pop(conn, None) is not None:
            self.working.add(conn)

    def rested(self, conn: Limited) -> None:
        if conn in self.working:
            self.working.discard(conn)
            self.idle[conn] = time.monotonic()

    def gone(self, conn: Limited) -> None:
        self.idle.pop(conn, None)
        self.working.discard(conn)

    def shut(self, conn: Limited) -> None:
        self.gone(conn)
        conn.transport.close()

    def sweep(self) -> None:
        """Close the connections idle for `idle_seconds` or more."""
        now = time.monotonic()
        while self.idle:
            conn, since = next(iter(self.idle.items()))
            if now - since < self.idle_seconds:
                return
            self.shut(conn)

    async def sweep_every(self, seconds: float = CLEANUP_SECONDS) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.sweep()


class Limited(H11Protocol):
    """uvicorn's HTTP/1.1 connection, telling `watch` (the server's Connections) when it opens,
    starts a request, finishes one and closes."""

    watch: ClassVar[Connections]

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.watch.opened(self)

    def handle_events(self) -> None:
        super().handle_events()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not self.transport.is_closing():
            self.watch.busy(self)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self.watch.rested(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.watch.gone(self)
        super().connection_lost(exc)


def protocol_for(connections: Connections) -> type[Limited]:
    """A Limited class of its own for one server's `connections`."""
    return type("LimitedH11", (Limited,), {"watch": connections})


def loop_errors(repeats: Repeats):
    """The event loop's exception handler: one kind of failure (running out of descriptors
    accepting connections, above all) logged at most once a minute, with a count of the rest."""

    def handle(loop: asyncio.AbstractEventLoop, context: dict) -> None:
        message = str(context.get("message", ""))
        held = repeats.allow(message)
        if held is None:
            return
        more = f" ({held:,} more like it in the last minute)" if held else ""
        if "out of system resource" in message:
            log.error("cannot accept a connection: %s%s", context.get("exception"), more)
            return
        loop.default_exception_handler(context | {"message": message + more})

    return handle


# -- serving --------------------------------------------------------------------------------------


def guarded_app(server: DocsServer, settings: Settings, host: str) -> Guard:
    """The Streamable HTTP app at /mcp behind the Guard. The SDK's own Host/Origin check is off:
    it switches itself off when bound to anything but a loopback address, and the Guard checks
    in every bind mode."""
    from mcp.server.transport_security import TransportSecuritySettings

    app = server.streamable_http_app(
        streamable_http_path=PATH,
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return Guard(
        app,
        settings.mcp_token,
        listed(settings.mcp_allowed_hosts),
        listed(settings.mcp_allowed_origins),
    )


def serve(server: DocsServer, settings: Settings, host: str, port: int) -> None:
    """Serve `server` on `host`:`port` until stopped."""
    app = guarded_app(server, settings, host)
    asyncio.run(serving(*http_server(app, host, port, settings.log_level)))


def http_server(
    app: Any, host: str, port: int, log_level: str, idle_seconds: float = IDLE_SECONDS
) -> tuple[uvicorn.Server, Connections]:
    """uvicorn serving `app` with the limits of the module doc, and its connections."""
    cap = connection_limit(FD_HEADROOM + 2 * ACCEPT_BATCH)
    connections = Connections(cap, idle_seconds)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_for(connections),
        log_config=None,  # bot/logs.py's handler, format and level
        log_level=log_level.lower(),
        access_log=False,
        backlog=ACCEPT_BATCH,
        limit_concurrency=cap + 1,  # uvicorn counts the new one too: past the cap, 503
        timeout_keep_alive=max(1, round(idle_seconds)),
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    return uvicorn.Server(config), connections


async def serving(server: uvicorn.Server, connections: Connections) -> None:
    """`server` run until it is told to stop, its idle connections swept, and the event loop's
    and uvicorn's failures logged without repeating one kind without bound."""
    asyncio.get_running_loop().set_exception_handler(loop_errors(Repeats()))
    hold_repeats("uvicorn.error", "asyncio")
    config = server.config
    log.info(
        "MCP over Streamable HTTP on http://%s:%d%s (at most %d connections)",
        config.host,
        config.port,
        PATH,
        connections.cap,
    )
    sweeping = asyncio.create_task(
        connections.sweep_every(min(CLEANUP_SECONDS, connections.idle_seconds / 2))
    )
    try:
        await server.serve()
    finally:
        sweeping.cancel()
