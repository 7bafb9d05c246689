"""Anthropic's Messages API as the real anthropic client meets it, plain and streamed, with
citations, tool calls, stop reasons and prompt caching billed as the API bills it (`FakeClaude`, a
handler for a StubServer: server.py)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from typing import Any

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


Cite = tuple  # (search_result_index, start_block_index, end_block_index)

# Prompt caching as the Messages API bills it. The stub has no tokenizer: a token is taken to be
# about 3.5 characters of the request's JSON (Anthropic's rule of thumb for English text).
CHARS_PER_TOKEN = 3.5
# the shortest prefix each model caches (Anthropic's prompt-caching docs, 2026-11): shorter ones
# are billed as plain input, with no error
MIN_CACHEABLE = {
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
MIN_CACHEABLE_DEFAULT = 1024  # Sonnet 4.x, Opus 4 / 4.1
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
    condense reply, `first_token` before the answer's first text, then `words_per_second`.
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
        judgement: dict | list[dict] | None = None,
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
        self.seen: list[dict] = []
        self.lock = threading.Lock()
        # prompt caching: honoured (cache_control breakpoints billed as the API bills them) or,
        # with cache=False, every prompt billed in full, as without cache_control
        self.cache_on = cache
        self.cache: dict[str, float] = {}  # prefix hash -> when it expires
        # the claim check's verdicts: a sentence holding one of `unsupported` is unsupported, a
        # sentence that cites no passage gets `uncited`, any other is supported
        self.unsupported, self.uncited = unsupported, uncited
        self.judgement: dict | list[dict] = judgement or {
            "faithfulness": "faithful",
            "correctness": "correct",
            "reason": "The answer states what its passages say.",
        }

    def kind(self, body: dict) -> str:
        tools = [t.get("name") for t in body.get("tools", [])]
        if "choose_intent" in tools:
            return "classify"
        if "record_passages" in tools:
            return "extract"
        if "check_claims" in tools:
            return "check"
        if "grade_answer" in tools:
            return "judge"
        if self.search_results(body):
            return "answer"
        return "condense"

    @staticmethod
    def search_results(body: dict) -> list[dict]:
        return [
            b
            for m in body.get("messages", [])
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "search_result"
        ]

    def calls(self, kind: str) -> list[dict]:
        with self.lock:
            return [b for b in self.seen if self.kind(b) == kind]

    def __call__(self, req: Request):
        body = req.json
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
        kind = self.kind(body)
        if kind == "answer":
            message = self.answer_message(body)
        else:
            time.sleep(self.latency)
            message = getattr(self, kind)(body)
        message["model"] = body.get("model", message["model"])
        message["usage"] = self.bill(body, message)
        if body.get("stream"):
            return 200, self.events(message, kind, body)
        if kind == "answer":
            n = sum(len(words(b.get("text", ""))) for b in message["content"])
            time.sleep(
                self.first_token + (n / self.words_per_second if self.words_per_second else 0)
            )
        return 200, message

    def bill(self, body: dict, message: dict) -> dict:
        """The usage the API reports: the longest cached prefix still alive is read
        (cache_read_input_tokens), the rest of the prompt up to the last breakpoint is written
        (cache_creation_input_tokens) when that prefix is at least the model's minimum, and
        input_tokens counts what follows the last breakpoint (or all of it, uncached)."""
        parts = prompt_parts(body)
        total = sum(estimate_tokens(p) for p, _ in parts)
        output = sum(estimate_tokens(b.get("text") or b.get("input")) for b in message["content"])
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
                now = time.monotonic()
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
        for n, cites, sentence in re.findall(
            r'<sentence number="(\d+)" cites="([^"]*)">(.*?)</sentence>', text, re.S
        ):
            verdict = (
                "unsupported"
                if any(u in sentence for u in self.unsupported)
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
        names = body["tools"][0]["input_schema"]["properties"]["intents"]["items"]["properties"][
            "intent"
        ].get("enum", [])
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

    def answer_message(self, body: dict) -> dict:
        results = self.search_results(body)
        with self.lock:
            n = len([b for b in self.seen if self.kind(b) == "answer"])
        stop = self.stop_reasons[min(n - 1, len(self.stop_reasons) - 1)]
        blocks = []
        for segment in self.answer:
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
        blocks content[start:end] joined together."""
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

    def events(self, message: dict, kind: str, body: dict):
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
            else:
                opening = dict(block, input={})
            yield sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": opening},
            )
            if block["type"] == "text":
                for cit in block.get("citations") or []:
                    yield self.delta(i, {"type": "citations_delta", "citation": cit})
                for piece in words(block["text"]):
                    if kind == "answer":
                        time.sleep(
                            self.first_token
                            if first
                            else (1 / self.words_per_second if self.words_per_second else 0)
                        )
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
