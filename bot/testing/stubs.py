"""Local HTTP servers that stand in for the Messages API, Voyage and Slack's Web API.

The real SDK clients are pointed at them. A stub records every request and answers from a handler
per path; a handler returns (status, body) or (status, body, headers), where body is a dict (sent as
JSON) or bytes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.error import HTTPError
from urllib.parse import parse_qs
from urllib.request import Request as HttpRequest
from urllib.request import urlopen


class Request:
    def __init__(self, method: str, path: str, headers: dict, body: bytes):
        self.method, self.path, self.headers, self.body = method, path, headers, body
        self.at = time.monotonic()  # when it arrived: a test can check how long a client waited

    @property
    def json(self):
        return json.loads(self.body or b"null")

    @property
    def form(self) -> dict:
        """Slack's Web API client posts form fields or JSON; either way a flat dict."""
        if self.headers.get("content-type", "").startswith("application/json"):
            return self.json
        return {k: v[0] for k, v in parse_qs(self.body.decode()).items()}


class StubServer:
    def __init__(self):
        self.requests: list[Request] = []
        self.routes: dict[str, object] = {}
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("content-length") or 0)
                req = Request(
                    self.command,
                    self.path.split("?")[0],
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
                with stub.lock:
                    stub.requests.append(req)
                    handler = stub.routes.get(req.path)
                result: Any
                if handler is None:
                    result = (404, {"error": f"no stub for {req.path}"})
                else:
                    result = (
                        handler(req)
                        if callable(handler)
                        else handler.pop(0)
                        if isinstance(handler, list)
                        else handler
                    )
                status, body, headers = (*result, {}) if len(result) == 2 else result
                if not isinstance(body, (bytes, dict, list)):  # an iterator of byte pieces
                    self._stream(status, body, headers)
                    return
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _stream(self, status, pieces, headers):
                """Server-sent events: each piece written as it is produced (HTTP/1.0, so the
                body ends when the connection closes)."""
                try:
                    self.send_response(status)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("cache-control", "no-cache")
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    for piece in pieces:
                        self.wfile.write(piece)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def route(self, path: str, handler) -> None:
        """handler: a callable(Request), a list of results served in turn, or one fixed result."""
        with self.lock:
            self.routes[path] = handler

    def calls(self, path: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = 10.0) -> list[Request]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = self.calls(path)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{path} called {len(self.calls(path))} times, expected {count}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def voyage_embeddings(dim: int = 8):
    """A Voyage /embeddings handler: deterministic vectors from each text's hash."""

    def handler(req: Request):
        texts = req.json["input"]
        data = []
        for i, t in enumerate(texts):
            h = hashlib.sha256(t.encode()).digest()
            data.append({"embedding": [b / 255 - 0.5 for b in h[:dim]], "index": i})
        return 200, {"data": data, "usage": {"total_tokens": sum(len(t.split()) for t in texts)}}

    return handler


def voyage_rate_limited(seconds: int = 0):
    """Voyage's 429, which carries Retry-After as the real service's does (seconds; 0 by default
    so tests don't wait)."""
    return 429, {"detail": "rate limit exceeded, please retry later"}, {"retry-after": str(seconds)}


def voyage_rerank(prefer: str = ""):
    """A Voyage /rerank handler shaped like the real one: `data` sorted by `relevance_score` (in
    [0, 1]) best first, each with its document's `index`, cut to `top_k`; 400 on a request the API
    rejects. Relevance is the share of the query's words a document holds, and a document holding
    `prefer` scores 1 (a test's way to say which chunk the reranker likes)."""

    def handler(req: Request):
        body = req.json
        docs, query = body.get("documents"), body.get("query")
        if not isinstance(query, str) or not query or not body.get("model"):
            return 400, {"detail": "query and model are required"}
        if not isinstance(docs, list) or not docs or len(docs) > 1000:
            return 400, {"detail": "documents must be a list of 1 to 1,000 strings"}
        words = set(query.lower().split())
        scores = [
            1.0
            if prefer and prefer in d
            else round(len(words & set(d.lower().split())) / (len(words) + 1), 4)
            for d in docs
        ]
        order = sorted(range(len(docs)), key=lambda i: -scores[i])[: body.get("top_k") or None]
        data = [{"index": i, "relevance_score": scores[i]} for i in order]
        tokens = sum(len(d.split()) for d in docs) + len(docs) * len(query.split())
        return 200, {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"total_tokens": tokens},
        }

    return handler


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


Cite = tuple  # (search_result_index, start_block_index, end_block_index)

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
        rules: bool = True,
        timing: dict[str, tuple[float, float]] | None = None,
        down: dict[str, tuple] | None = None,
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
        # the API's rules as the docs give them (api_rules), and what it refused
        self.rules = rules
        self.refused: list[dict] = []
        # faults served to the next requests, whatever they ask (rate_limited(1), OVERLOADED),
        # and a step that is down (kind → the fault every call of it gets); what was failed
        self.faults: list[tuple] = []
        self.down: dict[str, tuple] = dict(down or {})
        self.failed: list[tuple[str, int]] = []
        # model → (seconds to the first token, output tokens per second): MODEL_TIMING
        self.timing = timing

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
        refused = api_rules(body) if self.rules else None
        if refused is not None:
            with self.lock:
                self.refused.append(body)
            return refused
        with self.lock:
            fault = self.faults.pop(0) if self.faults else None
            kind = self.kind(body)
            down = self.down.get(kind)
        served = fault or down
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
        if kind == "answer":
            message = self.answer_message(body)
        else:
            message = getattr(self, kind)(body)
            if structured_kind(body):  # asked through output_config.format: JSON text
                message = as_json_text(message)
        message["model"] = body.get("model", message["model"])
        message["usage"] = self.bill(body, message)
        first, per_word = self.pace(body, message)
        if body.get("stream"):
            return 200, self.events(message, kind, body, first, per_word)
        n = sum(len(words(b.get("text") or json.dumps(b.get("input")))) for b in message["content"])
        time.sleep(first + n * per_word)
        return 200, message

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
        intent = body["messages"][0]["content"].split("\n", 1)[0].removeprefix("Intent: ")
        return claude_message(
            tool_use(
                "describe_intent",
                {"description": f"Docs on {intent}.", "examples": [f"How do I use {intent}?"]},
            ),
            stop_reason="tool_use",
        )

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
                    time.sleep(first_delay if first else per_word)
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


# -- the Messages API as its docs describe it (issue 34) -----------------------------------------
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
    return None


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


BOT = "UBOT"
TEAM = "T1"


def slack_error(error: str) -> tuple:
    """What the Web API answers a call it refuses: HTTP 200 with ok:false."""
    return 200, {"ok": False, "error": error}


# Slack's 429: Retry-After in whole seconds (0 here, so tests don't wait; Slack says 1 or more)
RATELIMITED = (429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "0"})
SERVER_ERROR = (500, b"<html>Internal Server Error</html>")
RESPONSE_URL_POSTS = 5  # per response_url, in 30 minutes


def permalink(channel: str, ts: str) -> str:
    """A message's link as Slack's chat.getPermalink gives it."""
    return f"https://tidewater.slack.com/archives/{channel}/p{ts.replace('.', '')}"


def _blocks(value) -> list:
    if not value:
        return []
    return json.loads(value) if isinstance(value, str) else list(value)


def _block_error(blocks: list) -> str | None:
    """Block Kit's limits as the Web API enforces them (invalid_blocks)."""
    if len(blocks) > 50:
        return "invalid_blocks"
    markdown = sum(len(b.get("text", "")) for b in blocks if b.get("type") == "markdown")
    if markdown > 12_000:
        return "invalid_blocks"
    for b in blocks:
        if b.get("type") == "section" and len(b.get("text", {}).get("text", "")) > 3000:
            return "invalid_blocks"
    return None


class SlackMock(StubServer):
    """The Web API methods the bot uses, checked and failing as Slack does, recording every call.

    `fail(method, *results)` makes the next calls of a method answer with those results (e.g.
    `slack_error("msg_too_long")`, RATELIMITED, SERVER_ERROR) before it answers normally again."""

    def __init__(self):
        super().__init__()
        self.ts = itertools.count(1)
        self.thread_messages: list[dict] = []
        self.replies_page = 1000  # most messages conversations.replies returns per page
        self.messages: dict[str, dict] = {}  # ts -> {"channel", "text", "blocks"} as they stand
        self.streams: dict[str, dict] = {}  # ts -> {"channel", "text", "state", "blocks"}
        self.faults: dict[str, list] = {}
        self.socket_url = ""  # set by a SocketModeServer: apps.connections.open returns it
        self.respond_posts: dict[str, int] = {}
        self.refuse_blocks = ""  # an error for every message with blocks (e.g. invalid_blocks)
        self.channels: dict[str, str] = {}  # id -> name, listed by conversations.list
        self.home_views: dict[str, dict] = {}  # user -> the Home tab views.publish set

        def method(name, handler):
            def serve(req: Request):
                with self.lock:
                    queued = self.faults.get(name)
                    fault = queued.pop(0) if queued else None
                if fault is not None:
                    return fault
                result = handler(req.form or {})
                return result if isinstance(result, tuple) else (200, {"ok": True, **result})

            self.route(f"/api/{name}", serve)

        method("auth.test", lambda f: {"user_id": BOT, "bot_id": "BBOT", "team_id": TEAM})
        method("chat.postMessage", self._post)
        method("chat.update", self._update)
        method("chat.delete", self._delete)
        method("chat.postEphemeral", self._ephemeral)
        method("chat.startStream", self._start_stream)
        method("chat.appendStream", self._append_stream)
        method("chat.stopStream", self._stop_stream)
        method("conversations.replies", self._replies)
        method("apps.connections.open", self._connections_open)
        method("conversations.list", self._list_channels)
        method("views.publish", self._publish_view)
        method(
            "chat.getPermalink",
            lambda f: (
                {"channel": f["channel"], "permalink": permalink(f["channel"], f["message_ts"])}
                if f.get("channel") and f.get("message_ts")
                else slack_error("invalid_arguments")
            ),
        )
        for name in (
            "assistant.threads.setStatus",
            "assistant.threads.setSuggestedPrompts",
            "assistant.threads.setTitle",
        ):
            method(
                name,
                lambda f: (
                    {}
                    if f.get("channel_id") and f.get("thread_ts")
                    else slack_error("invalid_arguments")
                ),
            )
        self.route("/respond", self._respond)

    def fail(self, method: str, *results) -> None:
        with self.lock:
            self.faults.setdefault(method, []).extend(results)

    def _new_ts(self) -> str:
        return f"1800000000.{next(self.ts):06d}"

    def _message_error(self, f: dict) -> str | None:
        if not f.get("channel"):
            return "channel_not_found"
        blocks = _blocks(f.get("blocks"))
        if not f.get("text") and not blocks:
            return "no_text"
        if len(f.get("text") or "") > 40_000:
            return "msg_too_long"
        if blocks and self.refuse_blocks:
            return self.refuse_blocks
        return _block_error(blocks)

    def _post(self, f: dict):
        if error := self._message_error(f):
            return slack_error(error)
        ts = self._new_ts()
        with self.lock:
            self.messages[ts] = {
                "channel": f["channel"],
                "text": f.get("text"),
                "blocks": _blocks(f.get("blocks")),
                "thread_ts": f.get("thread_ts"),
            }
        return {"ts": ts, "channel": f["channel"]}

    def _update(self, f: dict):
        if error := self._message_error(f):
            return slack_error(error)
        with self.lock:
            if f.get("ts") not in self.messages:
                return slack_error("message_not_found")
            self.messages[f["ts"]].update(text=f.get("text"), blocks=_blocks(f.get("blocks")))
        return {"ts": f["ts"], "channel": f["channel"]}

    def _delete(self, f: dict):
        with self.lock:
            if self.messages.pop(f.get("ts", ""), None) is None:
                return slack_error("message_not_found")
        return {"ts": f["ts"], "channel": f["channel"]}

    def _ephemeral(self, f: dict):
        if not f.get("user"):
            return slack_error("user_not_in_channel")
        if error := self._message_error(f):
            return slack_error(error)
        return {"message_ts": self._new_ts()}

    @staticmethod
    def _chunk_text(f: dict) -> str:
        text = f.get("markdown_text") or ""
        for c in f.get("chunks") or []:
            if c.get("type") == "markdown_text":
                text += c.get("text", "")
        return text

    def _start_stream(self, f: dict):
        if not f.get("channel"):
            return slack_error("channel_not_found")
        if not f.get("thread_ts"):
            return slack_error("invalid_arguments")
        # outside a DM, Slack must be told whom the stream is for
        if not f["channel"].startswith("D"):
            if not f.get("recipient_team_id"):
                return slack_error("missing_recipient_team_id")
            if not f.get("recipient_user_id"):
                return slack_error("missing_recipient_user_id")
        ts = self._new_ts()
        with self.lock:
            self.streams[ts] = {
                "channel": f["channel"],
                "thread_ts": f["thread_ts"],
                "text": self._chunk_text(f),
                "state": "streaming",
                "blocks": [],
                "recipient_user_id": f.get("recipient_user_id"),
            }
        return {"ts": ts, "channel": f["channel"]}

    def _stream(self, f: dict):
        stream = self.streams.get(f.get("ts", ""))
        if stream is None or stream["channel"] != f.get("channel"):
            return None, slack_error("message_not_found")
        if stream["state"] != "streaming":
            return None, slack_error("message_not_in_streaming_state")
        return stream, None

    def _append_stream(self, f: dict):
        with self.lock:
            stream, error = self._stream(f)
            if error:
                return error
            text = self._chunk_text(f)
            if not text:
                return slack_error("no_text")
            stream["text"] += text
        return {"ts": f["ts"], "channel": f["channel"]}

    def _stop_stream(self, f: dict):
        blocks = _blocks(f.get("blocks"))
        if error := _block_error(blocks):
            return slack_error(error)
        with self.lock:
            stream, error = self._stream(f)
            if error:
                return error
            stream["text"] += self._chunk_text(f)
            stream["state"], stream["blocks"] = "stopped", blocks
        return {"ts": f["ts"], "channel": f["channel"]}

    def _replies(self, f: dict):
        """Oldest first, paged by cursor (an offset here), as Slack does."""
        limit = min(int(f.get("limit") or 1000), self.replies_page)
        start = int(f.get("cursor") or 0)
        page = self.thread_messages[start : start + limit]
        more = start + limit < len(self.thread_messages)
        meta = {"next_cursor": str(start + limit) if more else ""}
        return {"messages": page, "has_more": more, "response_metadata": meta}

    def _publish_view(self, f: dict):
        """views.publish as Slack checks it: a user and a view of type home with at most 100
        blocks, each with a type (invalid_arguments otherwise)."""
        try:
            view = json.loads(f["view"]) if isinstance(f.get("view"), str) else f.get("view")
        except ValueError:
            return slack_error("invalid_arguments")
        blocks = (view or {}).get("blocks")
        if (
            not f.get("user_id")
            or not isinstance(view, dict)
            or view.get("type") != "home"
            or not isinstance(blocks, list)
            or len(blocks) > 100
            or not all(isinstance(b, dict) and b.get("type") for b in blocks)
        ):
            return slack_error("invalid_arguments")
        if _block_error(blocks):
            return slack_error("invalid_blocks")
        with self.lock:
            self.home_views[f["user_id"]] = view
        return {"view": {"id": f"V{len(self.home_views)}", "type": "home", **view}}

    def _list_channels(self, f: dict):
        """Pages of `limit` channels (at most 1,000, as Slack caps it) with a next_cursor."""
        limit = min(int(f.get("limit") or 100), 1000)
        start = int(f.get("cursor") or 0)
        ids = sorted(self.channels)
        page = [{"id": i, "name": self.channels[i], "is_channel": True} for i in ids][
            start : start + limit
        ]
        more = start + limit < len(ids)
        return {
            "channels": page,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _connections_open(self, f: dict):
        if not self.socket_url:
            return slack_error("not_allowed_token_type")
        return {"url": self.socket_url}

    def _respond(self, req: Request):
        """A response_url: 5 posts, then Slack answers 404 used_url."""
        with self.lock:
            n = self.respond_posts[req.path] = self.respond_posts.get(req.path, 0) + 1
        if n > RESPONSE_URL_POSTS:
            return 404, b"used_url"
        return 200, b"ok"

    def posts(self):
        return [r.form for r in self.calls("/api/chat.postMessage")]

    def updates(self):
        return [r.form for r in self.calls("/api/chat.update")]

    def responses(self):
        return [r.json for r in self.calls("/respond")]

    def answers(self) -> list[dict]:
        """The messages and finished streams as they stand, oldest first, without the bot's
        placeholders and notes: what a user reading the channel sees."""
        with self.lock:
            found = [{"ts": ts, **m} for ts, m in self.messages.items()]
            found += [{"ts": ts, **s} for ts, s in self.streams.items() if s["state"] == "stopped"]
        return sorted(
            (m for m in found if m.get("blocks") or m.get("state")), key=lambda m: m["ts"]
        )


class SocketModeServer:
    """Slack's Socket Mode end: the URL apps.connections.open hands out, `hello` on connect,
    envelopes the app must ack by envelope_id, and `disconnect` (the client reconnects).

    Several connections at once, as several replicas of one app open (Slack allows 10): `send`
    writes on the newest, `deliver` does what Slack does with an event — hands it to one open
    connection (in turn), and re-sends it as a new envelope with `retry_attempt` + 1 on another
    connection when it is not acknowledged within `resend_after` seconds or its connection
    closes first (3 retries at most)."""

    def __init__(self, mock: SlackMock):
        from websockets.sync.server import serve

        self.mock = mock
        self.acks: dict[str, dict] = {}
        self.connections: list = []  # every connection ever opened, oldest first
        self.live: list = []  # those still open
        self.deliveries: list[dict] = []  # each envelope `deliver` sent: id, connection, attempt
        self.turn = itertools.count()
        self.ids = itertools.count(1)
        self.cond = threading.Condition()
        self.server = serve(self._session, "127.0.0.1", 0)
        port = self.server.socket.getsockname()[1]
        mock.socket_url = f"ws://127.0.0.1:{port}/link/?ticket=t"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _session(self, ws) -> None:
        with self.cond:
            self.connections.append(ws)
            self.live.append(ws)
            live = len(self.live)
            self.cond.notify_all()
        try:
            ws.send(
                json.dumps(
                    {
                        "type": "hello",
                        "num_connections": live,
                        "debug_info": {"host": "stub"},
                        "connection_info": {"app_id": "A1"},
                    }
                )
            )
            for raw in ws:
                message = json.loads(raw)
                if "envelope_id" in message:
                    with self.cond:
                        self.acks[message["envelope_id"]] = message
                        self.cond.notify_all()
        except Exception:  # noqa: BLE001 - a closed connection ends the session
            pass
        finally:
            with self.cond:
                self.live.remove(ws)
                self.cond.notify_all()

    def _wait(self, predicate, timeout: float, what: str):
        with self.cond:
            if not self.cond.wait_for(predicate, timeout):
                raise AssertionError(f"Socket Mode: timed out waiting for {what}")

    def current(self, timeout: float = 10.0):
        self._wait(lambda: self.connections, timeout, "a connection")
        return self.connections[-1]

    def wait_live(self, count: int, timeout: float = 30.0) -> list:
        """Returns once `count` connections are open (and no more)."""
        self._wait(lambda: len(self.live) == count, timeout, f"{count} open connections")
        with self.cond:
            return list(self.live)

    @staticmethod
    def _envelope(
        envelope_id: str, type_: str, payload: dict, accepts: bool, attempt: int, reason: str
    ) -> str:
        return json.dumps(
            {
                "envelope_id": envelope_id,
                "type": type_,
                "payload": payload,
                "accepts_response_payload": accepts,
                "retry_attempt": attempt,
                "retry_reason": reason,
            }
        )

    def send(
        self,
        type_: str,
        payload: dict,
        accepts_response_payload: bool = False,
        retry_attempt: int = 0,
    ) -> str:
        envelope_id = f"env-{next(self.ids)}"
        envelope = self._envelope(
            envelope_id, type_, payload, accepts_response_payload, retry_attempt, ""
        )
        self.current().send(envelope)
        return envelope_id

    def deliver(
        self, payload: dict, resend_after: float = 3.0, retries: int = 3
    ) -> threading.Thread:
        """An Events API payload delivered as Slack delivers it (see the class); returns the
        thread doing it, which ends once an envelope is acknowledged or the retries are spent."""
        thread = threading.Thread(
            target=self._deliver, args=(payload, resend_after, retries), daemon=True
        )
        thread.start()
        return thread

    def _deliver(self, payload: dict, resend_after: float, retries: int) -> None:
        sent: list[str] = []
        tried: list = []
        for attempt in range(retries + 1):
            with self.cond:
                if not self.cond.wait_for(lambda: self.live, 10):
                    return
                fresh = [c for c in self.live if c not in tried] or list(self.live)
                ws = fresh[next(self.turn) % len(fresh)]
            envelope_id = f"env-{next(self.ids)}"
            sent.append(envelope_id)
            tried.append(ws)
            with self.cond:
                self.deliveries.append(
                    {
                        "envelope_id": envelope_id,
                        "event_id": payload.get("event_id"),
                        "connection": self.connections.index(ws),
                        "retry_attempt": attempt,
                    }
                )
                self.cond.notify_all()
            reason = "http_timeout" if attempt else ""  # as in Events API retries
            try:
                ws.send(self._envelope(envelope_id, "events_api", payload, False, attempt, reason))
            except Exception:  # noqa: BLE001 - closed meanwhile: the next attempt goes elsewhere
                continue

            def acked_or_closed(conn=ws) -> bool:
                return any(e in self.acks for e in sent) or conn not in self.live

            with self.cond:
                self.cond.wait_for(acked_or_closed, resend_after)
                if any(e in self.acks for e in sent):
                    return

    def ack(self, envelope_id: str, timeout: float = 10.0) -> dict:
        self._wait(lambda: envelope_id in self.acks, timeout, f"the ack of {envelope_id}")
        return self.acks[envelope_id]

    def disconnect(self, timeout: float = 10.0) -> None:
        """Ask the client to reconnect, as Slack does every few hours; returns once it has."""
        before = len(self.connections)
        self.current().send(json.dumps({"type": "disconnect", "reason": "refresh_requested"}))
        self._wait(lambda: len(self.connections) > before, timeout, "the reconnection")

    def close(self) -> None:
        self.server.shutdown()


def signed_request(
    url: str, body: bytes, content_type: str, secret: str, headers: dict | None = None
):
    """POST `body` signed as Slack signs its requests; returns (status, body text)."""
    from slack_sdk.signature import SignatureVerifier

    ts = str(int(time.time()))
    sig = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body.decode())
    assert sig is not None  # None only without a timestamp
    req = HttpRequest(
        url,
        data=body,
        method="POST",
        headers={
            "content-type": content_type,
            "x-slack-request-timestamp": ts,
            "x-slack-signature": sig,
            **(headers or {}),
        },
    )
    try:
        with urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except HTTPError as e:
        return e.code, e.read().decode()
