"""A follow-up rewritten as a standalone question from the thread (prompts/condense.md); offline,
the thread's last question is appended to the follow-up."""

from __future__ import annotations

from typing import Any

from prompts import render

from .claude import usage_of

MAX_QUESTION_CHARS = 4000


def prior(history: list[dict]) -> list[dict]:
    return [h for h in history if h.get("text", "").strip()]


def with_claude(client: Any, model: str, question: str, history: list[dict]) -> tuple[str, dict]:
    """(standalone question, token usage); an empty rewrite keeps the offline one."""
    convo = "\n".join(f"{h['role']}: {h['text'][:1500]}" for h in prior(history)[-10:])
    msg = client.messages.create(
        model=model,
        max_tokens=200,
        system=render("condense"),
        messages=[{"role": "user", "content": f"Conversation:\n{convo}\n\nFollow-up: {question}"}],
    )
    text = " ".join(b.text for b in msg.content if b.type == "text").strip()
    return (text[:MAX_QUESTION_CHARS] or offline(question, history)), usage_of(msg)


def offline(question: str, history: list[dict]) -> str:
    """The follow-up carries the thread's last question, which names what "it" refers to."""
    last_user = next((h["text"] for h in reversed(prior(history)) if h["role"] == "user"), "")
    return f"{question} (follow-up to: {last_user[:500]})" if last_user else question
