"""A Claude message: what one request asks for, per model, and what its reply holds.

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

import html
import json
import re
from typing import Any

from .claude import Unusable

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
    """`total[step]` is the step's usage (a step called again, its calls together); the answer's
    totals are summed beside the steps."""
    total[step] = merge_usage(total[step], usage) if step in total else usage
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
    return [cached_text(text, model)]


def cached_text(text: str, model: str, before: str = "") -> dict:
    """A text block that ends a step's cached prefix (`cache_control`) when that prefix (`before`
    it, the system prompt, and itself) can reach `model`'s minimum cacheable length; else it
    carries no marker."""
    block: dict[str, Any] = {"type": "text", "text": text}
    if (len(before) + len(text)) / CHARS_PER_TOKEN >= min_cacheable(model):
        block["cache_control"] = CACHE_CONTROL
    return block


def cached_turns(convo: list[dict], model: str, last: bool = False) -> list[dict]:
    """A conversation of rounds (the answer's second looks) as sent: each user turn a later
    round sends again ends a cached prefix, so that round reads it from the cache: the first turn
    (the docs read and the question) and the last two (`cache_control` on their last block; with
    the system prompt's, the API's four a request), where the prefix can reach `model`'s minimum
    cacheable length. In the `last` round (no look left) the newest turn is not written to the
    cache: no round reads it. The turns are copied; `convo` is left as it is."""
    users = [i for i, m in enumerate(convo) if m["role"] == "user"]
    ends = {users[0], *users[-2 : len(users) - last]} if users else set()
    out, chars = [], 0
    for i, turn in enumerate(convo):
        content = turn["content"]
        chars += len(json.dumps(content, ensure_ascii=False))
        long_enough = chars / CHARS_PER_TOKEN >= min_cacheable(model)
        if i in ends and isinstance(content, list) and content and long_enough:
            end = {**content[-1], "cache_control": CACHE_CONTROL}
            turn = {**turn, "content": [*content[:-1], end]}
        out.append(turn)
    return out


# -- doc text as data ----------------------------------------------------------------------------


def data(tag: str, text: str, **attributes: object) -> str:
    """Text that is not ours to obey (the docs' titles, headings and passages, intents.yaml, a
    conversation, a question) as it is put into a request: inside `<tag ...>` and `</tag>`, in
    the user turn, never the system prompt, escaped (`&`, `<`, `>`; quotes in attributes) so that
    nothing in it can close its tag or open another. Every prompt says what its tags hold is data,
    never instructions."""
    attrs = "".join(f' {k}="{html.escape(str(v), quote=True)}"' for k, v in attributes.items())
    return f"<{tag}{attrs}>{html.escape(text, quote=False)}</{tag}>"


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
    user: str | list[dict],
    schema: dict,
    max_tokens: int,
    step: str = "",
) -> tuple[dict, dict]:
    """(the JSON object Claude wrote following `schema`, the usage): a structured output
    (`output_config.format`), never a forced tool call. `system`: the step's own instructions
    only; `user`: the user turn (a text, or its blocks), where any doc text goes (`data`)."""
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
