"""The one retry policy for every retry loop, built on tenacity: the calls to a web API (Claude's
Messages API, Voyage's embeddings and reranker), Slack at start-up (bot/slack/slack_app.py) and a
replica's connection to the fleet's database (index/publish.py). A failure worth another try is
tried again after what the service asked for (`retry-after-ms` / `retry-after`: seconds or an HTTP
date), else after an exponential backoff with jitter; the server's `x-should-retry: true|false`
overrides the kind of the error; tries stop after `retries` more (None: no count), before a wait
and another attempt would pass the caller's deadline (`ends`, on `clock`), or once `until` is set.
Which errors are worth another try is the caller's (`should_retry`): router/claude.py for Claude
(never a spend limit), `voyage_retryable` here for Voyage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_never,
    stop_when_event_set,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

# backoff before another try: INITIAL s x 2^n plus up to INITIAL of jitter, at most MAX_BACKOFF
# (the Anthropic SDK's own schedule: 0.5 s doubling to 8 s)
INITIAL, MAX_BACKOFF = 0.5, 8.0


def headers_of(error: BaseException | None) -> dict[str, str]:
    """A failed response's headers, lower-cased: the anthropic SDK's `error.response.headers`,
    voyageai's `error.headers`."""
    response = getattr(error, "response", None)
    raw = getattr(response, "headers", None) or getattr(error, "headers", None) or {}
    try:
        return {str(k).lower(): str(v) for k, v in raw.items()}
    except AttributeError:
        return {}


def retry_after(error: BaseException | None) -> float | None:
    """Seconds a failed response asks to wait (`retry-after-ms`, else `retry-after` as a number
    or an HTTP date), or None when it asks nothing."""
    headers = headers_of(error)
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            pass
        if scale == 1.0:
            try:
                return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
            except (TypeError, ValueError):
                return None
    return None


def server_says(error: BaseException) -> bool | None:
    """The server's `x-should-retry` header: True, False, or None when it says nothing."""
    value = headers_of(error).get("x-should-retry", "").strip().lower()
    return {"true": True, "false": False}.get(value)


class wait_retry_after(wait_base):  # noqa: N801 (named as tenacity's wait strategies are)
    """Retry-After when the failure carries it (at most `cap` seconds), else `backoff`."""

    def __init__(self, backoff: wait_base, cap: float) -> None:
        self.backoff, self.cap = backoff, cap

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        asked = retry_after(outcome.exception() if outcome is not None else None)
        return min(asked, self.cap) if asked is not None else self.backoff(retry_state)


class stop_at_deadline(stop_base):  # noqa: N801
    """Stop when the coming wait and another attempt of at least `min_call` seconds would end
    after `ends` (on `clock`)."""

    def __init__(self, ends: float, clock: Callable[[], float], min_call: float) -> None:
        self.ends, self.clock, self.min_call = ends, clock, min_call

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.clock() + retry_state.upcoming_sleep + self.min_call > self.ends


def retrying(
    should_retry: Callable[[BaseException], bool],
    retries: int | None,
    ends: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
    min_call: float = 0.0,
    initial: float = INITIAL,
    max_backoff: float = MAX_BACKOFF,
    max_retry_after: float = 60.0,
    before_sleep: Callable[[RetryCallState], Any] | None = None,
    never: Callable[[BaseException], bool] | None = None,
    until: threading.Event | None = None,
) -> Retrying:
    """A tenacity controller for one call: up to `retries` more tries (None: no count) of what
    `should_retry` accepts (the server's x-should-retry overriding it, except for what `never`
    names: a spend limit, a refused token), each after Retry-After (at most `max_retry_after`) or
    the backoff (`sleep`: an Event's wait ends it early), none that would not fit before `ends`
    and none once `until` is set; the last failure is raised as it is."""

    def worth(error: BaseException) -> bool:
        if never is not None and never(error):
            return False
        said = server_says(error)
        return should_retry(error) if said is None else said

    stop: stop_base = stop_never if retries is None else stop_after_attempt(retries + 1)
    if ends is not None:
        stop = stop | stop_at_deadline(ends, clock, min_call)
    if until is not None:
        stop = stop | stop_when_event_set(until)
    return Retrying(
        stop=stop,
        wait=wait_retry_after(
            wait_exponential_jitter(multiplier=initial, max=max_backoff, jitter=initial),
            max_retry_after,
        ),
        retry=retry_if_exception(worth),
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )


def voyage_retryable(error: BaseException) -> bool:
    """The voyageai errors worth another try: rate limits, outages, timeouts, lost connections."""
    import voyageai.error as verr  # the client library is loaded only when Voyage is used

    return isinstance(
        error,
        (
            verr.RateLimitError,
            verr.ServiceUnavailableError,
            verr.ServerError,
            verr.Timeout,
            verr.APIConnectionError,
        ),
    )


def voyage_retrying(
    retries: int, initial: float = INITIAL, max_backoff: float = MAX_BACKOFF, max_retry_after=60.0
) -> Retrying:
    """The policy for one Voyage call (indexing: patient; a question's: `retries` 0)."""
    return retrying(
        voyage_retryable,
        retries,
        initial=initial,
        max_backoff=max_backoff,
        max_retry_after=max_retry_after,
    )
