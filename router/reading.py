"""What a question asks, apart from what the asker brought to it.

A question typed in Slack or pasted from an issue carries the asker's own material: code spans and
blocks, quoted output, a log or a stack trace, paths, versions, identifiers, environment variables,
URLs. None of it is a subject the docs must cover: a docs page never names the asker's project or
path. The decision reads the question's prose for what the docs must cover, and closeness for
everything.

markdown-it-py parses the question as the markdown Slack and GitHub render: code spans, fenced and
indented code and block quotes are the asker's material; the rest is prose, read word by word, a
word with a character no English word has inside it (a digit, `_`, `/`, `\\`, `.`, `=`, `:`, `@`,
`$`, `<`) being a value or identifier the asker typed ("3.12.5", "x.x.x", "MY_TOKEN", "src/app.py",
"--frozen" is kept: a flag is a word of the docs), as is what `own_value` finds. The
question's sentences are its prose cut at sentence ends and blank lines.

The chat around the question (a greeting before it, thanks after it) goes before it is searched
(`plain`), and a follow-up is rewritten as a standalone question from the thread
(prompts/condense.md: the pipeline's condense step), offline by appending the thread's last
question to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt

from index.search import MAX_WORD, tokenize
from prompts import render

from .claude import MessagesClient
from .messages import cached_system, data, message, options, usage_of

# What the asker pasted (a log, a stack trace, indented lines) and their own values (URLs, hosts,
# IDs), found even where the question is no markdown
URL_OR_EMAIL = re.compile(r"[a-z][a-z0-9+.-]*://\S+|[^@\s]+@[^@\s]+\.[a-z]{2,}", re.I)
IP_ADDRESS = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?:/\d+)?")
HOST = re.compile(r"(?:[a-z0-9-]+\.){2,}[a-z]{2,}(?::\d+)?(?:/\S*)?", re.I)  # a.acme.io/x
TOKEN_EDGES = "\"'`()[]{}<>,;:!?."
PASTED = re.compile(
    r"```[^`]*```|\n(?:\t| {2,})[^\n]*|^Traceback \(most recent call last\):"
    r"|^\s*File \"[^\"]*\", line \d+[^\n]*|\bat [\w.$<>]+ \([^()\s]*:\d+:\d+\)",
    re.M,
)


def own_value(word: str) -> bool:
    """A URL, an email or IP address, a host name of three or more labels, or an ID with a
    random-looking part (a piece of 4+ characters switching between letters and digits 3+ times:
    7d9fb, evt_8f3k2; not x509, sha256, rhel8): the asker's, not a name of the docs."""
    w = word.strip(TOKEN_EDGES)
    if URL_OR_EMAIL.fullmatch(w) or IP_ADDRESS.fullmatch(w):
        return True
    if HOST.fullmatch(w) and not any(p[:1].isupper() for p in w.split(".")[1:]):  # not a.b.Class
        return True
    return any(
        len(piece) >= 4 and len(re.findall(r"[A-Za-z]+|\d+", piece)) >= 4
        for piece in re.split(r"[-_./:=]", w)
    )


PARSER = MarkdownIt("commonmark")
MATERIAL_BLOCKS = {"fence", "code_block", "html_block"}
# a character inside a word that no English word has there: what an identifier, path, version or
# value is made of (an apostrophe or hyphen inside is English: "don't", "built-in")
INSIDE = re.compile(r"[0-9_/\\.=:@$<>#%&*+|~^{}\[\]]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
EDGES = "\"'`()[]{},;:!?.*"


@dataclass(frozen=True)
class Reading:
    """A question read once, as every later step reads its words: its prose, sentences and the
    asker's material (module doc), the sentences that ask, and its names."""

    text: str  # the question as read
    prose: str  # the question's own words, the asker's material left out
    sentences: tuple[str, ...]  # prose cut at sentence ends and blank lines
    material: tuple[str, ...]  # what the asker brought: code, quotes, values
    # the sentences that ask: the first one (an issue's title, a message's opening) and each
    # ending in a question mark
    asking: str
    names: tuple[str, ...]  # the question's names (`specific_phrases`)
    asking_names: tuple[str, ...]  # the names in what it asks (in all of it when nothing asks)


def _words(text: str, material: list[str]) -> str:
    kept = []
    for w in text.split():
        core = w.strip(EDGES)
        if core and (own_value(w) or INSIDE.search(core)):
            material.append(core)
        else:
            kept.append(w)
    return " ".join(kept)


@lru_cache(maxsize=1024)
def read(question: str) -> Reading:
    """The question's prose, its sentences, the asker's material (module doc) and its names."""
    material: list[str] = []
    paragraphs: list[str] = []
    depth = 0  # inside a block quote

    def pasted(m: re.Match) -> str:
        material.append(m.group())
        return "\n\n"

    for tok in PARSER.parse(PASTED.sub(pasted, question)):
        if tok.type == "blockquote_open":
            depth += 1
        elif tok.type == "blockquote_close":
            depth -= 1
        elif tok.type in MATERIAL_BLOCKS or (depth and tok.type == "inline"):
            material.append(tok.content)
        elif tok.type == "inline":
            parts = []
            for child in tok.children or []:
                if child.type in ("code_inline", "html_inline"):
                    material.append(child.content)
                elif child.type == "text":
                    parts.append(child.content)
                elif child.type in ("softbreak", "hardbreak"):
                    parts.append(" ")
            paragraphs.append("".join(parts))
    sentences = tuple(
        kept
        for p in paragraphs
        for s in SENTENCE_END.split(p)
        if (kept := _words(s, material).strip()) and kept.strip(EDGES + " ")
    )
    first, rest = sentences[:1], sentences[1:]
    asking = " ".join([*first, *(s for s in rest if s.rstrip().endswith("?"))])
    return Reading(
        question,
        " ".join(sentences),
        sentences,
        tuple(m for m in material if m.strip()),
        asking,
        tuple(specific_phrases(question)),
        tuple(specific_phrases(asking or question)),
    )


def bounded(question: str, limit: int) -> str:
    """`question` in at most `limit` characters. A longer one is mostly what the asker pasted (a
    log, a trace) with the question before or after it: it is read (its opening and its end when
    it is over ten times the limit), and what is kept are its sentences that ask, those ending in
    a question mark, else its prose; cut at a word boundary."""
    if len(question) <= limit:
        return question
    if len(question) > 10 * limit:
        question = f"{question[: 5 * limit]}\n\n{question[-5 * limit :]}"
    reading = read(question)
    asks = [s for s in reading.sentences if s.rstrip().endswith("?")]
    text = " ".join(asks) if asks else reading.prose
    text = text or question  # nothing but material: its opening, as before
    if len(text) <= limit:
        return text
    cut = text[: limit + 1]
    return cut.rsplit(None, 1)[0] if " " in cut else cut[:limit]


# a word as a name is read in; a version ("4", "3.5", "4.15") joins a name ("Opus 4"), starts none
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./+#-]*")
VERSION = re.compile(r"\d{1,2}(?:\.\d+)*")


def specific_phrases(question: str) -> list[str]:
    """The question's names as runs of words: a word with a capital after its first letter (OAuth,
    GPT-4), a capitalised word that does not start the question, a code-like word (budget_tokens,
    v1/messages), and a version right after one of those ("Opus 4")."""
    runs: list[list[str]] = []
    prev_end = -1
    for i, m in enumerate(WORD.finditer(question)):
        w = m.group().rstrip(".-/")
        version = bool(VERSION.fullmatch(w))
        code = not version and bool(re.search(r"_|[a-z][A-Z]|[A-Za-z][./][A-Za-z]|[A-Za-z]-?\d", w))
        cap = any(c.isupper() for c in w[1:]) or (w[:1].isupper() and i > 0 and w != "I")
        joins = bool(runs) and prev_end >= 0 and question[prev_end : m.start()] == " "
        if not (code or cap or (version and joins)) or not tokenize(w) or len(w) > MAX_WORD:
            prev_end = -1
            continue
        if joins:
            runs[-1].append(w)
        else:
            runs.append([w])
        prev_end = m.end()
    return [" ".join(r) for r in runs]


# -- the chat around a question, and a follow-up made standalone ---------------------------------

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


def follow_up_with_claude(
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
                {
                    "role": "user",
                    "content": data("conversation", f"\n{convo}\n")
                    + "\n"
                    + data("follow_up", question),
                }
            ],
            **options(model, "condense", 1000),
        )
    )
    text = " ".join(b.text for b in msg.content if b.type == "text").strip()
    return (text[:MAX_QUESTION_CHARS] or follow_up_offline(question, history)), usage_of(msg)


def plain(question: str) -> str:
    """The question without the greeting or acknowledgement before it and the thanks after it;
    as it is when nothing else is left ("hi")."""
    text = GREETING.sub("", MENTION.sub("", question, count=1), count=1)
    text = THANKS.sub("", ACK.sub("", text, count=1)).strip()
    if not text or text == question.strip():
        return question
    return text[:1].upper() + text[1:]


def follow_up_offline(question: str, history: list[dict]) -> str:
    """The follow-up carries the thread's last question, which names what "it" refers to."""
    last_user = next((h["text"] for h in reversed(prior(history)) if h["role"] == "user"), "")
    return f"{question} (follow-up to: {plain(last_user)[:500]})" if last_user else question
