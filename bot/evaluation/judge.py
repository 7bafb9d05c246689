"""`fieldguide eval SET --answers --judge`: Claude grades each answer for faithfulness to the
passages it cites and for correctness against the set's reference answer (rubric
prompts/judge.md, a structured output). A grade that cannot be had (API error, unusable reply) is
left out of the figures and counted."""

from __future__ import annotations

import html
from typing import Any

from prompts import render
from router.answer import Answer
from router.claude import describe, failures
from router.messages import structured

FAITHFULNESS = {"faithful": 1.0, "partly_faithful": 0.5, "unfaithful": 0.0}
CORRECTNESS = {"correct": 1.0, "partly_correct": 0.5, "incorrect": 0.0}
SCHEMA = {
    "type": "object",
    "properties": {
        "faithfulness": {"type": "string", "enum": list(FAITHFULNESS)},
        "correctness": {"type": "string", "enum": list(CORRECTNESS)},
        "reason": {"type": "string"},
    },
    "required": ["faithfulness", "correctness", "reason"],
}


def cited_passages(ans: Answer) -> list[str]:
    """The text of the answer's verified citations, each once."""
    return list(dict.fromkeys(c.cited_text for c in ans.citations if c.verified))


def request(question: str, reference: str, ans: Answer) -> str:
    esc = lambda t: html.escape(t, quote=False)  # noqa: E731
    passages = "\n".join(
        f'<passage number="{i}">{esc(p)}</passage>' for i, p in enumerate(cited_passages(ans), 1)
    )
    return (
        f"<question>{esc(question)}</question>\n"
        f"<reference_answer>{esc(reference)}</reference_answer>\n"
        f"<answer>{esc(ans.text)}</answer>\n"
        f"<cited_passages>\n{passages or '(the answer cites no passage)'}\n</cited_passages>"
    )


class Judge:
    """Grades answers with `model` through `client` (an anthropic.Anthropic)."""

    def __init__(self, client: Any, model: str, timeout: float = 60.0):
        self.client, self.model, self.timeout = client, model, timeout

    def __call__(self, question: str, reference: str, ans: Answer) -> dict:
        """{"faithfulness": 0..1, "correctness": 0..1, the grades' names, "reason", "usage"}, or
        {"error": why}."""
        try:
            grade, usage = structured(
                self.client.with_options(timeout=self.timeout),
                self.model,
                render("judge"),
                request(question, reference, ans),
                SCHEMA,
                1500,
            )
            return {
                "faithfulness": FAITHFULNESS[grade["faithfulness"]],
                "correctness": CORRECTNESS[grade["correctness"]],
                "grades": [grade["faithfulness"], grade["correctness"]],
                "reason": str(grade.get("reason", "")),
                "usage": usage,
            }
        except failures() as e:
            return {"error": describe(e)}
