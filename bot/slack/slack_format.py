"""Answers as Slack messages: a `markdown` block for the text and sources, a context line with the
decision, and native feedback buttons.

Everything that comes from the docs or the model is escaped (`&`, `<`, `>`), in text and code
alike, so Slack never reads `<!channel>`, `<@U…>` or `<url|label>` in it; Markdown links written
in the text are reduced to their label, and a bare URL in the model's text that is not one of
the answer's sources is set as code (Slack links and unfurls bare URLs, not code). The only links
are the sources', and only when their URL is a plain http(s) address.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

from markdown_it import MarkdownIt

from router.answer import Answer, Source
from router.citations import updated_ago
from router.marks import fences
from router.rendered import CODE_SPAN
from router.words import TYPO_NOTE

# Slack's documented limits (docs.slack.dev, Block Kit reference): a markdown block's text 12,000
# characters, and the markdown blocks of one payload 12,000 together; a section's or a text
# object's text 3,000; a header's 150; 50 blocks a message (100 in a Home view); a message's
# `text` is cut by Slack past 40,000.
MARKDOWN_LIMIT = 12_000  # characters of markdown blocks in one message
TEXT_LIMIT = 3_000  # of a message's fallback `text`, of each plain-text piece, of a text object
HEADER_LIMIT = 150
MESSAGE_BLOCKS = 50
LABEL_LIMIT = 300  # a source's label (its heading path) as shown, whatever the index holds
FEEDBACK_ACTION = "answer_feedback"
# buttons on answers posted before native feedback; their clicks are still recorded
LEGACY_FEEDBACK_ACTIONS = ("feedback_helpful", "feedback_not_helpful")
HELPFUL, NOT_HELPFUL = "helpful", "not_helpful"
ASK_PERSON = "ask_person"  # the "Ask a person" button (bot/slack/handoff.py)

DECISIONS = {
    "ANSWER": "answered from the docs",
    "PARTIAL": "partly answered: the docs cover some of this",
    "ABSTAIN": "not in the docs",
}


def escape(text: str) -> str:
    """Slack's three control characters as entities: nothing in `text` can mention or link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_line(line: str) -> str:
    quote = re.match(r"^(\s*>)+", line)  # a blockquote marker stays one
    prefix, rest = (quote.group(0), line[quote.end() :]) if quote else ("", line)
    return prefix + escape(rest)


# an inline link or image, its label holding at most one level of brackets ("[a [b]](u)"), not
# an index called in code (`handlers[i](event)`)
_LINK = re.compile(r"(?<!\w)!?\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(([^)\n]*)\)")
# a `]` that closes a link's text or label: before `(` (inline), `[` (a reference) or `:` (a
# reference definition, whatever its label holds: two lines, an escaped `]`), not escaped already
# (an even run of backslashes before it escapes only themselves)
_LINK_CLOSE = re.compile(r"(?<!\\)((?:\\\\)*)\](?=[(\[:])")
_ANY_CLOSE = re.compile(r"(?<!\\)((?:\\\\)*)\]")
PARSER = MarkdownIt("commonmark")


def links_of(markdown: str) -> bool:
    """Does a CommonMark parser (as Slack's markdown block) read a link, an image or a reference
    definition in `markdown`?"""
    env: dict = {}
    tokens = PARSER.parse(markdown, env)
    if env.get("references"):
        return True
    return any(t.type in ("link_open", "image") for token in tokens for t in token.children or [])


# code (router/rendered.py's code span, over lines: a fenced block's fences included); markdown
# reads no link in it, and shows a backslash in it as typed
_CODE = re.compile(CODE_SPAN.pattern, re.S)


def outside_code(text: str, change: Callable[[str], str]) -> str:
    """`text` with `change` made to what is not code."""
    out, at = [], 0
    for m in _CODE.finditer(text):
        out += [change(text[at : m.start()]), m.group()]
        at = m.end()
    return "".join([*out, change(text[at:])])


def safe_markdown(text: str) -> str:
    """Model or doc text made safe for a `markdown` block: inline links reduced to their labels
    (a URL set as code in one's target too), then outside code every `]` that could close a
    link's text or a reference definition's label escaped (a label nesting brackets deeper,
    `[a [b [c]]](u)`, a definition's label over two lines or holding `\\]`: no link of the
    text can form, whatever its brackets); then every line escaped. Code is left as written
    (`a[0](x)`, `[1, 2]::FLOAT[2]`): markdown reads no link in it. What is left is read by
    markdown-it as Slack would: should it still find a link or a definition, every `]` is
    escaped."""
    text = _LINK.sub(lambda m: m.group(1), text)
    text = outside_code(text, lambda t: _LINK_CLOSE.sub(lambda m: m.group(1) + "\\]", t))
    out = "\n".join(_escape_line(line) for line in text.split("\n"))
    if "]" in out and links_of(out):
        out = _ANY_CLOSE.sub(lambda m: m.group(1) + "\\]", out)
    return out


# code (left alone: Slack links nothing in it), or a URL Slack would turn into a link: a scheme or
# www., up to whitespace or an answer's [n] mark, not ending in the punctuation that closes a
# sentence or a bracket
_CODE_OR_URL = re.compile(
    r"(?P<code>```.*?(?:```|\Z)|`[^`\n]*`)"
    r"|(?P<url>\b(?:[a-z][a-z0-9+.-]*://|www\.)(?:(?!\[\d+\])[^\s<>`])*[^\s<>`.,;:!?)\]'\"*_~\[])",
    re.S | re.I,
)


def unlinked_urls(text: str, sources: frozenset[str] = frozenset()) -> str:
    """`text` with each bare URL that is not one of `sources` set as inline code: shown as text,
    never a link a reader could take for a source (nor unfurled), whatever the model wrote."""

    def code(m: re.Match) -> str:
        url = m.group("url")
        return m.group() if url is None or url in sources else f"`{url}`"

    return _CODE_OR_URL.sub(code, text)


def safe_url(url: str) -> str | None:
    """`url` when it is a plain http(s) address (a host, no spaces, quotes or angle brackets),
    else None: a front-matter url is shown as text, never linked, unless it passes."""
    if not url or re.search(r"[\s<>\"'|`\\\[\]()]", url) or any(ord(c) < 32 for c in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return url


def _label(text: str) -> str:
    text = text if len(text) <= LABEL_LIMIT else text[: LABEL_LIMIT - 1] + "…"
    return outside_code(escape(text), lambda t: t.replace("[", "\\[").replace("]", "\\]"))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def within_limits(blocks: list[dict], most: int = MESSAGE_BLOCKS) -> list[dict]:
    """`blocks` as Slack accepts them whatever the docs or the model put in them: every text
    cut to its limit, the markdown blocks to 12,000 characters together, at most `most` blocks
    (the last ones, the decision line and buttons, kept)."""
    budget = MARKDOWN_LIMIT
    out = []
    for b in blocks:
        b = dict(b)
        kind = b.get("type")
        if kind == "markdown":
            b["text"] = _cut(b["text"], max(budget, 1))
            budget -= len(b["text"])
            if not b["text"] or budget < 0:
                continue
        elif kind in ("section", "header") and isinstance(b.get("text"), dict):
            limit = HEADER_LIMIT if kind == "header" else TEXT_LIMIT
            b["text"] = {**b["text"], "text": _cut(b["text"].get("text", ""), limit)}
        elif kind == "context":
            b["elements"] = [
                {**e, "text": _cut(e["text"], TEXT_LIMIT)} if "text" in e else e
                for e in b.get("elements", [])[:10]
            ]
        out.append(b)
    return out if len(out) <= most else out[: most - 3] + out[-3:]


def sources_markdown(sources: list[Source]) -> str:
    """The sources as a bulleted list, each under the [n] the answer's text marks it with. Not a
    numbered list: markdown numbers a list's items on from its first, so sources 16 and 44 would
    show as 16 and 17."""
    lines = []
    for s in sources:
        label = _label(s.label)
        url = safe_url(s.url)
        ago = f" · _{updated_ago(s.updated)}_" if s.updated and updated_ago(s.updated) else ""
        stale = f" · ⚠️ _stale: {_label(s.stale)}_" if s.stale else ""
        lines.append(f"- [{s.n}] " + (f"[{label}]({url})" if url else label) + ago + stale)
    return "**Sources**\n" + "\n".join(lines) if lines else ""


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut at paragraph, then line, then space boundaries; a
    code block cut in two is closed and reopened so each piece renders on its own."""
    pieces = []
    while len(text) > limit:
        window = text[: limit - 4]  # room to close a code fence
        cut = (
            max(window.rfind("\n\n"), 0)
            or max(window.rfind("\n"), 0)
            or max(window.rfind(" "), 0)
            or len(window)
        )
        piece, text = text[:cut], text[cut:].lstrip("\n")
        if piece.count("```") % 2:
            piece += "\n```"
            text = "```\n" + text
        pieces.append(piece)
    if text.strip():
        pieces.append(text)
    return pieces


def markdown_block(text: str) -> dict:
    return {"type": "markdown", "text": text}


def context_line(ans: Answer) -> str:
    parts = [DECISIONS.get(ans.decision, ans.decision.lower())]
    parts.append(f"intent: {ans.intents[0] if ans.intents else 'none'}")
    # a step that fell back (a follow-up condensed offline) is the trace's; the line says whether
    # Claude wrote what the user reads
    if ans.trace.offline and "answer" not in ans.trace.usage:
        parts.append("answered without Claude")
    if any("keyword search only" in n for n in ans.trace.notes):
        parts.append("keyword search only (embeddings unavailable)")
    parts += [n for n in ans.trace.notes if n.startswith(TYPO_NOTE)]
    if ans.scope is not None:
        parts.append(f"searched: {ans.scope.describe()}")
    return escape(" · ".join(parts))[:2000]


def feedback_block(answer_id: int) -> dict:
    """Slack's native 👍/👎 under an answer; a click carries "helpful:<id>" or
    "not_helpful:<id>"."""
    return {
        "type": "context_actions",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK_ACTION,
                "positive_button": {
                    "text": {"type": "plain_text", "text": "Helpful"},
                    "accessibility_label": "This answer was helpful",
                    "value": f"{HELPFUL}:{answer_id}",
                },
                "negative_button": {
                    "text": {"type": "plain_text", "text": "Not helpful"},
                    "accessibility_label": "This answer was not helpful",
                    "value": f"{NOT_HELPFUL}:{answer_id}",
                },
            }
        ],
    }


def ask_person_block(answer_id: int, text: str = "") -> list[dict]:
    """The "Ask a person" button (with a line of `text` before it, if given)."""
    blocks: list[dict] = []
    if text:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    blocks.append(
        {
            "type": "actions",
            "block_id": f"handoff-{answer_id}",
            "elements": [
                {
                    "type": "button",
                    "action_id": ASK_PERSON,
                    "text": {"type": "plain_text", "text": "Ask a person"},
                    "value": str(answer_id),
                }
            ],
        }
    )
    return blocks


# an audit row id as a button carries it: ASCII digits, no sign or leading zero, at most 18 of
# them (under SQLite's and PostgreSQL's 64-bit integers: a longer one raised OverflowError)
ANSWER_ID = re.compile(r"[1-9][0-9]{0,17}")


def answer_id_of(value: object) -> int | None:
    """The answer id a button's value holds, or None when it holds none (`str.isdigit` took "²"
    and 40 digits)."""
    text = str(value)
    return int(text) if ANSWER_ID.fullmatch(text) else None


def parse_feedback(action: dict) -> tuple[int, str] | None:
    """(answer id, "helpful" | "not_helpful") from a feedback click, native or legacy; None when
    the value is not ours."""
    value = str(action.get("value", ""))
    if action.get("action_id") in LEGACY_FEEDBACK_ACTIONS and (found := answer_id_of(value)):
        choice = HELPFUL if action["action_id"] == LEGACY_FEEDBACK_ACTIONS[0] else NOT_HELPFUL
        return found, choice
    choice, _, answer_id = value.partition(":")
    if choice in (HELPFUL, NOT_HELPFUL) and (found := answer_id_of(answer_id)):
        return found, choice
    return None


def caveat_markdown(ans: Answer) -> str:
    """The one line that says why an answer is partial, if it is."""
    return f"_⚠ {escape(ans.caveat)}_" if getattr(ans, "caveat", "") else ""


def footer_blocks(
    ans: Answer,
    answer_id: int | None,
    sources: list[Source] | None = None,
    with_caveat: bool = False,
) -> list[dict]:
    """What closes an answer: the list of `sources` (default: all the answer's; [] when they are
    shown elsewhere), the decision line and the feedback buttons; the caveat first when asked (a
    streamed answer's text is already out)."""
    blocks = []
    listed = sources_markdown(ans.sources if sources is None else sources)
    if with_caveat and caveat_markdown(ans):
        listed = caveat_markdown(ans) + ("\n\n" + listed if listed else "")
    if listed:  # one block: a message's markdown blocks share one 12,000-character limit
        pieces = split_text(listed, MARKDOWN_LIMIT - 2)
        blocks.append(markdown_block(pieces[0] + ("\n…" if len(pieces) > 1 else "")))
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context_line(ans)}]})
    if answer_id is not None:
        blocks.append(feedback_block(answer_id))
        if ans.decision in ("ABSTAIN", "PARTIAL"):  # the docs did not settle it: offer a person
            blocks += ask_person_block(answer_id)
    return within_limits(blocks)


def source_urls(ans: Answer) -> frozenset[str]:
    return frozenset(s.url for s in ans.sources if safe_url(s.url))


def answer_text(ans: Answer) -> str:
    """The answer's text as Markdown Slack shows safely, its caveat first."""
    text = safe_markdown(unlinked_urls(ans.text, source_urls(ans)))
    if caveat := caveat_markdown(ans):
        text = f"{caveat}\n\n{text}"
    return text


def answer_messages(ans: Answer, answer_id: int | None) -> list[list[dict]]:
    """The answer as one message's blocks when its text and sources fit one markdown block, else
    as several messages, the last one closed by the sources, decision and feedback."""
    text = answer_text(ans)
    sources = sources_markdown(ans.sources)
    whole = text + ("\n\n" + sources if sources else "")
    if len(whole) <= MARKDOWN_LIMIT:
        return [within_limits([markdown_block(whole), *footer_blocks(ans, answer_id, [])])]
    messages = [[markdown_block(p)] for p in split_text(text, MARKDOWN_LIMIT)]
    messages.append(footer_blocks(ans, answer_id))
    return [within_limits(m) for m in messages]


class StreamSanitizer:
    """Streamed model text made safe piece by piece: escaped like `safe_markdown`, bare URLs set
    as code (`unlinked_urls`; the sources are not known yet: every URL), and whatever could still
    become a Markdown link (from an open `[` on) or a URL (the last, unfinished word) held back
    until it is resolved, since their pieces arrive in separate deltas."""

    _OPEN = re.compile(r"!?\[[^\]\n]*(\](\([^)\n]*)?)?")
    HOLD_LIMIT = 400  # a longer run from `[` is not a link label and URL any more

    def __init__(self):
        self.held = ""
        self.raw = ""  # everything fed, as the model wrote it
        self.sent = ""  # the part of it released
        self.safe = ""  # that part as made safe
        # the released text up to its last paragraph break outside a code block (markdown reads no
        # code span, link or URL across it: what comes after is read apart), and its safe form
        self.settled, self.settled_safe = 0, ""

    def feed(self, delta: str) -> str:
        self.raw += delta
        text = self.held + delta
        start = text.rfind("[")
        if start > 0 and text[start - 1] == "!":
            start -= 1
        if not (
            start >= 0
            and len(text) - start <= self.HOLD_LIMIT
            and self._OPEN.fullmatch(text, start)
        ):
            start = len(text)
        word = len(text) - len(re.split(r"\s", text[-self.HOLD_LIMIT :])[-1])
        # a link whose last word is held is held whole: its label shown now could not be unsaid
        word = min([word, *(m.start() for m in _LINK.finditer(text) if m.start() < word < m.end())])
        start = min(start, word)
        text, self.held = text[:start], text[start:]
        return self._release(text)

    def flush(self) -> str:
        text, self.held = self.held, ""
        return self._release(text)

    def _release(self, text: str) -> str:
        if not text:
            return ""
        # read in the context of what came before since the settled part (an open code span or
        # block), so that a long answer is not read again whole at every piece
        before, self.sent = self.safe, self.sent + text
        rest = self.sent[self.settled :]
        self.safe = self.settled_safe + safe_markdown(unlinked_urls(rest))
        cut = rest.rfind("\n\n") + 2
        if cut > 1 and fences(rest[:cut]) % 2 == 0:
            self.settled += cut
            self.settled_safe += safe_markdown(unlinked_urls(rest[:cut]))
        return self.safe[len(before) :] if self.safe.startswith(before) else safe_markdown(text)


def same_words(streamed: str, final: str) -> bool:
    """Does the final, checked answer say what was streamed (apart from the [n] markers it adds
    and the links it drops)?"""

    def words(text: str) -> str:
        text = _LINK.sub(lambda m: m.group(1), text)
        return " ".join(re.sub(r"\[\d+\]", " ", text).split())

    return words(streamed) == words(final)


def plain(text: str) -> str:
    """Model or doc text made safe for a message's plain `text` (Slack's mrkdwn, where markdown's
    links and escapes mean nothing): links reduced to their labels, every line escaped."""
    return "\n".join(
        _escape_line(line) for line in _LINK.sub(lambda m: m.group(1), text).split("\n")
    )


def fallback_text(ans: Answer, limit: int = TEXT_LIMIT) -> str:
    """The message's `text`, for notifications and clients without blocks: escaped too."""
    text = " ".join(unlinked_urls(ans.text, source_urls(ans)).split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return plain(text)


def plain_pieces(ans: Answer, limit: int = TEXT_LIMIT) -> list[str]:
    """The answer and its sources as plain escaped text in pieces of at most `limit` characters:
    the last way to deliver it when a message with blocks is refused."""
    lines = [plain(unlinked_urls(ans.text, source_urls(ans))), ""] if ans.text else []
    for s in ans.sources:
        url = safe_url(s.url)
        ago = f" ({updated_ago(s.updated)})" if updated_ago(s.updated) else ""
        stale = f" (stale: {s.stale})" if s.stale else ""
        lines.append(escape(f"[{s.n}] {s.label}" + (f" {url}" if url else "") + ago + stale))
    return split_text("\n".join(lines), limit)
