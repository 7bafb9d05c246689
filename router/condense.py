"""A follow-up rewritten as a standalone question from the thread (prompts/condense.md); offline,
the thread's last question is appended to the follow-up."""

from __future__ import annotations

import re

from prompts import render

from .claude import MessagesClient, cached_system, message, options, usage_of

MAX_QUESTION_CHARS = 4000

# The chat around a question in Slack: a greeting before it ("Hi team, quick question -"), the
# acknowledgement a follow-up starts with ("thanks, how do I …") and thanks after it ("Thanks!",
# "thx"). Searched for, those words only blur the question ("they don't mention thx"). A greeting
# goes when punctuation or a question word follows it ("Hello world example?" keeps its "Hello"; a
# hyphen counts with a space before it: "Hi-res images?" keeps its "Hi"); an acknowledgement when
# punctuation follows it ("Thanks to retries, …" stays); thanks when they end the message after a
# question's end.
_PUNCT = r"(?:\s*[,!.:;\u2013\u2014]|\s+-)[\s,!.:;\u2013\u2014-]*"
GREETING = re.compile(
    r"^\s*(?:(?:hi|hello|hey|hiya|howdy|yo|greetings|good (?:morning|afternoon|evening))"
    r"(?:\s+(?:there|all|everyone|everybody|folks|team|guys|y'?all))?"
    rf"(?:{_PUNCT}|\s+(?=(?:quick |small |short )?question\b|how\b|what\b|why\b|where\b"
    r"|when\b|which\b|who\b|can\b|could\b|is\b|are\b|does\b|do\b|should\b|would\b"
    r"|will\b|any)))?"
    rf"\s*(?:(?:a |one )?(?:quick |small |short )question{_PUNCT})?",
    re.I,
)
# the acknowledgement a follow-up starts with ("thanks, how do I replay them?", "ok - and the EU?")
ACK = re.compile(
    rf"^\s*(?:ok(?:ay)?|great|cool|perfect|nice|got it|thanks|thank you|thx|ty|cheers){_PUNCT}",
    re.I,
)
MENTION = re.compile(r"^\s*@[\w.-]+[,:]?\s+")  # "@fieldguide how do I …" typed, not a mention
THANKS = re.compile(
    r"(?<=[?.!,)])\s*(?:(?:many |big )?(?:thanks|thank you|thx|ty|cheers|tia)"
    r"(?:\s+(?:in advance|a lot|so much|all|everyone|team))?)[\s!.:)]*$",
    re.I,
)


def prior(history: list[dict]) -> list[dict]:
    return [h for h in history if h.get("text", "").strip()]


def with_claude(
    client: MessagesClient,
    model: str,
    question: str,
    history: list[dict],
    docs_language: str = "English",
) -> tuple[str, dict]:
    """(standalone question in `docs_language`, token usage); an empty rewrite keeps the offline
    one."""
    convo = "\n".join(f"{h['role']}: {h['text'][:1500]}" for h in prior(history)[-10:])
    msg = message(
        client.messages.create(
            system=cached_system(render("condense", docs_language=docs_language), model),
            messages=[
                {"role": "user", "content": f"Conversation:\n{convo}\n\nFollow-up: {question}"}
            ],
            **options(model, "condense", 1000),
        )
    )
    text = " ".join(b.text for b in msg.content if b.type == "text").strip()
    return (text[:MAX_QUESTION_CHARS] or offline(question, history)), usage_of(msg)


def plain(question: str) -> str:
    """The question without the greeting or acknowledgement before it and the thanks after it;
    as it is when nothing else is left ("hi")."""
    text = GREETING.sub("", MENTION.sub("", question, count=1), count=1)
    text = THANKS.sub("", ACK.sub("", text, count=1)).strip()
    if not text or text == question.strip():
        return question
    return text[:1].upper() + text[1:]


def offline(question: str, history: list[dict]) -> str:
    """The follow-up carries the thread's last question, which names what "it" refers to."""
    last_user = next((h["text"] for h in reversed(prior(history)) if h["role"] == "user"), "")
    return f"{question} (follow-up to: {plain(last_user)[:500]})" if last_user else question
