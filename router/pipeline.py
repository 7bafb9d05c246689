"""question (+ thread history) → condense → route → retrieve → extract → answer → validate → audit.

Every step that calls Claude has an offline counterpart, used when no key is set and when Claude
fails after the SDK's retries (429, 529, timeouts, connection errors): the answer then says it was
made from the docs without Claude. Passages and citations are checked against the chunk text, so
nothing reaches the user as a quote that is not in the docs.
"""

from __future__ import annotations

import logging
import re
import time

from index.search import BM25, Hit
from prompts import prompt_hash, render

from . import decide, offline
from .answer import (
    ABSTAIN,
    ANSWER,
    PARTIAL,
    Answer,
    Citation,
    Passage,
    Source,
    occurs_in,
)
from .engine import Engine
from .state import State

log = logging.getLogger(__name__)

OFFLINE_NOTE = "answered from the docs without Claude"
NOT_IN_DOCS = "NOT_IN_DOCS"
EXTRACT_TOOL = "record_passages"
CONTEXT_CHUNKS = 5  # top chunks handed to extraction
MAX_QUESTION_CHARS = 4000


class QuestionError(ValueError):
    """The question cannot be asked as given; the message is fit to show the user."""


def anchor(heading: str) -> str:
    """GitHub-style heading anchor."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return re.sub(r" ", "-", slug)


def link_for(chunk: dict, base_url: str = "") -> str:
    """The doc's front-matter url, else base_url + path (or the bare path), plus the section
    anchor."""
    section = chunk["heading_path"][-1] if len(chunk["heading_path"]) > 1 else ""
    frag = f"#{anchor(section)}" if section else ""
    if chunk.get("url"):
        return chunk["url"].split("#")[0] + frag
    if base_url:
        return base_url.rstrip("/") + "/" + chunk["doc"] + frag
    return chunk["doc"] + frag


def _usage(msg) -> dict:
    u = msg.usage
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_input_tokens": getattr(u, "cache_read_input_tokens", 0) or 0,
    }


def _add_usage(total: dict, step: str, usage: dict) -> None:
    total[step] = usage
    for k, v in usage.items():
        total[k] = total.get(k, 0) + (v or 0)


class Pipeline:
    def __init__(
        self,
        engine: Engine,
        anthropic_client=None,
        models: dict | None = None,
        docs_base_url: str = "",
        state: State | None = None,
    ):
        """`models`: {"condense", "extract", "answer"} model ids. `state`: where answers are
        recorded (None: nowhere)."""
        self.engine = engine
        self.client = anthropic_client
        self.models = models or {}
        self.docs_base_url = docs_base_url
        self.state = state

    # -- the steps -------------------------------------------------------------------------------

    def condense(self, question: str, history: list[dict], ans: Answer) -> str:
        prior = [h for h in history if h.get("text", "").strip()]
        # with Claude, a question in another language than the docs is rewritten into theirs
        searcher = self.engine.loaded().searcher if self.client is not None else None
        foreign = searcher is not None and decide.foreign_language(question, searcher)
        if not prior and not foreign:
            return question
        if self.client is not None and searcher is not None:
            import anthropic

            convo = "\n".join(f"{h['role']}: {h['text'][:1500]}" for h in prior[-10:])
            try:
                msg = self.client.messages.create(
                    model=self.models["condense"],
                    max_tokens=200,
                    system=render("condense", docs_language=decide.docs_language_name(searcher)),
                    messages=[
                        {
                            "role": "user",
                            "content": f"Conversation:\n{convo}\n\nFollow-up: {question}",
                        }
                    ],
                )
                _add_usage(ans.usage, "condense", _usage(msg))
                text = " ".join(b.text for b in msg.content if b.type == "text").strip()
                if text:
                    return text[:MAX_QUESTION_CHARS]
            except anthropic.APIError as e:
                self._offline(ans, f"condense: {type(e).__name__}")
        # offline: the follow-up carries the thread's last question, which names what "it" refers to
        last_user = next((h["text"] for h in reversed(prior) if h["role"] == "user"), "")
        return f"{question} (follow-up to: {last_user[:500]})" if last_user else question

    def extract(
        self, question: str, query_vec, hits: list[Hit], bm25: BM25, ans: Answer
    ) -> list[Passage]:
        top = hits[:CONTEXT_CHUNKS]
        if self.client is not None:
            import anthropic

            try:
                return self._extract_claude(question, top, ans)
            except anthropic.APIError as e:
                self._offline(ans, f"extract: {type(e).__name__}")
            except ValueError as e:
                self._offline(ans, f"extract: unusable answer ({e})")
        return offline.extract(question, query_vec, top[:3], bm25, self.engine.embedder)

    def _extract_claude(self, question: str, hits: list[Hit], ans: Answer) -> list[Passage]:
        chunks = "\n\n".join(
            f'<chunk number="{i}" title="{h.chunk["title"]} › '
            f'{" › ".join(h.chunk["heading_path"])}">\n'
            f"{h.chunk['text']}\n</chunk>"
            for i, h in enumerate(hits, 1)
        )
        tool = {
            "name": EXTRACT_TOOL,
            "description": "Record the verbatim passages that answer the question.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "passages": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "chunk": {"type": "integer"},
                                "text": {"type": "string"},
                            },
                            "required": ["chunk", "text"],
                        },
                    },
                    "nothing_relevant": {"type": "boolean"},
                },
                "required": ["passages", "nothing_relevant"],
            },
        }
        msg = self.client.messages.create(
            model=self.models["extract"],
            max_tokens=2000,
            system=render("extract"),
            messages=[{"role": "user", "content": f"{chunks}\n\nQuestion: {question}"}],
            tools=[tool],
            tool_choice={"type": "tool", "name": EXTRACT_TOOL},
        )
        _add_usage(ans.usage, "extract", _usage(msg))
        block = next((b for b in msg.content if b.type == "tool_use"), None)
        if (
            block is None
            or not isinstance(block.input, dict)
            or not isinstance(block.input.get("passages"), list)
        ):
            raise ValueError("no passages in the tool call")
        passages = []
        for item in block.input["passages"]:
            try:
                hit = hits[int(item["chunk"]) - 1]
                text = str(item["text"])
            except (KeyError, TypeError, ValueError, IndexError):
                ans.dropped_passages += 1
                continue
            if occurs_in(text, hit.chunk["text"]):
                passages.append(Passage(hit.chunk["id"], text.strip(), hit.score))
            else:
                ans.dropped_passages += 1
                log.info("dropped a passage not found in chunk %s: %r", hit.chunk["id"], text[:80])
        return passages

    def write_answer(self, question: str, passages: list[Passage], ans: Answer) -> str:
        by_chunk = self._sources_for(passages, ans)
        if self.client is not None:
            import anthropic

            try:
                return self._answer_claude(question, passages, by_chunk, ans)
            except anthropic.APIError as e:
                self._offline(ans, f"answer: {type(e).__name__}")
        return offline.compose(passages, by_chunk, ans)

    def _sources_for(self, passages: list[Passage], ans: Answer) -> dict[str, Source]:
        records = {h["id"]: h for h in ans.hits}
        by_chunk: dict[str, Source] = {}
        for p in passages:
            if p.chunk_id not in by_chunk:
                c = records[p.chunk_id]
                by_chunk[p.chunk_id] = Source(
                    len(by_chunk) + 1,
                    c["id"],
                    c["doc"],
                    c["title"],
                    c["heading_path"],
                    link_for(c, self.docs_base_url),
                )
        ans.sources = list(by_chunk.values())
        return by_chunk

    def _answer_claude(
        self, question: str, passages: list[Passage], by_chunk: dict[str, Source], ans: Answer
    ) -> str:
        order = list(by_chunk)  # search_result_index → chunk id
        results = [
            {
                "type": "search_result",
                "source": by_chunk[cid].url,
                "title": f"{by_chunk[cid].title} › {by_chunk[cid].section}",
                "content": [
                    {"type": "text", "text": p.text} for p in passages if p.chunk_id == cid
                ],
                "citations": {"enabled": True},
            }
            for cid in order
        ]
        msg = self.client.messages.create(
            model=self.models["answer"],
            max_tokens=1500,
            system=render("answer"),
            messages=[
                {
                    "role": "user",
                    "content": [*results, {"type": "text", "text": f"Question: {question}"}],
                }
            ],
        )
        _add_usage(ans.usage, "answer", _usage(msg))
        chunk_text = {h["id"]: h["text"] for h in ans.hits}
        parts = []
        for block in msg.content:
            if block.type != "text":
                continue
            marks = []
            for cit in block.citations or []:
                if getattr(
                    cit, "type", ""
                ) != "search_result_location" or not 0 <= cit.search_result_index < len(order):
                    continue
                src = by_chunk[order[cit.search_result_index]]
                ok = occurs_in(cit.cited_text, chunk_text[src.chunk_id])
                ans.citations.append(
                    Citation(src.n, src.doc, src.section, src.url, cit.cited_text, ok)
                )
                if f"[{src.n}]" not in marks:
                    marks.append(f"[{src.n}]")
            parts.append(strip_links(block.text) + ("".join(marks) if marks else ""))
        text = "".join(parts).strip()
        if text == NOT_IN_DOCS or text.startswith(NOT_IN_DOCS):
            return NOT_IN_DOCS
        cited = {c.source for c in ans.citations}
        ans.sources = [s for s in ans.sources if s.n in cited] or ans.sources
        return text

    def _offline(self, ans: Answer, why: str) -> None:
        log.warning("Claude step failed, running it offline: %s", why)
        ans.offline = True
        ans.notes.append(f"{why}: {OFFLINE_NOTE}")

    # -- the whole path --------------------------------------------------------------------------

    def answer(
        self, question: str, history: list[dict] | None = None, context: dict | None = None
    ) -> Answer:
        """Answer a question (with the thread's earlier messages, oldest first, as {"role",
        "text"})."""
        question = (question or "").strip()
        if not question:
            raise QuestionError("The question is empty: ask me something about the docs.")
        if len(question) > MAX_QUESTION_CHARS:
            question = question[:MAX_QUESTION_CHARS]
        t0 = time.perf_counter()
        ans = Answer(question, question, ABSTAIN, "", offline=self.client is None)
        ans.models = {
            "embed": self.engine.embedder.name,
            **(
                {k: self.models.get(k) for k in ("condense", "extract", "answer")}
                if self.client
                else {}
            ),
        }
        ans.prompts = {
            name: prompt_hash(name) for name in ("classify", "condense", "extract", "answer")
        }
        clock = time.perf_counter()

        def lap(name):
            nonlocal clock
            now = time.perf_counter()
            ans.timings_ms[name] = round((now - clock) * 1000, 1)
            clock = now

        ans.condensed = self.condense(question, history or [], ans)
        lap("condense")
        query_vec, note = self.engine.embed_query(ans.condensed)
        if note:
            ans.notes.append(note)
        lap("embed")
        # one index generation for the whole answer, even if a reindex commits
        loaded = self.engine.loaded()
        decision = loaded.router.route(ans.condensed, query_vec, k=10)
        if decision.note:
            ans.notes.append(decision.note)
            ans.offline = ans.offline or decision.classifier == "offline"
        ans.route = decision.to_dict()
        if decision.usage:
            _add_usage(ans.usage, "classify", decision.usage)
        ans.hits = [
            h.chunk | {"bm25": h.bm25, "vector": h.vector, "score": h.score} for h in decision.hits
        ]
        lap("route_retrieve")

        bm25 = loaded.searcher.bm25
        strength = decide.evidence(
            ans.condensed,
            query_vec,
            decision.hits,
            bm25,
            ans,
            searcher=loaded.searcher,
            claude=self.client is not None,
        )
        if strength == ABSTAIN:
            # nothing near: naming "closest" sections would be noise
            ans.text = decide.abstain_message(ans) or self.abstain_text([])
            return self._finish(ans, t0, context)
        passages = self.extract(ans.condensed, query_vec, decision.hits, bm25, ans)
        ans.passages = passages
        lap("extract")
        strength = decide.after_fallback(strength, ans)
        if strength == ABSTAIN:
            ans.text = decide.abstain_message(ans) or self.abstain_text([])
            return self._finish(ans, t0, context)
        if not passages:
            ans.text = self.abstain_text(decision.hits)
            return self._finish(ans, t0, context)
        text = self.write_answer(question, passages, ans)
        lap("answer")
        if text == NOT_IN_DOCS:
            ans.text, ans.sources = self.abstain_text(decision.hits), []
            return self._finish(ans, t0, context)
        ans.text = text
        unverified = any(not c.verified for c in ans.citations)
        ans.decision = (
            PARTIAL
            if strength == PARTIAL or unverified or "docs don't cover" in text.lower()
            else ANSWER
        )
        return self._finish(ans, t0, context)

    def abstain_text(self, hits: list[Hit]) -> str:
        """The "not in the docs" answer; `hits`: related sections that did not answer it, to
        name."""
        text = "I couldn't find this in the docs, so I won't guess."
        near = []
        for h in hits[:3]:
            rest = " › ".join(h.chunk["heading_path"][1:]) or h.chunk["title"]
            label = f"{h.chunk['title']} › {rest}"
            if label not in near:
                near.append(label)
        return text + (" The closest sections were: " + "; ".join(near) + "." if near else "")

    def _finish(self, ans: Answer, t0: float, context: dict | None) -> Answer:
        ans.timings_ms["total"] = round((time.perf_counter() - t0) * 1000, 1)
        if ans.offline and OFFLINE_NOTE not in " ".join(ans.notes) and self.client is None:
            ans.notes.append(OFFLINE_NOTE)
        if self.state is not None:
            try:
                ans.audit_id = self.state.record_answer(ans, context or {})
            except Exception:  # the audit log must never cost the user an answer
                log.exception("could not record the answer in the audit table")
        return ans


def strip_links(text: str) -> str:
    """The model never writes links: [label](url) becomes label."""
    return re.sub(r"\[([^\]]+)\]\((?:https?://|www\.)[^)]*\)", r"\1", text)
