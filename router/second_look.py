"""A second look: when what Claude was given does not answer the question, Claude searches the
docs again with a query of its own.

The answer's request offers one tool, `search_docs` (TOOL): the same search the MCP `search` tool
runs (router/engine.py `Engine.route`: the query embedded, routed and searched inside the
question's scope, on the question's own index generation), its sections packed as the first read
was (router/context.py) and returned in the tool_result as search_result blocks, which the answer
then cites as it cites the first ones (a citation's search_result_index counts every search
result of the request, the tool results' included). A section Claude has already read is sent
again, as the source it was, only when the look reads a paragraph of it that was not sent: a
first read may hold a taste of a section, and the look, asking for what is missing, reads more.
Looks are bounded: at most `limit` a question, each only while the time left before the
answer's stream must end holds at least as long as the round before it took; once they are spent
the request says tool_choice none, so the answer is written from what was read. Each look (its
query, the sections it found) goes into the trace's routing, which the audit row keeps.

The model decides: the prompt (prompts/answer.md) asks it to search before answering when the
results do not answer the question or a part of it, so a question answered on the first read
makes one round trip as before; only the tool's definition is added to its request. An answer
that names a gap before any look is asked once to look first (router/compose.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from . import citations, context, exact
from .answer import Passage, Source

if TYPE_CHECKING:
    from .corpus import Corpus

NAME = "search_docs"
TOOL = {
    "name": NAME,
    "description": (
        "Search this team's documentation again with a query of your own. Use it before"
        " answering when the search results you were given do not answer the question, or"
        " answer only part of it: ask for what is missing, in the words the docs would use."
        " It returns more sections of the docs as search results, which you cite as you cite"
        " the others."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for, in plain words"}
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "strict": True,
}
NO_TOOL = {"type": "none"}  # the tool_choice of the last round
NOTHING_NEW = "No other sections of the docs match this query."
MAX_QUERY_CHARS = 300

# the search a look runs: query → the sections it finds, packed (router/context.Read)
Search = Callable[[str], list[context.Read]]


@dataclass
class Looks:
    """The second looks of one question: the search, how many are left, what each found, and the
    passages and sources the answer now reads (the first read's, then each look's)."""

    search: Search
    limit: int
    passages: list[Passage]
    by_chunk: dict[str, Source]
    source_of: Callable[[context.Read, int], Source]
    # told "searching_again" with each look's query, then "reading" with the sections it found
    tell: Callable[[str, list[str]], None] = lambda kind, labels: None
    done: list[dict] = field(default_factory=list)
    sections: dict[str, int] = field(default_factory=dict)  # a source's key: its section's id
    asked: bool = False  # asked to look after naming a gap without one (router/compose.py)

    @property
    def left(self) -> int:
        return self.limit - len(self.done)

    def tools(self) -> dict:
        """The request's tools: offered while looks are left, then tool_choice none (a
        conversation with tool calls in it still names its tools)."""
        if self.limit <= 0:
            return {}
        return {"tools": [TOOL]} | ({} if self.left > 0 else {"tool_choice": NO_TOOL})

    def look(self, call: Any) -> tuple[list[dict], list[dict], list[Source]]:
        """Runs one tool call (a tool_use block): (the tool_result's content, the search_result
        blocks it holds, in order, and each one's source), the sections it found added to the
        passages and sources (a section read before: see the module's docstring)."""
        query = str((getattr(call, "input", None) or {}).get("query", ""))[:MAX_QUERY_CHARS]
        self.tell("searching_again", [query])
        started = time.perf_counter()
        keys = {section: key for key, section in self.sections.items()}  # a section read: its key
        sent = {(p.chunk_id, p.text) for p in self.passages}
        found, results, sources = [], [], []
        for r in self.search(query) if query else []:
            r = replace(r, key=keys.get(r.section, r.key))
            paras = context.passages([r])
            if not paras or all((p.chunk_id, p.text) in sent for p in paras):
                continue
            if r.key not in self.by_chunk:
                self.by_chunk[r.key] = self.source_of(r, len(self.by_chunk) + 1)
            src = self.by_chunk[r.key]
            self.sections.setdefault(r.key, r.section)
            found.append(r)
            results += citations.search_results(paras, {r.key: src})
            sources.append(src)
            self.passages += [p for p in paras if (p.chunk_id, p.text) not in sent]
            sent |= {(p.chunk_id, p.text) for p in paras}
        if found:
            self.tell("reading", [r.label for r in found])
        self.done.append(
            {
                "query": query,
                "read": context.described(found),
                "ms": round((time.perf_counter() - started) * 1000, 1),
            }
        )
        content: list[dict] = results or [{"type": "text", "text": NOTHING_NEW}]
        return content, results, sources


def tool_calls(msg: Any) -> list[Any]:
    """The reply's calls of the search tool."""
    return [b for b in msg.content if b.type == "tool_use" and b.name == NAME]


def answered_content(msg: Any) -> list[dict]:
    """The assistant turn to send back before its tool results: the reply's blocks as the API
    gave them (thinking blocks unmodified, as the API requires), without citations' extras."""
    return [b.model_dump(exclude_none=True) for b in msg.content]


def tool_results(calls: list[Any], contents: list[list[dict]]) -> dict:
    """The user turn that answers the tool calls."""
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": content}
            for c, content in zip(calls, contents, strict=True)
        ],
    }


def searching(docs: Corpus, embed: Callable, depth: int, budget: int) -> Search:
    """The search a look runs: what `Engine.route` (the MCP search tool's search) runs, in the
    question's own docs (its scope, its index generation), its `depth` best chunks packed to
    `budget` tokens as the first read was, every identifier the query names shown where the
    docs write it (exact.named)."""

    def search(query: str) -> list[context.Read]:
        vec, _ = embed(query)
        found = docs.router.route(query, vec, k=depth, wait=False)
        return context.read(found.hits, docs, query, budget, exact.named(query, docs))

    return search


def source_for(base_url: str) -> Callable[[context.Read, int], Source]:
    """A section read by a look as the answer's source number n."""

    def make(r: context.Read, n: int) -> Source:
        c = r.chunk
        link = citations.link_for(c, base_url)
        return Source(
            n, c["id"], c["doc"], c["title"], c["heading_path"], link, c.get("updated") or ""
        )

    return make


def looks_for(
    docs: Corpus,
    embed: Callable,
    budget: context.Budget,
    base_url: str,
    passages: list[Passage],
    by_chunk: dict[str, Source],
    tell: Callable[[str, list[str]], None],
    sections: dict[str, int],
) -> Looks | None:
    """The looks one answer may take in `docs` (the question's scope and index generation), from
    the passages, sources and their sections it reads first (each look adds to them), `tell`
    told of each (its query, the sections it found); None when no look may be taken."""
    if budget.looks <= 0:
        return None
    search = searching(docs, embed, budget.depth, budget.tokens)
    return Looks(
        search, budget.looks, passages, by_chunk, source_for(base_url), tell, sections=sections
    )
