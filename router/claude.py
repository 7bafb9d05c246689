"""Try Claude, else offline: the one place where a Claude step's failure is caught.

One question has one deadline (FIELDGUIDE_DEADLINE). Each Claude call gets the time that is left,
and a call that fails with what the API means to be retried (429 rate limit: after its
`retry-after`; 529 overloaded, another 5xx, a timeout or a lost connection: after an exponential
backoff with jitter) is tried again, up to FIELDGUIDE_MAX_RETRIES times, as long as the wait and
another attempt still fit in the time left. The SDK's own retries are off: they would sleep a
`retry-after` whatever the deadline. A step that still fails (or replies with something that is
not what was asked for: a body that is not JSON, fields missing) runs offline; the question's
other steps still ask Claude (a failed routing means an unrouted search, and Claude still writes
the answer), each within the time left.

What the API accepts differs by model (Anthropic's model pages and migration guides, 2026-11:
platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5, .../haiku-5-5/overview,
.../build-with-claude/structured-outputs, .../prompt-caching): the 5.5 models answer a forced
`tool_choice` ("tool" / "any") with a 400, so no step forces a tool: a step that needs a
structured reply asks for it through structured outputs (`output_config.format`, a JSON schema the
reply is decoded against). `output_config.effort` exists on the models with adaptive thinking
(Sonnet / Opus 4.6 and later, every 5.x model, Haiku 5.5) and is sent there only. A
`cache_control` marker is set only where the prefix can reach the model's minimum cacheable
length: a shorter prefix caches nothing.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

DEADLINE = 45.0  # seconds for one question, all its Claude steps together (FIELDGUIDE_DEADLINE)
MIN_CALL = 0.5  # with less time than this left, a step does not call Claude at all
OFFLINE_NOTE = "answered from the docs without Claude"
# backoff before another try of a 529 / 5xx / timeout / lost connection: 0.5 s x 2^n, up to
# BACKOFF_MAX, less up to a quarter of jitter (the SDK's own schedule)
BACKOFF, BACKOFF_MAX = 0.5, 8.0
# the effort the pipeline's steps ask for where a model takes one: each step is a short, well
# specified task (route, quote, answer from given passages, check), and effort is what trades
# thinking for latency on the adaptive-thinking models
EFFORT = "low"


class MessagesClient(Protocol):
    """The Claude client as fieldguide uses it: `anthropic.Anthropic`, or anything shaped like it
    (a proxy's client); only `messages.create` / `messages.stream` and `with_options` are used."""

    timeout: Any  # seconds (float) or an httpx Timeout
    max_retries: int

    @property
    def messages(self) -> Any: ...

    def with_options(self, *, timeout: float, max_retries: int) -> Any: ...


class Unusable(ValueError):
    """Claude replied, but not with what was asked for (not JSON, fields missing, ...)."""


class OutOfTime(Exception):
    """Less than MIN_CALL seconds of the question's deadline are left."""


# What a Claude step may raise that means "run this step offline": API errors (after the
# retries), and a 200 whose body is not the expected message. The SDK raises json.JSONDecodeError
# (a ValueError) for a JSON content type with a body that is not JSON, returns the body as a str
# for another content type (AttributeError on `.content`), and builds a message without validating
# it (missing fields: AttributeError / TypeError / KeyError when read).
# The SDK is imported only when a step fails: an offline bot never loads it (~85 MB, ~2 s).
def failures() -> tuple[type[BaseException], ...]:
    import anthropic

    return (
        anthropic.APIError,
        OutOfTime,
        ValueError,
        AttributeError,
        TypeError,
        KeyError,
        IndexError,
    )


def retryable() -> tuple[type[BaseException], ...]:
    """What the API means to be tried again: 429, 5xx (529 overloaded included), a timeout, a
    lost connection."""
    import anthropic

    return (anthropic.RateLimitError, anthropic.InternalServerError, anthropic.APIConnectionError)


def describe(error: BaseException) -> str:
    import anthropic

    if isinstance(error, OutOfTime):
        return "out of time"
    if isinstance(error, anthropic.APIError):
        return type(error).__name__
    return f"unusable reply ({type(error).__name__}: {str(error)[:120]})"


def retry_after(error: BaseException) -> float | None:
    """The seconds a failed response asks to wait (`retry-after-ms`, else `retry-after`), or
    None."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


class Claude:
    """The Claude side of one question: the client, the time left, and which steps fell back."""

    def __init__(
        self,
        client: MessagesClient | None,
        deadline: float = DEADLINE,
        on_fail: Callable[[str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        """`client`: an anthropic.Anthropic, or None (every step offline); `on_fail(step, why)` is
        told when a step falls back offline. Retries: the client's `max_retries`."""
        self.client = client
        self.clock, self.sleep = clock, sleep
        self.ends = clock() + deadline
        self.on_fail = on_fail
        self.fell_back: dict[str, str] = {}  # step → why it ran offline

    def remaining(self) -> float:
        return self.ends - self.clock()

    @property
    def available(self) -> bool:
        """A client and time for a call."""
        return self.client is not None and self.remaining() >= MIN_CALL

    def timeout(self) -> float:
        """One attempt's timeout: the client's own, but no more than the time left."""
        assert self.client is not None
        own = self.client.timeout
        return min(own if isinstance(own, (int, float)) else 600.0, self.remaining())

    def wait(self, error: BaseException, tries: int) -> float:
        """How long to wait before the next try after `error` (the tries-th failure)."""
        asked = retry_after(error)
        if asked is not None:
            return asked
        return min(BACKOFF * 2**tries, BACKOFF_MAX) * (1 - 0.25 * random.random())

    def call(self, step: str, call: Callable[[Any], T]) -> T:
        """`call(client)`, tried again on what the API means to be retried while the wait and
        another attempt fit in the time left; raises the last failure (OutOfTime with too little
        time for a first attempt)."""
        assert self.client is not None
        tries = 0
        while True:
            if self.remaining() < MIN_CALL:
                raise OutOfTime()
            try:
                return call(self.client.with_options(timeout=self.timeout(), max_retries=0))
            except retryable() as e:
                wait = self.wait(e, tries)
                if tries >= self.client.max_retries or wait + MIN_CALL > self.remaining():
                    raise
                tries += 1
                log.info("Claude step %s: %s, trying again in %.2f s", step, describe(e), wait)
                self.sleep(wait)

    def run(self, step: str, call: Callable[[Any], T], offline: Callable[[], T]) -> T:
        """`call(client)` within this question's deadline, or `offline()` when Claude is absent,
        out of time, or fails for this step."""
        if self.client is None:
            return offline()
        try:
            return self.call(step, call)
        except failures() as e:
            self._fail(step, describe(e))
            return offline()

    def attempt(self, step: str, call: Callable[[Any], T]) -> tuple[T | None, str]:
        """`call(client)` within this question's deadline, for a step with no offline
        counterpart (the claim check): (result, "") or (None, why it did not run)."""
        if self.client is None:
            return None, "no Claude key"
        try:
            return self.call(step, call), ""
        except failures() as e:
            log.warning("Claude step %s failed: %s", step, describe(e))
            return None, describe(e)

    def _fail(self, step: str, why: str) -> None:
        log.warning("Claude step %s failed, running it offline: %s", step, why)
        self.fell_back[step] = why
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


# -- what each model takes -----------------------------------------------------------------------

MODEL_ID = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?:-(\d))?(?:-|$)")


def generation(model: str) -> tuple[int, int]:
    """(major, minor) of a model id: claude-sonnet-5-5 → (5, 5), claude-haiku-4-5-20251001 →
    (4, 5), claude-sonnet-5 → (5, 0); (0, 0) for an id not of that form (a proxy's alias)."""
    m = MODEL_ID.match(model)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (0, 0)


def takes_effort(model: str) -> bool:
    """`output_config.effort` exists on the adaptive-thinking models: Sonnet / Opus 4.6 and
    later, every 5.x model (Haiku 5.5 is the first Haiku with effort levels)."""
    return generation(model) >= (4, 6)


# Prompt caching's minimum cacheable prefix per model, in tokens (the prompt-caching page's
# table and the model pages, 2026-11): a marker on a shorter prefix caches nothing. The longest
# key a model id starts with decides; an id of no known family gets the most common minimum.
MIN_CACHEABLE = {
    "claude-haiku-5-5": 512,
    "claude-sonnet-5-5": 512,
    "claude-opus-5": 512,  # Opus 5 and 5.5
    "claude-fable-5": 512,
    "claude-sonnet-5": 1024,
    "claude-opus-4-8": 1024,
    "claude-opus-4-7": 2048,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
MIN_CACHEABLE_DEFAULT = 1024  # Sonnet 4.x, Opus 4 / 4.1
# a conservative token estimate for that decision: the tokenizers of the 4.7+ models count
# ~3 characters a token of English, older ones ~3.5; 4 under-counts, so a marker is set only on a
# prefix that clearly reaches the minimum
CHARS_PER_TOKEN = 4.0
CACHE_CONTROL = {"type": "ephemeral"}


def min_cacheable(model: str) -> int:
    keys = [k for k in MIN_CACHEABLE if model.startswith(k)]
    return MIN_CACHEABLE[max(keys, key=len)] if keys else MIN_CACHEABLE_DEFAULT


def cached_system(text: str, model: str) -> list[dict]:
    """A system prompt as one text block; it ends the step's cached prefix (`cache_control`) when
    it can reach `model`'s minimum cacheable length, else it carries no marker."""
    block: dict[str, Any] = {"type": "text", "text": text}
    if len(text) / CHARS_PER_TOKEN >= min_cacheable(model):
        block["cache_control"] = CACHE_CONTROL
    return [block]


# -- structured replies --------------------------------------------------------------------------


def closed(schema: dict) -> dict:
    """`schema` with every object closed (additionalProperties false), as structured outputs
    require."""
    out = dict(schema)
    if out.get("type") == "object":
        out["additionalProperties"] = False
        out["properties"] = {k: closed(v) for k, v in out.get("properties", {}).items()}
    if out.get("type") == "array" and "items" in out:
        out["items"] = closed(out["items"])
    return out


def output_config(model: str, schema: dict | None = None) -> dict:
    """The request's `output_config`: the JSON schema the reply must follow (structured
    outputs), and the effort where the model takes one."""
    config: dict[str, Any] = {}
    if schema is not None:
        config["format"] = {"type": "json_schema", "schema": closed(schema)}
    if takes_effort(model):
        config["effort"] = EFFORT
    return config


def structured(
    client: Any, model: str, system: str, user: str, schema: dict, max_tokens: int
) -> tuple[dict, dict]:
    """(the JSON object Claude wrote following `schema`, the usage): a structured output
    (`output_config.format`), never a forced tool call."""
    msg = client.messages.create(
        model=model,
        max_tokens=max_tokens,
        system=cached_system(system, model),
        messages=[{"role": "user", "content": user}],
        output_config=output_config(model, schema),
    )
    return json_reply(msg), usage_of(msg)


def json_reply(msg: Any) -> dict:
    """The JSON object of a structured reply (its text blocks; thinking blocks skipped), or
    Unusable."""
    if msg.stop_reason == "max_tokens":
        raise Unusable("the reply was cut short (max_tokens)")
    if msg.stop_reason == "refusal":
        raise Unusable("Claude declined (stop_reason refusal)")
    text = "".join(b.text for b in msg.content if b.type == "text").strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise Unusable(f"a reply that is not JSON: {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise Unusable(f"a JSON {type(value).__name__} where an object was asked for")
    return value
