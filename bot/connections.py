"""What an HTTP server of fieldguide's (Slack's `serve --http`, `mcp --http`) lets a connection
cost: idle or stalled connections neither fill the server nor linger. Requests are read
asynchronously (no thread waits on a slow client), so the connection cap can be high: open file
descriptors are what it costs, and it stays below the process's limit (`ulimit -n`)."""

from __future__ import annotations

import resource

HTTP_CONNECTIONS = 1000  # at most, less what the process's file limit leaves (FD_HEADROOM)
FD_HEADROOM = 100  # descriptors kept for the index, the model, PostgreSQL and API clients
# a connection that has sent no whole request for this long is closed: never one, its headers
# trickling in, or idle between requests (Slack's and MCP clients' requests arrive whole at once)
IDLE_SECONDS = 10
CLEANUP_SECONDS = 2  # how often idle connections are looked for
MAX_HEADER_BYTES = 64 * 1024  # a request's headers are a few hundred bytes


def connection_limit(headroom: int = FD_HEADROOM) -> int:
    """Connections served at once: HTTP_CONNECTIONS, or fewer, `headroom` below the process's
    open-file limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return HTTP_CONNECTIONS
    return max(10, min(HTTP_CONNECTIONS, soft - headroom))
