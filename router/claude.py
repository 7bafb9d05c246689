"""Try Claude, else offline: the one place where a Claude step's failure is caught.

One question has one deadline. Each Claude call gets the time that is left (`with_options(timeout=,
max_retries=)`, never more than the client's own timeout and retries), and once a step has failed
(an API error after the SDK's retries, a timeout, or a reply that is not what was asked for: a body
that is not JSON, missing fields, a tool call that does not fit its schema) every later step of that
question runs offline, so a Claude that does not answer costs one timeout, not four.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

DEADLINE = 45.0  # seconds for one question, all its Claude steps together (FIELDGUIDE_DEADLINE)
MIN_CALL = 0.5  # with less time than this left, a step does not call Claude at all
OFFLINE_NOTE = "answered from the docs without Claude"


class MessagesClient(Protocol):
    """The Claude client as fieldguide uses it: `anthropic.Anthropic`, or anything shaped like it
    (a proxy's client); only `messages.create` / `messages.stream` and `with_options` are used."""

    timeout: Any  # seconds (float) or an httpx Timeout
    max_retries: int

    @property
    def messages(self) -> Any: ...

    def with_options(self, *, timeout: float, max_retries: int) -> Any: ...


class Unusable(ValueError):
    """Claude replied, but not with what was asked for (no tool call, fields missing, ...)."""


# What a Claude step may raise that means "run this step offline": API errors (after the SDK's
# retries), and a 200 whose body is not the expected message. The SDK raises json.JSONDecodeError (a
# ValueError) for a JSON content type with a body that is not JSON, returns the body as a str for
# another content type (AttributeError on `.content`), and builds a message without validating it
# (missing fields: AttributeError / TypeError / KeyError when read).
# The SDK is imported only when a step fails: an offline bot never loads it (~85 MB, ~2 s).
def failures() -> tuple[type[BaseException], ...]:
    import anthropic

    return (anthropic.APIError, ValueError, AttributeError, TypeError, KeyError, IndexError)


def describe(error: BaseException) -> str:
    import anthropic

    if isinstance(error, anthropic.APIError):
        return type(error).__name__
    return f"unusable reply ({type(error).__name__}: {str(error)[:120]})"


class Claude:
    """The Claude side of one question: the client, the time left, and whether a step failed."""

    def __init__(
        self,
        client: MessagesClient | None,
        deadline: float = DEADLINE,
        on_fail: Callable[[str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`client`: an anthropic.Anthropic, or None (every step offline); `on_fail(step, why)` is
        told when a step falls back offline."""
        self.client = client
        self.clock = clock
        self.ends = clock() + deadline
        self.on_fail = on_fail
        self.failed = ""  # why the first failed step failed; "" while none has

    def remaining(self) -> float:
        return self.ends - self.clock()

    @property
    def available(self) -> bool:
        return self.client is not None and not self.failed

    def budget(self) -> tuple[float, int]:
        """(timeout, max_retries) for the next call: each attempt may take the client's own timeout
        but no more than the time left, and only as many retries as still fit in it."""
        assert self.client is not None  # only asked while Claude is available
        left = self.remaining()
        own = self.client.timeout
        timeout = min(own if isinstance(own, (int, float)) else 600.0, left)
        fits = int(left // timeout) - 1 if timeout > 0 else 0
        return timeout, max(0, min(self.client.max_retries, fits))

    def run(self, step: str, call: Callable[[Any], T], offline: Callable[[], T]) -> T:
        """`call(client)` with this question's budget, or `offline()` when Claude is absent, has
        already failed for this question, is out of time, or fails now."""
        if not self.available:
            return offline()
        if self.remaining() < MIN_CALL:
            self._fail(step, "out of time")
            return offline()
        timeout, retries = self.budget()
        assert self.client is not None  # available
        try:
            return call(self.client.with_options(timeout=timeout, max_retries=retries))
        except failures() as e:
            self._fail(step, describe(e))
            return offline()

    def attempt(self, step: str, call: Callable[[Any], T]) -> tuple[T | None, str]:
        """`call(client)` with this question's budget, for a step with no offline counterpart
        whose failure changes nothing else (the claim check): (result, "") or (None, why it did
        not run). A failure here does not turn the question's later steps offline."""
        if self.client is None:
            return None, "no Claude key"
        if self.failed:
            return None, f"Claude failed earlier ({self.failed})"
        if self.remaining() < MIN_CALL:
            return None, "out of time"
        timeout, retries = self.budget()
        try:
            return call(self.client.with_options(timeout=timeout, max_retries=retries)), ""
        except failures() as e:
            log.warning("Claude step %s failed: %s", step, describe(e))
            return None, describe(e)

    def _fail(self, step: str, why: str) -> None:
        log.warning("Claude step %s failed, running it offline: %s", step, why)
        self.failed = why
        if self.on_fail is not None:
            self.on_fail(step, why)


TOKENS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def usage_of(msg: Any) -> dict:
    """A reply's token counts (input_tokens counts only the part of the prompt not read from or
    written to the cache) and the model that billed them."""
    u = msg.usage
    return {"model": str(getattr(msg, "model", "") or "")} | {
        k: int(getattr(u, k, 0) or 0) for k in TOKENS
    }


def merge_usage(a: dict, b: dict) -> dict:
    """Two calls of one step (a retry) as one: tokens added, the later model kept."""
    return {**a, **b} | {k: a.get(k, 0) + b.get(k, 0) for k in TOKENS}


def add_usage(total: dict, step: str, usage: dict) -> None:
    """`total[step]` is the step's usage; the answer's totals are summed beside the steps."""
    total[step] = usage
    for k in TOKENS:
        total[k] = total.get(k, 0) + (usage.get(k) or 0)


# Prompt caching: a breakpoint on the last block of a step's stable prefix (the tools, which come
# first, and the system prompt) caches that prefix; everything after it varies by question.
CACHE_CONTROL = {"type": "ephemeral"}


def cached_system(text: str) -> list[dict]:
    """A system prompt as one text block ending the step's cached prefix."""
    return [{"type": "text", "text": text, "cache_control": CACHE_CONTROL}]


def strict_tool(name: str, description: str, schema: dict) -> dict:
    """A tool whose input the API validates against `schema` (`strict`: objects closed with
    additionalProperties false; strict schemas allow no numeric bounds nor maxItems)."""
    return {
        "name": name,
        "description": description,
        "input_schema": _closed(schema),
        "strict": True,
    }


def _closed(schema: dict) -> dict:
    out = dict(schema)
    if out.get("type") == "object":
        out["additionalProperties"] = False
        out["properties"] = {k: _closed(v) for k, v in out.get("properties", {}).items()}
    if out.get("type") == "array" and "items" in out:
        out["items"] = _closed(out["items"])
    return out


def tool_input(msg: Any, name: str) -> dict:
    """The input of the forced tool call `name`, or Unusable."""
    block = next((b for b in msg.content if b.type == "tool_use" and b.name == name), None)
    if block is None or not isinstance(block.input, dict):
        raise Unusable(f"no {name} tool call")
    if msg.stop_reason == "max_tokens":
        raise Unusable(f"the {name} tool call was cut short (max_tokens)")
    return block.input
