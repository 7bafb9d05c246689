"""Try Claude, else offline: the one place where a Claude step's failure is caught.

One question has one deadline (FIELDGUIDE_DEADLINE). Each Claude call gets the time that is left,
and a call that fails with what the API means to be retried (429 rate limit: after its
`retry-after`, never a spend limit; 529 overloaded, another 5xx, a timeout, a lost connection, or
those errors arriving mid-stream: after an exponential backoff with jitter; the server's
`x-should-retry` deciding when it is sent) is tried again, up to FIELDGUIDE_MAX_RETRIES times, as
long as the wait and another attempt still fit in the time left: the one policy of
index/retries.py, which Voyage's calls use too. The SDK's own retries are off: they would sleep a
`retry-after` whatever the deadline. A step that still fails (or replies with something that is
not what was asked for: a body that is not JSON, fields missing) runs offline; the question's
other steps still ask Claude (a failed routing means an unrouted search, and Claude still writes
the answer), each within the time left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from index.retries import retrying

from .clock import REAL, Clock

log = logging.getLogger(__name__)

T = TypeVar("T")

DEADLINE = 45.0  # seconds for one question, all its Claude steps together (FIELDGUIDE_DEADLINE)
MIN_CALL = 0.5  # with less time than this left, a step does not call Claude at all
OFFLINE_NOTE = "answered from the docs without Claude"
# A streamed reply's first byte (and every later read) must come within this many seconds, else
# the attempt fails as a timeout and is tried again or falls back
# (FIELDGUIDE_FIRST_BYTE_TIMEOUT): a model's time to its first token is 0.7-2.7 s
# (tests/standins/claude.py MODEL_TIMING, thinking off), and the stream sends `ping` events while
# it works, so a silence of twice the slowest is a reply that is not coming.
FIRST_BYTE = 5.0


class MessagesClient(Protocol):
    """The Claude client as fieldguide uses it: `anthropic.Anthropic`, or anything shaped like it
    (a proxy's client); only `messages.create` / `messages.stream` and `with_options` are used."""

    timeout: Any  # seconds (float) or an httpx Timeout
    max_retries: int

    @property
    def messages(self) -> Any: ...

    def with_options(self, *, timeout: Any, max_retries: int) -> Any: ...


class Unusable(ValueError):
    """Claude replied, but not with what was asked for (not JSON, fields missing, ...)."""


class OutOfTime(Exception):
    """Less than MIN_CALL seconds of the question's deadline are left."""


# What a Claude step may raise that means "run this step offline": an API error (after the
# retries), too little time, and a reply that is not what was asked for, raised as Unusable where
# the reply is read (`message`, `json_reply`, compose's stream). Nothing else: a programming error
# (AttributeError, TypeError, KeyError, IndexError in our code) is raised, never an offline answer.
# The SDK is imported only when a step fails: an offline bot never loads it (~85 MB, ~2 s).
def failures() -> tuple[type[BaseException], ...]:
    import anthropic

    return (anthropic.APIError, OutOfTime, Unusable)


def error_type(error: BaseException) -> str:
    """The API's error type (`overloaded_error`, ...) from a failed response's or stream event's
    body, or ""."""
    body = getattr(error, "body", None)
    inner = body.get("error") if isinstance(body, dict) else None
    return str(inner.get("type") or "") if isinstance(inner, dict) else ""


def spend_limited(error: BaseException) -> bool:
    """A spend limit (a 429 `enforced_spend_limit_reached` / `contract_spend_limit_reached`, the
    rate-limits and errors pages): retrying fails until the month turns or the limit is raised."""
    body = getattr(error, "body", None)
    inner = body.get("error") if isinstance(body, dict) else None
    details = inner.get("details") if isinstance(inner, dict) else None
    code = details.get("error_code") if isinstance(details, dict) else None
    return isinstance(code, str) and "spend_limit" in code


# error types the API means to be retried, when they arrive as an `error` event inside a stream
# whose status was 200 (the SDK then raises a plain APIStatusError)
RETRIED_TYPES = ("overloaded_error", "api_error", "rate_limit_error", "timeout_error")


def retryable(error: BaseException) -> bool:
    """What the API means to be tried again: 408, 409, 429 (never a spend limit), 5xx (529
    overloaded included), a timeout, a lost connection, and those same errors arriving mid-stream.
    The server's x-should-retry overrides this (index/retries.py), except for a spend limit."""
    import anthropic

    if spend_limited(error):
        return False
    kinds = (
        anthropic.RateLimitError,
        anthropic.InternalServerError,
        anthropic.APIConnectionError,
        anthropic.RequestTimeoutError,
        anthropic.ConflictError,
    )
    if isinstance(error, kinds):
        return True
    return isinstance(error, anthropic.APIStatusError) and error_type(error) in RETRIED_TYPES


def describe(error: BaseException) -> str:
    import anthropic

    if isinstance(error, OutOfTime):
        return "out of time"
    if isinstance(error, anthropic.APIStatusError) and spend_limited(error):
        return f"{type(error).__name__} (spend limit reached)"
    if isinstance(error, anthropic.APIStatusError) and error.status_code == 200:
        return f"{error_type(error) or 'error'} mid-stream"  # an error event inside a stream
    if isinstance(error, anthropic.APIError):
        return type(error).__name__
    return f"unusable reply ({type(error).__name__}: {str(error)[:120]})"


class Claude:
    """The Claude side of one question: the client, the time left, and which steps fell back."""

    def __init__(
        self,
        client: MessagesClient | None,
        deadline: float = DEADLINE,
        clock: Clock = REAL,
    ):
        """`client`: an anthropic.Anthropic, or None (every step offline). Retries: the client's
        `max_retries`. `clock`: where the deadline is read and a retry's backoff waits."""
        self.client = client
        self.clock = clock
        self.ends = clock.monotonic() + deadline
        self.fell_back: dict[str, str] = {}  # step → why it ran offline, in the order they did

    def remaining(self) -> float:
        return self.ends - self.clock.monotonic()

    @property
    def available(self) -> bool:
        """A client and time for a call."""
        return self.client is not None and self.remaining() >= MIN_CALL

    def timeout(self, first_byte: float | None = None) -> Any:
        """One attempt's timeout: the client's own, but no more than the time left; with
        `first_byte` (a streamed reply), each read (the first byte included) gets at most that."""
        assert self.client is not None
        own = self.client.timeout
        total = min(own if isinstance(own, (int, float)) else 600.0, self.remaining())
        if first_byte is None:
            return total
        import anthropic

        return anthropic.Timeout(total, read=min(first_byte, total))

    def call(self, step: str, call: Callable[[Any], T], first_byte: float | None = None) -> T:
        """`call(client)`, tried again on what the API means to be retried (index/retries.py:
        Retry-After or backoff, x-should-retry, never a spend limit) while the wait and another
        attempt fit in the time left; raises the last failure (OutOfTime with too little time for a
        first attempt)."""
        assert self.client is not None
        client = self.client

        def attempt() -> T:
            if self.remaining() < MIN_CALL:
                raise OutOfTime()
            timeout = self.timeout(first_byte)
            return call(client.with_options(timeout=timeout, max_retries=0))

        def noted(state: Any) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            log.info(
                "Claude step %s: %s, trying again in %.2f s",
                step,
                describe(error) if error is not None else "?",
                state.upcoming_sleep,
            )

        policy = retrying(
            retryable,
            client.max_retries,
            ends=self.ends,
            clock=self.clock.monotonic,
            sleep=self.clock.sleep,
            min_call=MIN_CALL,
            before_sleep=noted,
            never=spend_limited,
        )
        return policy(attempt)

    def run(
        self,
        step: str,
        call: Callable[[Any], T],
        offline: Callable[[], T],
        first_byte: float | None = None,
    ) -> T:
        """`call(client)` within this question's deadline, or `offline()` when Claude is absent,
        out of time, or fails for this step."""
        if self.client is None:
            return offline()
        try:
            return self.call(step, call, first_byte)
        except failures() as e:
            self.fall_back(step, describe(e))
            return offline()

    def attempt(
        self, step: str, call: Callable[[Any], T], first_byte: float | None = None
    ) -> tuple[T | None, str]:
        """`call(client)` within this question's deadline, for a step with no offline
        counterpart (the claim check, an answer's rewrite): (result, "") or (None, why it did not
        run)."""
        if self.client is None:
            return None, "no Claude key"
        try:
            return self.call(step, call, first_byte), ""
        except failures() as e:
            log.warning("Claude step %s failed: %s", step, describe(e))
            return None, describe(e)

    def fall_back(self, step: str, why: str) -> None:
        """`step` runs offline, and why."""
        log.warning("Claude step %s failed, running it offline: %s", step, why)
        self.fell_back[step] = why
