"""The Messages API stand-in in record and replay mode: keyed answers measured on real questions
without the API.

`Keyed(folder)` is a FakeClaude (server.py handler) that answers each request with the response
written for it, and records the request when there is none (with `kinds`, only requests of those
kinds: the others get the API's 529 overloaded_error):

- every request body is written to `folder/requests/<hash>.json`, once; <hash> is `request_hash`:
  the SHA-256 of the body's canonical JSON (keys sorted, no spaces) without `stream`, its first
  16 hex digits, so the same request made again (another run, another round) has the same name;
- a response at `folder/responses/<hash>.json` is served as the API serves one: its content
  blocks as written, each citation completed from its indices as the API builds it (type
  search_result_location, `source`, `title` and `cited_text` from the request's search results,
  counted across its messages and tool results), tool calls given ids when they have none, the
  stop reason `tool_use` when it calls a tool (else `end_turn` unless it says), thinking added
  and billed as the model's rules say (FakeClaude), streamed when the request streams;
- a request with no response yet gets a 400 invalid_request_error saying so, which the pipeline
  takes as a step that failed (it runs that step offline, or leaves the claim check undone):
  the run goes on and its later requests (a claim check of an answer replayed, the next round of
  a second look) are recorded in turn. So a set is measured in rounds: run, answer what was
  recorded, run again, until nothing new is recorded.

A response file is JSON: {"content": [blocks], "stop_reason": optional, "by": who wrote it}; a
structured output's reply may be written as {"json": {...}} (its one text block). `pending`
lists the requests without a response. The responses are written by a language model outside the
API that reads the request alone (bench/keyed/README.md): figures made from them are that model's
answers, not the API's.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from .claude import FakeClaude, api_error, claude_message, search_results

NO_RESPONSE = "no response has been written for this request yet"


def request_hash(body: dict) -> str:
    """A request's name: what it asks, not how it is delivered (`stream` and the prompt cache's
    `cache_control` markers left out)."""
    canonical = json.dumps(
        unmarked({k: v for k, v in body.items() if k != "stream"}),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def unmarked(value: Any) -> Any:
    """`value` without its `cache_control` markers, at any depth."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def completed(response: dict, body: dict, name: str) -> dict:
    """The response as the API would send it for `body`: citations filled from their indices,
    tool calls with ids, the stop reason."""
    results = search_results(body)
    written = response.get("content") or []
    if "json" in response:  # a structured output's reply, written as the object itself
        written = [{"type": "text", "text": json.dumps(response["json"])}]
    content: list[dict] = []
    calls = 0
    for block in written:
        block = dict(block)
        if block.get("type") == "text" and block.get("citations"):
            block["citations"] = [cited(c, results) for c in block["citations"]]
        elif block.get("type") == "tool_use":
            calls += 1
            block.setdefault("id", f"toolu_{name}_{calls}")
            block.setdefault("input", {})
        content.append(block)
    stop = response.get("stop_reason") or ("tool_use" if calls else "end_turn")
    return claude_message(*content, stop_reason=stop, model=str(body.get("model", "")))


def cited(citation: dict, results: list[dict]) -> dict:
    """A citation as the API returns it: its cited_text the text of the blocks its indices name
    (left as written when they name none)."""
    out = {"type": "search_result_location", **citation}
    i = out.get("search_result_index")
    start, end = out.get("start_block_index"), out.get("end_block_index")
    if not all(isinstance(v, int) for v in (i, start, end)):
        return out
    assert isinstance(i, int) and isinstance(start, int) and isinstance(end, int)
    if 0 <= i < len(results) and 0 <= start < end <= len(results[i]["content"]):
        result = results[i]
        out["source"] = result["source"]
        out["title"] = result.get("title")
        out["cited_text"] = "".join(b["text"] for b in result["content"][start:end])
    out.setdefault("cited_text", "")
    out.setdefault("source", "")
    return out


class Keyed(FakeClaude):
    """FakeClaude answering from `folder/responses`, recording into `folder/requests` (module
    doc). `timing`: each model's pace (tests/standins/claude.py MODEL_TIMING), or none."""

    def __init__(
        self,
        folder: str | Path,
        timing: dict[str, tuple[float, float]] | None = None,
        kinds: tuple[str, ...] | None = None,
    ):
        super().__init__(timing=timing)
        self.kinds = kinds  # the kinds of request recorded and replayed; others are overloaded
        self.folder = Path(folder)
        (self.folder / "requests").mkdir(parents=True, exist_ok=True)
        (self.folder / "responses").mkdir(parents=True, exist_ok=True)
        self.recorded: set[str] = set()  # requests of this run with no response
        self.replayed: set[str] = set()
        self.write_lock = threading.Lock()

    def reply(self, body: dict, kind: str) -> dict | tuple:
        if self.kinds is not None and kind not in self.kinds:
            return api_error(529, "overloaded_error", "Overloaded")
        name = request_hash(body)
        request = self.folder / "requests" / f"{name}.json"
        with self.write_lock:
            if not request.exists():
                tmp = request.with_suffix(".tmp")
                tmp.write_text(json.dumps(body, indent=1, ensure_ascii=False), encoding="utf-8")
                tmp.replace(request)
        response = self.folder / "responses" / f"{name}.json"
        if not response.exists():
            with self.lock:
                self.recorded.add(name)
            return api_error(400, "invalid_request_error", f"{NO_RESPONSE}: {name}")
        with self.lock:
            self.replayed.add(name)
        return completed(json.loads(response.read_text(encoding="utf-8")), body, name)


def pending(folder: str | Path) -> list[Path]:
    """The recorded requests of `folder` that have no response yet, oldest first."""
    folder = Path(folder)
    answered = {p.stem for p in (folder / "responses").glob("*.json")}
    requests = sorted((folder / "requests").glob("*.json"), key=lambda p: p.stat().st_mtime)
    return [p for p in requests if p.stem not in answered]


def kind_of(body: dict) -> str:
    """What a recorded request asks for (the stand-in's reading of it): answer, check, classify,
    condense, ..."""
    return FakeClaude().kind(body)


def described(path: Path) -> dict[str, Any]:
    """A recorded request, briefly: its name, kind, model, size, and whether it is a round after
    a tool call."""
    body = json.loads(path.read_text(encoding="utf-8"))
    after = any(
        b.get("type") == "tool_result"
        for m in body.get("messages", [])
        if isinstance(m.get("content"), list)
        for b in m["content"]
    )
    return {
        "hash": path.stem,
        "kind": kind_of(body),
        "model": body.get("model"),
        "bytes": path.stat().st_size,
        "after_tool": after,
        "search_results": len(search_results(body)),
    }


def problems(response: dict, body: dict) -> list[str]:
    """What is wrong with a response written for `body` (empty: it is one the API could send):
    the answer's citations must name blocks of the request's search results, a tool call a tool
    it offers (while tool_choice allows one), a structured output's reply an object with the
    fields its schema requires; every response says who wrote it."""
    out: list[str] = []
    if not response.get("by"):
        out.append('no "by": name the model that wrote it')
    schema = ((body.get("output_config") or {}).get("format") or {}).get("schema")
    if schema is not None:
        value = response.get("json")
        if value is None:
            texts = [
                b.get("text", "") for b in response.get("content") or [] if b.get("type") == "text"
            ]
            try:
                value = json.loads("".join(texts))
            except json.JSONDecodeError:
                return out + [
                    'a structured output\'s reply must be JSON (write it as {"json": {...}})'
                ]
        out += schema_problems(value, schema)
        return out
    content = response.get("content")
    if not isinstance(content, list) or not content:
        return out + ['no "content" list of blocks']
    return out + [f"block {n}: {p}" for n, b in enumerate(content) for p in block_problems(b, body)]


def block_problems(block: dict, body: dict) -> list[str]:
    """A content block of an answer's response against its request (`problems`)."""
    kind = block.get("type")
    if kind == "tool_use":
        tools = [t.get("name") for t in body.get("tools") or []]
        if block.get("name") not in tools or (body.get("tool_choice") or {}).get("type") == "none":
            return [f"the request offers no tool {block.get('name')!r} now"]
        if not isinstance((block.get("input") or {}).get("query"), str):
            return ['the search tool takes {"query": "..."}']
        return []
    if kind != "text":
        return ["write text and tool_use blocks only (thinking is added)"]
    out = (
        [] if isinstance(block.get("text"), str) and block["text"] else ["a text block needs text"]
    )
    results = search_results(body)
    for c in block.get("citations") or []:
        i, s, e = (
            c.get(k) for k in ("search_result_index", "start_block_index", "end_block_index")
        )
        if not all(isinstance(v, int) for v in (i, s, e)):
            out.append("a citation needs integer search_result_index, start and end block indices")
        elif not (0 <= i < len(results) and 0 <= s < e <= len(results[i]["content"])):
            out.append(
                f"citation {i}/{s}-{e} names no blocks of the request's {len(results)} results"
            )
    return out


def schema_problems(value: Any, schema: dict, where: str = "") -> list[str]:
    """A structured reply against its JSON schema: types, required fields, enums (what
    structured outputs guarantee)."""
    kind = schema.get("type")
    types: dict[str, type | tuple[type, ...]] = {
        "object": dict,
        "array": list,
        "string": str,
        "integer": int,
        "number": (int, float),
        "boolean": bool,
    }
    if (
        kind in types
        and not isinstance(value, types[kind])
        or (kind == "integer" and isinstance(value, bool))
    ):
        return [f"{where or 'the reply'} must be a JSON {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of {schema['enum']}"]
    out: list[str] = []
    if kind == "object":
        out += [f"{where}.{k}: required" for k in schema.get("required", []) if k not in value]
        props = schema.get("properties", {})
        out += [f"{where}.{k}: not in the schema" for k in value if k not in props]
        for k, sub in props.items():
            if k in value:
                out += schema_problems(value[k], sub, f"{where}.{k}")
    if kind == "array":
        for i, item in enumerate(value):
            out += schema_problems(item, schema.get("items", {}), f"{where}[{i}]")
    return out
