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
import re
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from index.retries import retrying

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
# The effort each step asks for where a model takes one (`output_config.effort`, the thinking
# page: "low" skips thinking on simple tasks and writes tersely, the Haiku / Opus 5.5 default is
# "medium", the others' "high"). Routing, condensing, extracting and checking are short, closed
# tasks: low. The answer is written from given passages whose every sentence must cite one: medium,
# which keeps the answer's care without the "high" default's long replies.
EFFORT = {
    "classify": "low",
    "condense": "low",
    "extract": "low",
    "check": "low",
    "answer": "medium",
}
# a model that thinks whatever is asked (Opus 5.5, Fable 5.x: "thinking cannot be disabled") spends
# thinking tokens out of max_tokens; this much room is added so the reply itself is not cut
THINKING_ROOM = 4000


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
            clock=self.clock,
            sleep=self.sleep,
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


def thinking_for(model: str) -> dict | None:
    """The `thinking` a step sends to think as little as the model allows (the thinking page and
    the 5.x migration guides, 2026-11): Sonnet 5.5 turns thinking off with `between_tools` (it
    answers `disabled` with a 400); Haiku 5.5, Sonnet 5 and Opus 5 take `disabled` (at effort high
    or lower); Opus 5.5 and Fable 5.x always think (None: their effort keeps it short); models
    before 5 think only when asked (None)."""
    if model.startswith("claude-sonnet-5-5"):
        return {"type": "between_tools"}
    if always_thinks(model):
        return None
    return {"type": "disabled"} if generation(model) >= (5, 0) else None


def always_thinks(model: str) -> bool:
    """Opus 5.5 and Fable 5.x: adaptive thinking always on; its tokens count toward max_tokens."""
    return model.startswith(("claude-opus-5-5", "claude-fable-5"))


def output_config(model: str, schema: dict | None = None, step: str = "") -> dict:
    """The request's `output_config`: the JSON schema the reply must follow (structured
    outputs), and the step's effort where the model takes one."""
    config: dict[str, Any] = {}
    if schema is not None:
        config["format"] = {"type": "json_schema", "schema": closed(schema)}
    if takes_effort(model):
        config["effort"] = EFFORT.get(step, "low")
    return config


def options(model: str, step: str, max_tokens: int, schema: dict | None = None) -> dict:
    """A step's request parameters besides its prompt: max_tokens (with THINKING_ROOM on a model
    that always thinks), thinking as low as the model allows, the output config."""
    out: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens + (THINKING_ROOM if always_thinks(model) else 0),
    }
    thinking = thinking_for(model)
    if thinking is not None:
        out["thinking"] = thinking
    config = output_config(model, schema, step)
    if config:
        out["output_config"] = config
    return out


def structured(
    client: Any,
    model: str,
    system: str,
    user: str,
    schema: dict,
    max_tokens: int,
    step: str = "",
) -> tuple[dict, dict]:
    """(the JSON object Claude wrote following `schema`, the usage): a structured output
    (`output_config.format`), never a forced tool call."""
    try:
        msg = client.messages.create(
            system=cached_system(system, model),
            messages=[{"role": "user", "content": user}],
            **options(model, step, max_tokens, schema),
        )
    except json.JSONDecodeError as e:  # the SDK, reading a JSON content type that is not JSON
        raise Unusable(f"a body that is not JSON ({e})") from None
    msg = message(msg)
    return json_reply(msg), usage_of(msg)


def message(msg: Any) -> Any:
    """`msg` if it is a message to read (the SDK builds one from any 200 without validating it:
    a body of another content type comes back as a str, missing fields raise when read), else
    Unusable. Only the reply's shape is checked here, so an error in our own reading of it is
    never taken for an unusable reply."""
    from anthropic.types import Message

    if not isinstance(msg, Message):
        raise Unusable(f"a {type(msg).__name__} where a message was asked for")
    missing = [f for f in ("content", "usage") if f not in msg.model_fields_set]
    if missing or not isinstance(msg.__dict__.get("content"), list):
        raise Unusable(f"a message without {', '.join(missing) or 'a content list'}")
    for block in msg.content:
        if not isinstance(getattr(block, "type", None), str):
            raise Unusable("a content block without a type")
        if block.type == "text" and not isinstance(getattr(block, "text", None), str):
            raise Unusable("a text block without text")
    return msg


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
