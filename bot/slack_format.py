"""Answers as Slack messages: Markdown → mrkdwn, Block Kit limits, sources, context and feedback
buttons."""

from __future__ import annotations

import re

SECTION_LIMIT = 3000  # characters of text in a section block
BLOCKS_PER_MESSAGE = 50
FEEDBACK_ACTIONS = ("feedback_helpful", "feedback_not_helpful")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _inline(line: str) -> str:
    """Bold, italics, links and headings of one line of Markdown (outside code) in mrkdwn."""
    quote = re.match(r"^(\s*>\s?)", line)  # a blockquote marker stays a marker, not &gt;
    prefix, line = (quote.group(1), line[quote.end() :]) if quote else ("", line)
    parts = re.split(r"(`[^`]+`)", line)  # leave inline code alone
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(part)
            continue
        part = escape(part)
        part = re.sub(r"\[([^\]]+)\]\((https?://[^)\s]+)\)", r"<\2|\1>", part)
        part = re.sub(r"\*\*(.+?)\*\*|__(.+?)__", lambda m: f"*{m.group(1) or m.group(2)}*", part)
        out.append(part)
    line = "".join(out)
    if m := re.match(r"^\s{0,3}#{1,6}\s+(.*)$", line):
        line = f"*{m.group(1).strip()}*"
    elif m := re.match(r"^(\s*)[-*+]\s+(.*)$", line):
        line = f"{m.group(1)}• {m.group(2)}"
    return prefix + line


def to_mrkdwn(markdown: str) -> str:
    out, in_code = [], False
    for line in markdown.split("\n"):
        if line.strip().startswith("```"):
            out.append("```")  # mrkdwn has no language tags
            in_code = not in_code
            continue
        out.append(escape(line) if in_code else _inline(line))
    return "\n".join(out)


def split_text(text: str, limit: int = SECTION_LIMIT) -> list[str]:
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


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _link(url: str, label: str) -> str:
    label = escape(label)
    return (
        f"<{url}|{label}>"
        if url.startswith(("http://", "https://"))
        else f"{label} ({escape(url)})"
    )


def answer_blocks(ans, answer_id: int | None) -> list[list[dict]]:
    """The answer as one or more messages' blocks, each message within Block Kit's limits."""
    blocks = [section(p) for p in split_text(to_mrkdwn(ans.text))]
    if ans.sources:
        lines = [f"{s.n}. {_link(s.url, s.label)}" for s in ans.sources]
        blocks += [section(p) for p in split_text("*Sources*\n" + "\n".join(lines))]
    context = [f"intent: {ans.intents[0] if ans.intents else 'none'}"]
    if ans.offline:
        context.append("answered without Claude")
    if any("keyword search only" in n for n in ans.notes):
        context.append("keyword search only (embeddings unavailable)")
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": escape(" · ".join(context))[:2000]}],
        }
    )
    if answer_id is not None:
        blocks.append(
            {
                "type": "actions",
                "block_id": "feedback",
                "elements": [
                    {
                        "type": "button",
                        "action_id": FEEDBACK_ACTIONS[0],
                        "text": {"type": "plain_text", "text": "👍 Helpful"},
                        "value": str(answer_id),
                    },
                    {
                        "type": "button",
                        "action_id": FEEDBACK_ACTIONS[1],
                        "text": {"type": "plain_text", "text": "👎 Not helpful"},
                        "value": str(answer_id),
                    },
                ],
            }
        )
    return [blocks[i : i + BLOCKS_PER_MESSAGE] for i in range(0, len(blocks), BLOCKS_PER_MESSAGE)]


def fallback_text(ans, limit: int = 3000) -> str:
    """Plain text for notifications and clients that can't show blocks."""
    text = " ".join(ans.text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
