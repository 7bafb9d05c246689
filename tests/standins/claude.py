"""Anthropic's Messages API as the real anthropic client meets it, plain and streamed, with
citations, tool calls, stop reasons and prompt caching billed as the API bills it (`FakeClaude`, a
handler for a StubServer: server.py)."""

from __future__ import annotations

import hashlib
import html
import json
import re
import threading
from typing import Any

from router.clock import REAL, Clock

from .server import Request


def claude_message(
    *content: dict, stop_reason: str = "end_turn", model: str = "claude-haiku-4-5"
) -> dict:
    """A Messages API response body with the given content blocks."""
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 120,
            "output_tokens": 30,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


def structured_message(data: object, **kw) -> dict:
    """A structured output's reply (output_config.format): the JSON as one text block."""
    return claude_message(text_block(json.dumps(data)), **kw)


def tool_use(name: str, input: dict) -> dict:
    return {"type": "tool_use", "id": "toolu_stub", "name": name, "input": input}


def text_block(text: str, citations: list | None = None) -> dict:
    block: dict[str, object] = {"type": "text", "text": text}
    if citations is not None:
        block["citations"] = citations
    return block


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def words(text: str) -> list[str]:
    """Pieces of text as a model streams them: a word with the space after it."""
    return re.findall(r"\s*\S+\s*|\s+", text) or [text]


# Prompt caching as the Messages API bills it. The stub has no tokenizer: a token is taken to be
# about 3.5 characters of the request's JSON (Anthropic's rule of thumb for English text).
CHARS_PER_TOKEN = 3.5
# the shortest prefix each model caches (Anthropic's prompt-caching docs, 2026-11): shorter ones
# are billed as plain input, with no error
MIN_CACHEABLE = {
    "claude-haiku-5-5": 512,
    "claude-sonnet-5-5": 512,
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-opus-4-7": 2048,
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
MIN_CACHEABLE_DEFAULT = 1024  # Sonnet 5, Sonnet 4.x, Opus 4.8, Opus 4 / 4.1
CACHE_TTL = 300.0  # seconds an ephemeral entry lives after its last use
MAX_BREAKPOINTS = 4


def estimate_tokens(part: object) -> int:
    text = json.dumps(part, sort_keys=True, ensure_ascii=False)
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def min_cacheable(model: str) -> int:
    return next(
        (n for prefix, n in MIN_CACHEABLE.items() if model.startswith(prefix)),
        MIN_CACHEABLE_DEFAULT,
    )


def prompt_parts(body: dict) -> list[tuple[object, bool]]:
    """The request's prompt in the order the API caches it (tools, system, messages), block by
    block: (the block without its cache_control, whether it ends a cached prefix)."""
    parts: list[tuple[object, bool]] = []

    def add(block: object) -> None:
        if isinstance(block, dict) and "cache_control" in block:
            parts.append(({k: v for k, v in block.items() if k != "cache_control"}, True))
        else:
            parts.append((block, False))

    for tool in body.get("tools") or []:
        add(tool)
    system = body.get("system")
    for block in [system] if isinstance(system, str) else system or []:
        add(block)
    for m in body.get("messages", []):
        content = m.get("content")
        for block in [content] if isinstance(content, str) else content or []:
            add(block)
    if body.get("tool_choice"):  # a change of tool_choice changes what follows the tools
        parts.append((body["tool_choice"], False))
    return parts


class FakeClaude:
    """The Messages API as the pipeline meets it, answering as the real API does.

    A request is recognised by what it asks for, never by its prompt text: the `choose_intent` tool
    (classify), the `record_passages` tool (extract), `search_result` blocks (the answer) and
    anything else (condense). The answer is `answer`: a list of segments, each a plain string or
    `(text, [cite, ...])` where a cite is `(search_result_index, start_block_index,
    end_block_index)`: its `cited_text` is the text of those blocks of that search result joined,
    as the real API builds it; a dict cite is sent as given (a fabricated one). `stop_reasons` are
    served to the answer calls in turn (the last one repeats). With `"stream": true` the reply is
    server-sent events, as the API streams them. Delays: `latency` before a classify / extract /
    condense reply, `first_token` before the answer's first text, then `words_per_second`, each
    waited on `clock` (a test's router.clock.Clock: the waits then take no real time).
    """

    def __init__(
        self,
        answer: list | None = None,
        passages: list | None = None,
        quote: int = 1,
        intents: list | None = None,
        condensed: str = "How do I rotate the webhook signing secret?",
        stop_reasons: list[str] | None = None,
        latency: float = 0.0,
        first_token: float = 0.0,
        words_per_second: float | None = None,
        cache: bool = True,
        unsupported: tuple[str, ...] = (),
        uncited: str = "no_claim",
        not_covered: tuple[str, ...] = (),
        elsewhere: dict[str, str] | None = None,
        judgement: dict | list[dict] | None = None,
        rules: bool = True,
        timing: dict[str, tuple[float, float]] | None = None,
        down: dict[str, tuple] | None = None,
        looks: list[str | None] | None = None,
        rewrite: list | None = None,
        clock: Clock = REAL,
    ):
        self.answer: list[Any] = (
            answer
            if answer is not None
            else [
                ("Check the header [see docs](https://evil.example).", [(0, 0, 1)]),
                " That is all.",
            ]
        )
        self.passages = passages  # None: chunk 1's first paragraph (or `quote` sentences of it)
        self.quote = quote
        self.default_intents = intents is None
        self.intents = intents or [{"intent": "authentication", "confidence": 0.9}]
        self.condensed = condensed
        self.stop_reasons = list(stop_reasons or ["end_turn"])
        self.latency, self.first_token, self.words_per_second = (
            latency,
            first_token,
            words_per_second,
        )
        self.clock = clock
        self.seen: list[dict] = []
        self.lock = threading.Lock()
        # prompt caching: honoured (cache_control breakpoints billed as the API bills them) or,
        # with cache=False, every prompt billed in full, as without cache_control
        self.cache_on = cache
        self.cache: dict[str, float] = {}  # prefix hash -> when it expires
        # the claim check's verdicts: a sentence holding one of `unsupported` is unsupported, a
        # sentence holding one of `not_covered` says the docs do not cover something, a sentence
        # that cites no passage gets `uncited`, any other is supported
        self.unsupported, self.uncited, self.not_covered = unsupported, uncited, not_covered
        # a sentence holding a key of `elsewhere` is supported_elsewhere, by the passages whose
        # text holds its value
        self.elsewhere = elsewhere or {}
        self.judgement: dict | list[dict] = judgement or {
            "faithfulness": "faithful",
            "correctness": "correct",
            "reason": "The answer states what its passages say.",
        }
        # the API's rules as the docs give them (api_rules), and what it refused
        self.rules = rules
        self.refused: list[dict] = []
        # faults served to the next requests, whatever they ask (rate_limited(1), OVERLOADED),
        # and a step that is down (kind → the fault every call of it gets); what was failed
        self.faults: list[tuple] = []
        # faults served to the next calls of one kind (step → faults in turn)
        self.faults_for: dict[str, list] = {}
        self.down: dict[str, tuple] = dict(down or {})
        self.failed: list[tuple[str, int]] = []
        # model → (seconds to the first token, output tokens per second): MODEL_TIMING
        self.timing = timing
        # an answer request that offers a tool calls it with these queries in turn (one per
        # round, while tool_choice allows it; a None round answers), then answers
        self.looks = list(looks or [])
        self.issued = 0  # tool calls made, for their ids
        # the segments (as `answer`) of an answer asked for again once written: a request whose
        # messages end with a written reply (text, no tool call) and a user turn; None: `answer`
        self.rewrite = rewrite

    def kind(self, body: dict) -> str:
        tools = [t.get("name") for t in body.get("tools", [])]
        asked = structured_kind(body)  # a structured output, by its schema's fields
        if "choose_intent" in tools or asked == "classify":
            return "classify"
        if "record_passages" in tools or asked == "extract":
            return "extract"
        if "check_claims" in tools or asked == "check":
            return "check"
        if "grade_answer" in tools or asked == "judge":
            return "judge"
        if asked == "describe":
            return "describe"
        if self.search_results(body):
            return "answer"
        return "condense"

    @staticmethod
    def search_results(body: dict) -> list[dict]:
        """Every search_result block of the request in order, those inside tool results
        included: what a citation's search_result_index counts."""
        return search_results(body)

    def calls(self, kind: str) -> list[dict]:
        with self.lock:
            return [b for b in self.seen if self.kind(b) == kind]

    def __call__(self, req: Request):
        body = req.json
        refused = api_rules(body) if self.rules else None
        if refused is not None:
            with self.lock:
                self.refused.append(body)
            return refused
        with self.lock:
            kind = self.kind(body)
            fault = self.faults.pop(0) if self.faults else None
            if fault is None and self.faults_for.get(kind):
                fault = self.faults_for[kind].pop(0)
            down = self.down.get(kind)
        served = fault or down
        if callable(served):  # a fault built per request (a stream failing mid-way, a hang)
            served = served(body)
        if served is not None:
            with self.lock:
                self.failed.append((kind, served[0]))
            return served
        breakpoints = sum(flag for _, flag in prompt_parts(body))
        if breakpoints > MAX_BREAKPOINTS:
            return 400, {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control"
                    f" may be provided. Found {breakpoints}.",
                },
            }
        with self.lock:
            self.seen.append(body)
        message = self.reply(body, kind)
        if isinstance(message, tuple):  # an error the reply is (the keyed stand-in's)
            return message
        message["model"] = body.get("model", message["model"])
        thought = thinking_tokens(body)
        if thought:
            message = with_thinking(message, thought, int(body.get("max_tokens") or 0))
        message["usage"] = self.bill(body, message)
        first, per_word = self.pace(body, message)
        if thought and self.timing and body.get("model") in self.timing:
            first += thought / self.timing[body["model"]][1]  # thinking comes before the text
        if body.get("stream"):
            return 200, self.events(message, kind, body, first, per_word)
        n = sum(len(words(b.get("text") or json.dumps(b.get("input")))) for b in message["content"])
        self.clock.sleep(first + n * per_word)
        return 200, message

    def reply(self, body: dict, kind: str) -> dict | tuple:
        """The message that answers a request of this kind (or an error: status, body)."""
        if kind == "answer":
            return self.answer_message(body)
        message = getattr(self, kind)(body)
        if structured_kind(body):  # asked through output_config.format: JSON text
            message = as_json_text(message)
        return message

    def pace(self, body: dict, message: dict) -> tuple[float, float]:
        """(seconds before the first token, seconds per word after it): a model's published
        latency and output speed (`timing`, e.g. MODEL_TIMING), else the fixed delays given."""
        timing = self.timing.get(body.get("model", "")) if self.timing else None
        if timing is not None:
            first_token, tokens_per_second = timing
            return first_token, TOKENS_PER_WORD / tokens_per_second
        if self.kind(body) != "answer":
            return self.latency, 0.0
        return self.first_token, (1 / self.words_per_second if self.words_per_second else 0.0)

    def bill(self, body: dict, message: dict) -> dict:
        """The usage the API reports: the longest cached prefix still alive is read
        (cache_read_input_tokens), the rest of the prompt up to the last breakpoint is written
        (cache_creation_input_tokens) when that prefix is at least the model's minimum, and
        input_tokens counts what follows the last breakpoint (or all of it, uncached)."""
        parts = prompt_parts(body)
        total = sum(estimate_tokens(p) for p, _ in parts)
        output = sum(
            estimate_tokens(b.get("text") or b.get("input"))
            for b in message["content"]
            if b["type"] != "thinking"
        ) + thinking_tokens(body)
        read = written = 0
        if self.cache_on:
            model = body.get("model", "")
            minimum = min_cacheable(model)
            prefixes, length, digest = [], 0, hashlib.sha256(model.encode())
            for part, breakpoint in parts:
                length += estimate_tokens(part)
                digest.update(json.dumps(part, sort_keys=True).encode())
                if breakpoint and length >= minimum:
                    prefixes.append((digest.copy().hexdigest(), length))
            with self.lock:
                now = self.clock.monotonic()
                hits = [n for key, n in prefixes if self.cache.get(key, 0.0) > now]
                read = max(hits, default=0)
                for key, _ in prefixes:
                    self.cache[key] = now + CACHE_TTL  # written or refreshed
            written = max((n for _, n in prefixes), default=0) - read if prefixes else 0
        return {
            "input_tokens": total - read - written,
            "output_tokens": output,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }

    # -- the replies -------------------------------------------------------------------------------

    def check(self, body: dict) -> dict:
        """Verdicts for the claim check's numbered sentences (see __init__)."""
        text = body["messages"][0]["content"]
        if isinstance(text, list):
            text = "".join(b.get("text", "") for b in text)
        verdicts = []
        passages = re.findall(r'<passage id="(P\d+)"[^>]*>(.*?)</passage>', text, re.S)
        for n, cites, sentence in re.findall(
            r'<sentence number="(\d+)" cites="([^"]*)">(.*?)</sentence>', text, re.S
        ):
            said = [v for k, v in self.elsewhere.items() if k in sentence]
            if said:
                named = [i for i, p in passages if said[0] in html.unescape(p)]
                verdicts.append(
                    {"sentence": int(n), "verdict": "supported_elsewhere", "passages": named}
                )
                continue
            verdict = (
                "unsupported"
                if any(u in sentence for u in self.unsupported)
                else "not_covered"
                if any(u in sentence for u in self.not_covered)
                else "supported"
                if cites.strip()
                else self.uncited
            )
            verdicts.append({"sentence": int(n), "verdict": verdict})
        return claude_message(
            tool_use("check_claims", {"sentences": verdicts}), stop_reason="tool_use"
        )

    def judge(self, body: dict) -> dict:
        """The `judgement` (a list: served in turn, the last repeating)."""
        given = self.judgement
        if isinstance(given, list):
            with self.lock:
                n = len(self.calls_unlocked("judge")) - 1
            given = given[min(n, len(given) - 1)]
        return claude_message(tool_use("grade_answer", given), stop_reason="tool_use")

    def calls_unlocked(self, kind: str) -> list[dict]:
        return [b for b in self.seen if self.kind(b) == kind]

    def classify(self, body: dict) -> dict:
        """`intents` as given, or (the default, on a taxonomy without its first intent) the
        taxonomy's first intent: another set's questions still get an answer from the tool's
        enum, as a strict tool's reply must be."""
        schema = body["tools"][0]["input_schema"] if body.get("tools") else asked_schema(body) or {}
        names = [
            n
            for n in schema["properties"]["intents"]["items"]["properties"]["intent"].get(
                "enum", []
            )
            if n != "NONE"
        ]
        intents = self.intents
        if self.default_intents and names and intents[0]["intent"] not in names:
            intents = [{"intent": names[0], "confidence": 0.9}]
        return claude_message(
            tool_use("choose_intent", {"intents": intents}), stop_reason="tool_use"
        )

    def extract(self, body: dict) -> dict:
        passages = self.passages
        if passages is None:
            content = body["messages"][0]["content"]
            chunk1 = content.split('<chunk number="1"')[1].split(">\n", 1)[1].split("\n</chunk>")[0]
            paragraphs = [p for p in chunk1.split("\n\n") if not p.startswith("#")]
            if self.quote > 1:  # that paragraph's first sentences, each a passage
                paragraphs = re.split(r"(?<=[.!?])\s+", paragraphs[0])
            passages = [{"chunk": 1, "text": p} for p in paragraphs[: self.quote]]
        return claude_message(
            tool_use("record_passages", {"passages": passages, "nothing_relevant": not passages}),
            stop_reason="tool_use",
        )

    def condense(self, body: dict) -> dict:
        return claude_message(text_block(self.condensed))

    def describe(self, body: dict) -> dict:
        """`fieldguide intents --describe`'s draft of one intent."""
        found = re.search(r"<intent>(.*?)</intent>", body["messages"][0]["content"], re.S)
        intent = html.unescape(found.group(1)) if found else "?"
        return claude_message(
            tool_use(
                "describe_intent",
                {"description": f"Docs on {intent}.", "examples": [f"How do I use {intent}?"]},
            ),
            stop_reason="tool_use",
        )

    def answer_message(self, body: dict) -> dict:
        results = self.search_results(body)
        offered = [t.get("name") for t in body.get("tools") or []]
        # the round: the assistant turns before it
        asked = sum(m.get("role") == "assistant" for m in body.get("messages", []))
        allowed = (body.get("tool_choice") or {}).get("type") != "none"
        if offered and allowed and asked < len(self.looks) and self.looks[asked] is not None:
            with self.lock:
                self.issued += 1
                call_id = f"toolu_stub{self.issued}"
            call = {"type": "tool_use", "id": call_id, "name": offered[0]}
            call["input"] = {"query": self.looks[asked]}
            return claude_message(call, stop_reason="tool_use", model=body.get("model", ""))
        with self.lock:
            n = len([b for b in self.seen if self.kind(b) == "answer"])
        stop = self.stop_reasons[min(n - 1, len(self.stop_reasons) - 1)]
        turns = body.get("messages", [])
        written = len(turns) > 1 and turns[-2].get("role") == "assistant"
        written = written and all(b.get("type") != "tool_use" for b in turns[-2]["content"])
        blocks = []
        for segment in self.rewrite if written and self.rewrite is not None else self.answer:
            text, cites = (segment, None) if isinstance(segment, str) else segment
            citations = None
            if cites is not None:
                citations = [
                    c if isinstance(c, dict) else self.citation(results, *c) for c in cites
                ]
            blocks.append(text_block(text, citations))
        return claude_message(
            *blocks, stop_reason=stop, model=body.get("model", "claude-sonnet-4-6")
        )

    @staticmethod
    def citation(results: list[dict], index: int, start: int, end: int) -> dict:
        """A search_result_location citation as the API builds it: cited_text is the text of the
        blocks content[start:end] joined together. A negative index counts from the last result
        (a tool's results, after the first ones)."""
        index = index % len(results) if index < 0 else index
        result = results[index]
        return {
            "type": "search_result_location",
            "source": result["source"],
            "title": result.get("title"),
            "cited_text": "".join(b["text"] for b in result["content"][start:end]),
            "search_result_index": index,
            "start_block_index": start,
            "end_block_index": end,
        }

    # -- streaming ---------------------------------------------------------------------------------

    def events(self, message: dict, kind: str, body: dict, first_delay: float, per_word: float):
        """The message as the API streams it: message_start, then per block content_block_start,
        deltas (citations_delta before the text they cite, text_delta per word, input_json_delta
        for a tool call), content_block_stop; then message_delta (stop_reason, usage) and
        message_stop."""
        citations_on = any(
            (r.get("citations") or {}).get("enabled") for r in self.search_results(body)
        )
        start = dict(message, content=[], stop_reason=None, stop_sequence=None)
        start["usage"] = dict(message["usage"], output_tokens=1)
        yield sse("message_start", {"type": "message_start", "message": start})
        yield sse("ping", {"type": "ping"})
        first = True
        for i, block in enumerate(message["content"]):
            if block["type"] == "text":
                opening: dict = {"type": "text", "text": ""}
                if citations_on:
                    opening["citations"] = []
            elif block["type"] == "thinking":
                opening = {"type": "thinking", "thinking": "", "signature": ""}
            else:
                opening = dict(block, input={})
            yield sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": opening},
            )
            if block["type"] == "thinking":
                yield self.delta(i, {"type": "thinking_delta", "thinking": block["thinking"]})
                yield self.delta(i, {"type": "signature_delta", "signature": block["signature"]})
            elif block["type"] == "text":
                for cit in block.get("citations") or []:
                    yield self.delta(i, {"type": "citations_delta", "citation": cit})
                for piece in words(block["text"]):
                    self.clock.sleep(first_delay if first else per_word)
                    first = False
                    yield self.delta(i, {"type": "text_delta", "text": piece})
            else:
                raw = json.dumps(block["input"])
                for j in range(0, len(raw), 20):
                    yield self.delta(
                        i, {"type": "input_json_delta", "partial_json": raw[j : j + 20]}
                    )
            yield sse("content_block_stop", {"type": "content_block_stop", "index": i})
        yield sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
        yield sse("message_stop", {"type": "message_stop"})

    @staticmethod
    def delta(index: int, delta: dict) -> bytes:
        return sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )


OVERLOADED = (
    529,
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    {"retry-after-ms": "10"},
)


# -- the Messages API as its docs describe it -----------------------------------------
# Kept apart from FakeClaude (which calls them) so they move with it wherever the stand-ins live.
# Sources: platform.claude.com/docs/en/models/*/overview and whats-new-* pages, structured-outputs,
# prompt-caching, rate-limits and errors pages (2026-11).

# the model ids the API knows (others: 404 not_found_error), current and legacy
KNOWN_MODELS = (
    "claude-haiku-5-5",
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-fable-5-1",
    "claude-sonnet-5",
    "claude-opus-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-4-6",
    "claude-opus-4-5",
    "claude-sonnet-4-5",
    "claude-haiku-4-5",
    "claude-opus-4-1",
    "claude-sonnet-4",
    "claude-3-5-haiku",
    "claude-3-haiku",
)
# "Forced tool use returns an error" (what's new in Sonnet 5.5 / Opus 5.5)
NO_FORCED_TOOLS = ("claude-sonnet-5-5", "claude-opus-5-5", "claude-fable-5")
# output_config.effort: the adaptive-thinking models (Sonnet / Opus 4.6+, every 5.x model)
EFFORT_MODELS = (
    "claude-haiku-5",
    "claude-sonnet-5",
    "claude-opus-5",
    "claude-fable-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-4-6",
)
# Each model's latency and output speed, for the bench: (seconds to the first token, output
# tokens per second). Anthropic's model pages give only a comparative latency (Haiku 5.5
# "Fastest", Sonnet 5.5 "Fast", Opus 5.5 "Moderate"); the figures are the latest measured ones the
# stored pages hold for each class: Sonnet 4.5 1.8 s / 63 tokens/s and Opus 4.1 2.67 s / 45
# tokens/s (Artificial Analysis), Haiku at Anthropic's "more than twice the speed" of Sonnet.
MODEL_TIMING: dict[str, tuple[float, float]] = {
    "claude-haiku-5-5": (0.7, 130.0),
    "claude-haiku-4-5": (0.7, 130.0),
    "claude-sonnet-5-5": (1.8, 63.0),
    "claude-sonnet-4-6": (1.8, 63.0),
    "claude-opus-5-5": (2.67, 45.0),
}
TOKENS_PER_WORD = 1.3  # English text, for pacing a reply word by word


def api_error(status: int, kind: str, message: str, headers: dict | None = None) -> tuple:
    return status, {"type": "error", "error": {"type": kind, "message": message}}, headers or {}


def rate_limited(seconds: float = 1) -> tuple:
    """The API's 429: a rate limit, with retry-after in seconds (rate-limits page)."""
    return api_error(
        429,
        "rate_limit_error",
        "This request would exceed your organization's rate limit.",
        {"retry-after": str(seconds)},
    )


def api_rules(body: dict) -> tuple | None:
    """The error the API gives a request it refuses, or None: an unknown model (404), a forced
    tool_choice on a model that refuses it, effort on a model without it (400)."""
    model = str(body.get("model", ""))
    if not model.startswith(KNOWN_MODELS):
        return api_error(404, "not_found_error", f"model: {model}")
    choice = (body.get("tool_choice") or {}).get("type")
    if choice in ("tool", "any") and model.startswith(NO_FORCED_TOOLS):
        return api_error(
            400,
            "invalid_request_error",
            f"tool_choice.type '{choice}' is not supported for {model}: forced tool use is not"
            " supported on this model; use tool_choice auto or structured outputs.",
        )
    effort = (body.get("output_config") or {}).get("effort")
    if effort is not None and not model.startswith(EFFORT_MODELS):
        return api_error(400, "invalid_request_error", f"effort is not supported for {model}")
    return thinking_rules(model, (body.get("thinking") or {}).get("type"), effort) or tool_rules(
        body
    )


# -- tool use (platform.claude.com/docs/en/agents-and-tools/tool-use, search-results, the 5.5
# what's-new pages: thinking blocks are tied to the model and the conversation) ----------------


def search_results(body: dict) -> list[dict]:
    """Every search_result block of the request in the order a citation's search_result_index
    counts them: across the messages, those inside tool results included."""
    out: list[dict] = []
    for m in body.get("messages", []):
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if b.get("type") == "search_result":
                out.append(b)
            elif b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                out += [c for c in b["content"] if c.get("type") == "search_result"]
    return out


def signature(model: str, thinking: str) -> str:
    """A thinking block's signature, tied to the model that wrote it and to its text."""
    return hashlib.sha256(f"{model}\n{thinking}".encode()).hexdigest()[:32]


def tool_rules(body: dict) -> tuple | None:
    """The 400 the API gives a conversation with tools that is not well formed: tool_use or
    tool_result blocks without tools defined, tool results that do not answer exactly the tool
    calls of the assistant turn before them, a thinking block passed back changed (or written by
    another model)."""
    messages = body.get("messages", [])
    blocks = [
        (i, b)
        for i, m in enumerate(messages)
        for b in (m.get("content") if isinstance(m.get("content"), list) else [])
    ]
    if any(b.get("type") in ("tool_use", "tool_result") for _, b in blocks) and not body.get(
        "tools"
    ):
        return api_error(
            400,
            "invalid_request_error",
            "Requests which include `tool_use` or `tool_result` blocks must define tools.",
        )
    model = str(body.get("model", ""))
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m.get("content"), list) else []
        if m.get("role") == "assistant":
            for b in content:
                if b.get("type") == "thinking" and b.get("signature") != signature(
                    model, str(b.get("thinking", ""))
                ):
                    return api_error(
                        400,
                        "invalid_request_error",
                        f"messages.{i}.content: Invalid `signature` in `thinking` block",
                    )
            calls = [b.get("id") for b in content if b.get("type") == "tool_use"]
            after = messages[i + 1].get("content") if i + 1 < len(messages) else None
            answered = [
                b.get("tool_use_id")
                for b in (after if isinstance(after, list) else [])
                if b.get("type") == "tool_result"
            ]
            if calls and i + 1 < len(messages) and sorted(calls) != sorted(answered):
                return api_error(
                    400,
                    "invalid_request_error",
                    f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks"
                    f" immediately after: {', '.join(c for c in calls if c not in answered)}",
                )
        elif any(b.get("type") == "tool_result" for b in content):
            before = messages[i - 1].get("content") if i else None
            calls = [
                b.get("id")
                for b in (before if isinstance(before, list) else [])
                if b.get("type") == "tool_use"
            ]
            stray = [
                b.get("tool_use_id")
                for b in content
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in calls
            ]
            if stray:
                return api_error(
                    400,
                    "invalid_request_error",
                    f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result`"
                    f" blocks: {', '.join(map(str, stray))}",
                )
    return None


# -- thinking (platform.claude.com/docs/en/build-with-claude/thinking, the 5.x what's-new pages
# and migration guides, 2026-11) --------------------------------------------------------------
# Adaptive thinking is on by default on every 5.x model; Opus 5.5 and Fable 5.x cannot turn it off;
# Sonnet 5.5 turns it off with "between_tools" (and answers "disabled" with a 400); Haiku 5.5,
# Sonnet 5 and Opus 5 take "disabled" at effort high or lower. Before 5, a model thinks only when
# asked. The default effort is medium on Haiku 5.5 and Opus 5.5, high on the others.
ALWAYS_THINKS = ("claude-opus-5-5", "claude-fable-5")
THINKS_BY_DEFAULT = ("claude-haiku-5-5", "claude-sonnet-5", "claude-opus-5", "claude-fable-5")
MEDIUM_BY_DEFAULT = ("claude-haiku-5-5", "claude-opus-5-5")
# The thinking tokens the stand-in spends per effort level: the docs give no figures (low "skips
# thinking for simpler tasks", high "almost always thinks"); these are the stand-in's own, in
# proportion, so that thinking costs time and max_tokens as it does on the API.
THINKING_TOKENS = {"low": 50, "medium": 300, "high": 800, "xhigh": 1600, "max": 3000}


def thinking_rules(model: str, kind: str | None, effort: str | None) -> tuple | None:
    """The 400 a thinking setting gets on `model`, or None."""
    if kind is None or kind == "adaptive":
        return None
    high = effort in ("xhigh", "max")
    if kind == "between_tools":
        if not model.startswith("claude-sonnet-5-5"):
            return api_error(400, "invalid_request_error", f"thinking.type: {kind}: {model}")
        if high:
            return api_error(400, "invalid_request_error", "between_tools needs effort <= high")
        return None
    if kind == "disabled":
        if model.startswith("claude-sonnet-5-5"):
            return api_error(
                400,
                "invalid_request_error",
                "thinking cannot be disabled on claude-sonnet-5-5: use between_tools",
            )
        if model.startswith(ALWAYS_THINKS):
            return api_error(400, "invalid_request_error", f"thinking is always on for {model}")
        if high and model.startswith(THINKS_BY_DEFAULT):
            return api_error(
                400, "invalid_request_error", "disabling thinking needs effort <= high"
            )
        return None
    if kind == "enabled" and model.startswith(THINKS_BY_DEFAULT):
        return api_error(400, "invalid_request_error", "budget_tokens is not supported: adaptive")
    return None


def after_tool(body: dict) -> bool:
    """Whether the request's last turn carries tool results (the model goes on after a tool)."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content") if isinstance(last.get("content"), list) else []
    return any(b.get("type") == "tool_result" for b in content)


def thinking_tokens(body: dict) -> int:
    """The thinking tokens a request spends (0 with thinking off)."""
    model = str(body.get("model", ""))
    kind = (body.get("thinking") or {}).get("type")
    if kind == "between_tools" and not after_tool(body):
        return 0  # no thinking up front: only between tool calls
    if kind == "disabled":
        return 0
    if kind is None and not model.startswith(THINKS_BY_DEFAULT):
        return 0
    if kind == "enabled":
        return int((body.get("thinking") or {}).get("budget_tokens") or 0)
    effort = (body.get("output_config") or {}).get("effort") or (
        "medium" if model.startswith(MEDIUM_BY_DEFAULT) else "high"
    )
    return THINKING_TOKENS.get(effort, THINKING_TOKENS["high"])


def with_thinking(message: dict, tokens: int, max_tokens: int) -> dict:
    """The reply with a thinking block first; its tokens count toward max_tokens, so a reply
    whose thinking and text pass it is cut (stop_reason max_tokens)."""
    text = "Let me work through this."
    thinking = {
        "type": "thinking",
        "thinking": text,
        "signature": signature(str(message.get("model", "")), text),
    }
    budget = max_tokens - tokens if max_tokens else 10**9
    content, used = [thinking], 0
    for block in message["content"]:
        cost = estimate_tokens(block.get("text") or block.get("input"))
        if used + cost > budget:
            if block["type"] == "text" and budget - used > 0:
                keep = int(len(block["text"]) * (budget - used) / cost)
                content.append(dict(block, text=block["text"][:keep]))
            return dict(message, content=content, stop_reason="max_tokens")
        content.append(block)
        used += cost
    return dict(message, content=content)


# -- faults as the API serves them (errors page, rate-limits page, streaming page) ----------------


def spend_limited() -> tuple:
    """A spend limit's 429: rate_limit_error with error.details.error_code
    enforced_spend_limit_reached and no retry-after (retrying fails until the month turns)."""
    return (
        429,
        {
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "Your organization has reached its monthly spend limit.",
                "details": {"error_code": "enforced_spend_limit_reached"},
            },
        },
        {},
    )


def should_not_retry(fault: tuple) -> tuple:
    """`fault` with the server's `x-should-retry: false`."""
    status, body, *rest = fault
    return status, body, {**(rest[0] if rest else {}), "x-should-retry": "false"}


def overloaded_mid_stream(body: dict):
    """A stream that starts (message_start, a ping) and then carries an `error` event of type
    overloaded_error, as the streaming page shows one, before any text."""
    start = {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }

    def events():
        yield sse("message_start", {"type": "message_start", "message": start})
        yield sse("ping", {"type": "ping"})
        yield sse(
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        )

    return 200, events()


def broken_after(events, text_deltas: int = 3):
    """A stream (`events`, as FakeClaude streams it) that carries an overloaded_error event after
    its first `text_deltas` text deltas."""
    seen = 0
    for piece in events:
        yield piece
        if b'"text_delta"' in piece:
            seen += 1
            if seen == text_deltas:
                error = {"type": "overloaded_error", "message": "Overloaded"}
                yield sse("error", {"type": "error", "error": error})
                return


def hanging(release: threading.Event, seconds: float = 60.0):
    """A fault for `down` / `faults`: the connection is accepted and nothing is sent until
    `release` is set (or `seconds` pass)."""

    def serve(body: dict) -> tuple:
        release.wait(seconds)
        return OVERLOADED

    return serve


def asked_schema(body: dict) -> dict | None:
    """The JSON schema a structured output asks for (output_config.format), or None."""
    fmt = (body.get("output_config") or {}).get("format") or {}
    return fmt.get("schema") if fmt.get("type") == "json_schema" else None


# a structured output's step, by the fields its schema asks for
SCHEMA_KINDS = {
    "intents": "classify",
    "nothing_relevant": "extract",
    "sentences": "check",
    "faithfulness": "judge",
    "description": "describe",
}


def structured_kind(body: dict) -> str:
    schema = asked_schema(body)
    fields = set((schema or {}).get("properties", {}))
    return next((kind for f, kind in SCHEMA_KINDS.items() if f in fields), "")


def as_json_text(message: dict) -> dict:
    """A reply built as a tool call turned into what a structured output returns: the same
    object as the JSON text of one text block."""
    content = [
        text_block(json.dumps(b["input"])) if b.get("type") == "tool_use" else b
        for b in message["content"]
    ]
    return dict(message, content=content, stop_reason="end_turn")
