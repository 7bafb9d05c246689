"""The answer written by Claude from the passages, with native search_result citations, streamed;
each citation checked by its indices against the blocks that were sent. Nothing is streamed to the
user before the answer has cited a passage: an answer that cites nothing is never shown (the
pipeline shows the docs' own quotes instead). The offline counterpart is router/offline.py
`compose`."""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prompts import render

from . import citations
from .answer import Citation, Passage, Source
from .claude import MessagesClient, Unusable, failures
from .clock import REAL, Clock
from .marks import marked
from .messages import cached_system, cached_turns, merge_usage, message, options, usage_of
from .second_look import (
    NO_TOOL,
    NOTHING_NEW,
    Looks,
    answered_content,
    tool_calls,
    tool_results,
)
from .streamed import NOT_IN_DOCS, Holdback

log = logging.getLogger(__name__)

GAP = "docs don't cover"  # how the prompt has an answer name a part the results leave out
# an answer's text: ~110 tokens usually, the longest seen under 800 (bench/claude_paths.py); 1,500
# leaves it room with thinking off (router/messages.py thinking_for); a model that always thinks
# gets THINKING_ROOM more. A reply cut there is asked again once with RETRY_MAX_TOKENS, when
# RETRY_TIME seconds are left for it.
MAX_TOKENS, RETRY_MAX_TOKENS = 1500, 4000
RETRY_TIME = 5.0

# what came back, for the pipeline to decide on
OK, NOT_COVERED, EMPTY, REFUSED, INCOMPLETE = "ok", "not_in_docs", "empty", "refusal", "incomplete"
CUT = "cut"  # the stream was cut at the question's deadline (or failed after text was shown)


@dataclass
class Written:
    status: str  # OK | NOT_COVERED | EMPTY | REFUSED | INCOMPLETE | CUT
    text: str = ""
    citations: list[Citation] = field(default_factory=list)
    usage: dict = field(default_factory=dict)
    # each text block of the reply (links removed) with its checked citations: the claim check's
    # sentences and the passages each one cites
    blocks: list[tuple[str, list[Citation]]] = field(default_factory=list)
    by: str = "offline"  # who wrote it: "claude" (compose) or "offline" (offline.compose)
    # what Claude wrote it from, to be asked for it again (`repair`); None offline
    conversation: Conversation | None = None

    @property
    def cited(self) -> bool:
        """Does it cite a passage by a citation that checked out?"""
        return any(c.verified for c in self.citations)


@dataclass
class Conversation:
    """What an answer was written from: the request's turns with the reply last, the search
    results they hold with each one's source, the tools they name, and how many seconds the
    reply took."""

    turns: list[dict]
    results: list[dict]
    sources: list[Source]
    tools: dict
    took: float


def compose(
    client: MessagesClient,
    model: str,
    question: str,
    passages: list[Passage],
    by_chunk: dict[str, Source],
    on_text: Callable[[str], None] | None = None,
    until: float | None = None,
    looks: Looks | None = None,
    clock: Clock = REAL,
) -> Written:
    """Claude's answer to `question` from `passages` (sources numbered in `by_chunk`). Streams
    the text to `on_text`; `until` (on `clock`) cuts the stream there, keeping what came
    (CUT). With `looks` (router/second_look.py) the request offers the search tool: each round
    that ends in a call of it is answered with the sections found and the answer goes on, while
    looks and time are left; a reply that names a gap before any look (`gap_unlooked`) is asked
    once to look first (prompts/look.md), and the answer then written replaces it (the reply
    stands when none comes or it fails, nothing of it shown). A reply cut by max_tokens is asked
    again once with more room when the time allows (not streamed again: the returned text
    supersedes what was streamed); a second try that fails or is cut keeps the first reply. An
    error before any text was shown is raised (the step is tried again or falls back offline);
    after, what was shown and checked is kept, CUT."""
    results = citations.search_results(passages, by_chunk)
    sources = list(by_chunk.values())
    hold = Holdback(on_text)
    convo: list[dict] = [
        {"role": "user", "content": [*results, {"type": "text", "text": f"Question: {question}"}]}
    ]
    tools = looks.tools() if looks is not None else {}
    started = clock.monotonic()
    msg, cut = _stream(
        client, model, convo, results, sources, MAX_TOKENS, hold, until, tools, clock
    )
    usage = usage_of(msg)
    asked, took = list(convo), clock.monotonic() - started  # what `msg` replies to
    kept: list[Any] = []  # the text of rounds that ended in a look, when it was shown
    nudged: Any = None  # the reply that named a gap before any look (so nothing was kept)
    while looks is not None and not cut:
        time_left = until - clock.monotonic() if until is not None else None
        if msg.stop_reason == "tool_use":
            calls = tool_calls(msg)
            if not calls or looks.left <= 0 or (time_left is not None and time_left < took):
                break
            kept += [b for b in msg.content if b.type == "text"] if hold.released else []
            hold.held = ""  # what came before the call and was never shown: the model's aside
            turn, new, of = looked(calls, looks)
            results, sources = results + new, sources + of
            convo += [{"role": "assistant", "content": answered_content(msg)}, turn]
        elif nudged is None and gap_unlooked(msg, looks, time_left, took):
            nudged, looks.asked = (msg, asked, took), True
            hold = Holdback(None if hold.released else on_text)
            convo += [{"role": "assistant", "content": answered_content(msg)}]
            convo += [{"role": "user", "content": [{"type": "text", "text": render("look")}]}]
        else:
            break
        started = clock.monotonic()
        tools = looks.tools()
        try:
            msg, cut = _stream(
                client, model, convo, results, sources, MAX_TOKENS, hold, until, tools, clock
            )
            usage = merge_usage(usage, usage_of(msg))
            asked, took = list(convo), clock.monotonic() - started
        except failures() as e:
            if nudged is None or hold.released:
                raise
            log.info("the answer after a look it was asked to take failed (%s)", e)
            cut = "failed"
    if nudged is not None and not hold.released and (cut or msg.stop_reason == "tool_use"):
        # no answer came after the nudge, and nothing of it was shown: the reply before it stands
        (msg, asked, took), cut = nudged, ""
    left = (until - clock.monotonic()) if until is not None else None
    retry = not cut and not kept and len(convo) == 1 and msg.stop_reason == "max_tokens"
    if retry and (left is None or left > RETRY_TIME):
        import anthropic

        try:
            again = client.with_options(timeout=left, max_retries=0) if left else client
            second, cut2 = _stream(
                again,
                model,
                convo,
                results,
                sources,
                RETRY_MAX_TOKENS,
                Holdback(None),
                until,
                tools,
                clock,
            )
            usage = merge_usage(usage, usage_of(second))
            if not cut2:
                msg = second
        except (anthropic.APIError, Unusable) as e:
            log.info("the longer second answer failed (%s); the first one is kept", e)
    said = Said(kept + list(msg.content), msg.stop_reason)
    written = finished(said, results, sources, cut, usage)
    turns = [*asked, {"role": "assistant", "content": answered_content(msg)}]
    written.conversation = Conversation(turns, results, sources, tools, took)
    return written


def repair(
    client: MessagesClient,
    model: str,
    conversation: Conversation,
    unsupported: list[str],
    until: float | None = None,
    clock: Clock = REAL,
) -> Written:
    """The answer written again (not streamed) after Claude is told which of its sentences the
    passages they cite do not state (prompts/repair.md), from the same search results, with no
    further search; its citations checked as the first answer's were (`read`). Raises what
    `_stream` raises."""
    named = "\n".join(f"<sentence>{html.escape(t, quote=False)}</sentence>" for t in unsupported)
    ask = {"role": "user", "content": [{"type": "text", "text": render("repair", sentences=named)}]}
    results, sources = conversation.results, conversation.sources
    tools = conversation.tools and {**conversation.tools, "tool_choice": NO_TOOL}
    msg, cut = _stream(
        client,
        model,
        [*conversation.turns, ask],
        results,
        sources,
        MAX_TOKENS,
        Holdback(None),
        until,
        tools,
        clock,
    )
    return finished(msg, results, sources, cut, usage_of(msg))


def finished(
    msg: Any, results: list[dict], sources: list[Source], cut: str, usage: dict
) -> Written:
    """The reply `msg` read as an answer (`read`), CUT where its stream was cut, with `usage`."""
    written = read(msg, results, sources)
    if cut and written.status in (OK, INCOMPLETE):
        written.status = CUT
    written.usage = usage
    return written


def looked(calls: list[Any], looks: Looks) -> tuple[dict, list[dict], list[Source]]:
    """The user turn that answers the reply's search calls, and the search results (with their
    sources) it adds, in order."""
    contents: list[list[dict]] = []
    results: list[dict] = []
    sources: list[Source] = []
    for call in calls:
        content, new, of = looks.look(call) if looks.left > 0 else ([], [], [])
        contents.append(content or [{"type": "text", "text": NOTHING_NEW}])
        results, sources = results + new, sources + of
    return tool_results(calls, contents), results, sources


def gap_unlooked(msg: Any, looks: Looks, time_left: float | None, took: float) -> bool:
    """Does the reply name a gap (NOT_IN_DOCS, or "The docs don't cover" as the prompt asks)
    before any look, with a look left and time for a call and an answer, each about as long as
    the round that wrote it (`took`)? Then it is asked once to look first."""
    if looks.done or looks.left <= 0 or (time_left is not None and time_left < 2 * took):
        return False
    text = "".join(b.text for b in msg.content if b.type == "text")
    return text.strip() == NOT_IN_DOCS or GAP in text.lower()


@dataclass
class Said:
    """What the answer said across its rounds, read as one reply: the text shown before each
    look, then the last reply's blocks, and how the last one stopped."""

    content: list[Any]
    stop_reason: str | None


def _stream(
    client,
    model: str,
    convo: list[dict],
    results: list[dict],
    sources: list[Source],
    max_tokens: int,
    hold: Holdback,
    until: float | None = None,
    tools: dict | None = None,
    clock: Clock = REAL,
) -> tuple[Any, str]:
    """(the message, "" or why it was cut short: the deadline, or an error once text was
    shown). With the search tool offered, the turns a later round sends again are cached."""
    tools = tools or {}
    last = tools.get("tool_choice") == NO_TOOL  # no round follows this one
    with client.messages.stream(
        system=cached_system(render("answer"), model),
        messages=cached_turns(convo, model, last) if tools else convo,
        **options(model, "answer", max_tokens),
        **tools,
    ) as stream:
        kind = stream.response.headers.get("content-type", "")
        if not kind.startswith("text/event-stream"):
            raise Unusable(f"a {kind or 'typeless'} reply where an event stream was asked for")
        cut = _read(stream, results, sources, hold, until, clock)
        try:
            msg = stream.current_message_snapshot if cut else stream.get_final_message()
        except AssertionError:  # the SDK's way of saying no message_start arrived
            raise Unusable("an event stream without a message") from None
    if msg.stop_reason is None and not cut:
        raise Unusable("the event stream ended before the message did")
    return message(msg), cut


def _read(
    stream, results: list[dict], sources: list[Source], hold: Holdback, until, clock: Clock
) -> str:
    """Reads the stream's events into `hold` (text) and checks each citation as it arrives;
    returns "" or why the stream was cut: the deadline (`until`), or an error after text was
    shown. An error before is raised, as the API's error (a read past FIRST_BYTE: a timeout)."""
    import anthropic
    import httpx2

    try:
        for event in stream:
            if until is not None and clock.monotonic() >= until:
                return "deadline"
            _take(event, hold, results, sources)
    except (anthropic.APIError, httpx2.TransportError) as e:
        if isinstance(e, httpx2.TimeoutException):  # a read past FIRST_BYTE, mid-stream
            e = anthropic.APITimeoutError(request=stream.response.request)
        elif isinstance(e, httpx2.TransportError):
            e = anthropic.APIConnectionError(request=stream.response.request)
        if not hold.released:
            raise e from None
        log.warning("the answer's stream failed after text was shown (%s): kept", e)
        return type(e).__name__
    return ""


def _take(event: Any, hold: Holdback, results: list[dict], sources: list[Source]) -> None:
    """One event of the stream into `hold`: a block's start and end, a text block's words, its
    citations as each checks out."""
    if event.type == "content_block_start":
        hold.block(event.content_block.type)
    elif event.type == "content_block_stop":
        hold.end()
    elif event.type == "content_block_delta" and event.delta.type == "citations_delta":
        cit = citations.check(event.delta.citation, results, sources)
        if cit is not None and cit.verified:
            hold.cite(cit.source)
    elif event.type == "content_block_delta" and event.delta.type == "text_delta":
        hold(event.delta.text)


def read(msg: Any, results: list[dict], sources: list[Source]) -> Written:
    """The reply's text with a [n] mark after each block for the sources its verified citations
    point at, links removed, and every citation checked (router/citations.py `check`)."""
    checked, blocks = [], []
    for block in msg.content:
        if block.type != "text":
            continue
        mine = [c for cit in block.citations or [] if (c := citations.check(cit, results, sources))]
        checked += mine
        blocks.append((strip_links(block.text), mine))
    text = marked(blocks)
    if msg.stop_reason == "refusal":
        return Written(REFUSED, text, checked, by="claude")
    if text.startswith(NOT_IN_DOCS):
        return Written(NOT_COVERED, by="claude")
    if not text:
        return Written(EMPTY, by="claude")
    if msg.stop_reason in ("max_tokens", "model_context_window_exceeded"):
        return Written(INCOMPLETE, text, checked, blocks=blocks, by="claude")
    return Written(OK, text, checked, blocks=blocks, by="claude")


def strip_links(text: str) -> str:
    """The model never writes links: [label](url) becomes label."""
    return re.sub(r"\[([^\]]+)\]\((?:https?://|www\.)[^)]*\)", r"\1", text)
