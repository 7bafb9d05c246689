"""Retrying Voyage calls (embeddings, reranking) with tenacity: a rate limit, an outage, a timeout
or a dropped connection is retried after exponential backoff with jitter, or after what the
service asked for in Retry-After (a 429 carries it), capped; anything else is not retried."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)
from tenacity.wait import wait_base


def retry_after(error: BaseException | None) -> float | None:
    """Seconds a failed response's Retry-After header asks to wait (a number or an HTTP date),
    or None when it has none."""
    headers = getattr(error, "headers", None) or {}
    value = next((str(v) for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class wait_retry_after(wait_base):  # noqa: N801 (named as tenacity's wait strategies are)
    """Retry-After when the failure carries it (at most `cap` seconds), else `backoff`."""

    def __init__(self, backoff: wait_base, cap: float) -> None:
        self.backoff, self.cap = backoff, cap

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        asked = retry_after(outcome.exception() if outcome is not None else None)
        return min(asked, self.cap) if asked is not None else self.backoff(retry_state)


def retryable() -> tuple[type[Exception], ...]:
    """The voyageai errors worth another try: rate limits, outages, timeouts, lost connections."""
    import voyageai.error as verr  # the client library is loaded only when Voyage is used

    return (
        verr.RateLimitError,
        verr.ServiceUnavailableError,
        verr.ServerError,
        verr.Timeout,
        verr.APIConnectionError,
    )


def voyage_retrying(
    retries: int, initial: float = 0.5, max_backoff: float = 8.0, max_retry_after: float = 60.0
) -> Retrying:
    """A tenacity controller for one Voyage call: `retries` more tries after the first, waiting
    initial × 2^n + up to `initial` of jitter (at most `max_backoff`), or Retry-After (at most
    `max_retry_after`); the last failure is raised as it is."""
    return Retrying(
        stop=stop_after_attempt(retries + 1),
        wait=wait_retry_after(
            wait_exponential_jitter(multiplier=initial, max=max_backoff, jitter=initial),
            max_retry_after,
        ),
        retry=retry_if_exception_type(retryable()),
        reraise=True,
    )
