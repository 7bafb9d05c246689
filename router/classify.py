"""Intent classifiers: question → intents ranked by a score in [0, 1].

`OfflineClassifier` needs no key: the intents of the chunks that an unrouted hybrid search ranks
highest vote, weighted by score and rank, together with the intents' example questions from
intents.yaml. The search that votes uses the question's vector moved toward its best few chunks
(pseudo-relevance feedback). `ClaudeClassifier` asks Claude to pick from the taxonomy (a structured
output whose enum is the taxonomy and NONE) and falls back to the offline classifier on any failure
or invalid answer.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from index.search import Hit, Searcher
from prompts import render

from .answer import Trace
from .claude import Claude, MessagesClient, Unusable
from .messages import add_usage, cached_text, data, structured

log = logging.getLogger(__name__)

VOTERS = 50  # how many of the top unrouted chunks vote
# Pseudo-relevance feedback (Rocchio) before the vote: the question's vector moves toward the mean
# of its FEEDBACK best chunks, so the vote follows the topic those chunks share more than the
# question's surface words. openshift-4.15 intent accuracy 0.756 → 0.770 (5 questions gained, none
# lost), the examples set and claude-docs intent accuracy unchanged (its routed recall@3 0.727 →
# 0.732); stronger feedback (0.5+, or 5-10 chunks) gains less. Costs one more unrouted search
# (~10 ms at 200k chunks).
FEEDBACK, FEEDBACK_WEIGHT = 3, 0.3


@dataclass
class Classification:
    ranked: list[tuple[str, float]]  # best first
    source: str  # "offline" | "claude"
    note: str = ""  # why Claude's answer was not used, when it was not
    usage: dict = field(default_factory=dict)

    @property
    def top(self) -> str | None:
        return self.ranked[0][0] if self.ranked else None


class Classifier(Protocol):
    """question → intents ranked by a score in [0, 1]. `global_hits`: an unrouted search the
    caller already ran (the offline vote reuses it); `claude`: the question's Claude (deadline,
    earlier failures), for a classifier that asks Claude."""

    def classify(
        self,
        question: str,
        query_vec: np.ndarray | None,
        global_hits: list[Hit] | None = None,
        claude: Claude | None = None,
    ) -> Classification: ...


class OfflineClassifier:
    def __init__(
        self,
        searcher: Searcher,
        examples: dict[str, np.ndarray] | None = None,
        bm25_weight: float = 0.4,
    ):
        """`examples`: intent → embeddings of its example questions (rows), from intents.yaml."""
        self.searcher = searcher
        self.examples = examples or {}
        self.bm25_weight = bm25_weight

    def voters(
        self,
        question: str,
        query_vec: np.ndarray | None,
        global_hits: list[Hit] | None = None,
        k: int = VOTERS,
    ) -> list[Hit]:
        """The top k chunks of an unrouted search with the question's vector moved toward its
        FEEDBACK best chunks (`global_hits`: that search without feedback, if already run)."""
        hits = global_hits or self.searcher.search(
            question, query_vec, k=k, bm25_weight=self.bm25_weight
        )
        if query_vec is not None and self.searcher.vectors is not None and hits:
            moved = query_vec + FEEDBACK_WEIGHT * self.searcher.vectors[
                [h.row for h in hits[:FEEDBACK]]
            ].mean(axis=0)
            hits = self.searcher.search(
                question, moved / np.linalg.norm(moved), k=k, bm25_weight=self.bm25_weight
            )
        return hits

    def with_examples(self, votes: dict[str, float], query_vec: np.ndarray | None) -> None:
        """Adds to `votes` (in place) for intents whose example question the question closely
        paraphrases."""
        if query_vec is None or not self.examples:
            return
        total = sum(votes.values()) or 1.0
        for intent, rows in self.examples.items():
            sim = float(np.max(rows @ query_vec))
            if sim > 0.6:  # only a close paraphrase of an example question counts
                votes[intent] = votes.get(intent, 0.0) + total * (sim - 0.6)

    def classify(
        self,
        question: str,
        query_vec: np.ndarray | None,
        global_hits: list[Hit] | None = None,
        claude: Claude | None = None,  # not asked: the vote is offline
    ) -> Classification:
        hits = self.voters(question, query_vec, global_hits)
        votes: dict[str, float] = {}
        rank = 0
        for n, h in enumerate(hits[:VOTERS]):
            # a chunk's vote: its fused score, discounted by the square of its rank. A gentler
            # discount (1/rank) let big intents win on the sheer number of loosely matching chunks
            # in the tail: 0.70 intent accuracy on openshift-4.15 against 0.75 with 1/rank².
            # equal scores share a rank: a text that several intents' docs hold verbatim votes for
            # each of them alike, and the chunks below decide, not the index order
            if h.score != hits[rank].score:
                rank = n
            votes[h.intent] = votes.get(h.intent, 0.0) + max(h.score, 0.0) / (rank + 1) ** 2
        self.with_examples(votes, query_vec)
        total = sum(votes.values())
        if not total:
            return Classification([], "offline")
        ranked = sorted(((i, v / total) for i, v in votes.items()), key=lambda x: -x[1])
        return Classification(ranked, "offline")


# Claude's answer when no intent fits: not a slug (slugs are lowercase), so it can never be the
# name of a docs intent, "general" included (a team's docs without an intent are "general")
NO_INTENT = "NONE"


class ClaudeClassifier:
    def __init__(
        self,
        client: MessagesClient,
        model: str,
        intents: list[dict],
        fallback: OfflineClassifier,
        headings: dict[str, list[str]] | None = None,
    ):
        """`client`: an anthropic.Anthropic; `intents`: rows of the intents table (name,
        description, examples); `headings`: intent → a few of its docs' headings
        (router.describe.intent_headings), so Claude sees what each intent holds even where
        intents.yaml says nothing."""
        self.client = client
        self.headings = headings or {}
        self.model = model
        self.intents = intents
        self.names = [i["name"] for i in intents]
        self.fallback = fallback

    def schema(self) -> dict:
        """The reply's JSON schema: intents of the taxonomy (or NONE), best first."""
        return {
            "type": "object",
            "properties": {
                "intents": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "intent": {"type": "string", "enum": [*self.names, NO_INTENT]},
                            "confidence": {"type": "number"},
                        },
                        "required": ["intent", "confidence"],
                    },
                },
            },
            "required": ["intents"],
        }

    def taxonomy(self) -> str:
        return "\n".join(
            f"- {i['name']}: {i['description'] or '(no description)'}"
            + (
                f"\n    headings: {'; '.join(self.headings[i['name']])}"
                if self.headings.get(i["name"])
                else ""
            )
            + "".join(f"\n    e.g. {q}" for q in (i.get("examples") or [])[:5])
            for i in self.intents
        )

    def ask(self, client, question: str) -> Classification:
        """Claude's ranking (one call through `client`); raises what the call raises. The
        taxonomy (the docs' headings, intents.yaml's descriptions and examples) is data in the
        user turn, never the system prompt; the same for every question, it ends the cached
        prefix where that reaches the model's minimum."""
        system = render("classify", none=NO_INTENT)
        reply, usage = structured(
            client,
            self.model,
            system,
            [
                cached_text(data("intents", f"\n{self.taxonomy()}\n"), self.model, system),
                {"type": "text", "text": data("question", question)},
            ],
            self.schema(),
            max_tokens=1000,
            step="classify",
        )
        return Classification(self._parse(reply), "claude", usage=usage)

    def beside(self, question: str, claude: Claude) -> tuple[Classification | None, str]:
        """Claude's ranking made beside the answer, which does not wait for it: (it, "") or
        (None, why it did not come); a failure is no step that fell back offline."""
        return claude.attempt("classify", lambda client: self.ask(client, question))

    def classify(
        self,
        question: str,
        query_vec: np.ndarray | None,
        global_hits: list[Hit] | None = None,
        claude: Claude | None = None,
    ) -> Classification:
        """Claude's ranking, or the offline classifier's when Claude fails. `claude`: the
        question's Claude (deadline, earlier failures); None: this classifier's client alone."""
        claude = claude or Claude(self.client)
        result = claude.run(
            "classify",
            lambda client: self.ask(client, question),
            lambda: self.fallback.classify(question, query_vec, global_hits),
        )
        if result.source == "offline" and "classify" in claude.fell_back:
            result.note = unused_note(claude.fell_back["classify"])
        return result

    def _parse(self, data: dict) -> list[tuple[str, float]]:
        items = data.get("intents")
        if not isinstance(items, list) or not items:
            raise Unusable(f"malformed tool input {json.dumps(items)[:200]}")
        ranked: dict[str, float] = {}
        for item in items[:3]:
            name = item.get("intent") if isinstance(item, dict) else None
            if name == NO_INTENT:
                continue  # no intent fits: the search runs over everything
            if not isinstance(name, str) or name not in self.names:
                raise Unusable(f"intent {name!r} is not in the taxonomy")
            try:
                conf = float(item.get("confidence", 0.5))
            except (TypeError, ValueError):
                raise Unusable(f"confidence {item.get('confidence')!r} is not a number") from None
            ranked[name] = max(ranked.get(name, 0.0), min(max(conf, 0.0), 1.0))
        return sorted(ranked.items(), key=lambda x: -x[1])


def unused_note(why: str) -> str:
    """The routing note when Claude's classification was not used."""
    if why.startswith("unusable"):
        return f"Claude's routing answer was unusable ({why})"
    return f"Claude unavailable for routing ({why})"


def keep_classification(early: Future | None, trace: Trace) -> None:
    """Claude's classification, made beside the answer, kept in the trace's routing (the audit)
    when it is back; never waited for."""
    if early is None:
        return
    if early.cancelled() or not early.done():
        trace.notes.append("Claude's routing was not back by the end of the answer")
        return
    result, why = early.result()
    if result is None:
        trace.notes.append(f"Claude's routing did not run ({why})")
        return
    trace.route["claude"] = [{"intent": i, "score": round(s, 3)} for i, s in result.ranked[:5]]
    add_usage(trace.usage, "classify", result.usage)
