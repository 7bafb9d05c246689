"""The Slack bot's rules as pure functions: which messages are answered, in which thread, and which
of a thread's messages are conversation history. No Slack calls here, so they are tested directly.
"""

from __future__ import annotations

import re
from html import unescape

from index.clean import valid_text
from router import talk

from ..asking import ACK_REPLY, GREETING, THANKS_REPLY

# User messages worth answering: plain ones, ones with a file attached, and thread replies also
# sent to the channel. Every other subtype is an edit, a deletion, a join, a bot, ...
USER_SUBTYPES = (None, "file_share", "thread_broadcast")

WORKING = ":mag: Looking through the docs…"
BUSY = (
    ":hourglass_flowing_sand: I'm answering a lot of questions right now; I'll answer in a moment."
)
# the bot's own messages that are not answers: never history
NOT_ANSWERS = (GREETING, WORKING, BUSY, THANKS_REPLY, ACK_REPLY)

# Small talk is no question for the docs (router/talk.py tells it by a principle): bot/asking.py
# gives it its reply, the same at every door. In a thread with earlier turns a short message takes
# its meaning from them ("tell me more", "and for the team plan"): there it is a follow-up,
# answered as a question, since leaving a request unanswered costs more than one extra answer to
# an "ok".

HISTORY_MESSAGES = 10  # thread messages used to understand a follow-up
HISTORY_CHARS = 1500  # of each


SLACK_MARKUP = re.compile(r"<([^<>|]*)(?:\|([^<>]*))?>")


def plain_text(text: str) -> str:
    """A message's text as its author typed it: Slack sends links as <https://x|label>, channels
    as <#C123|name>, mentions as <@U123> (left out: the bot's is how it was asked) and
    <!here>, and escapes &, < and > (Slack's "Formatting message text": retrieved messages)."""

    def typed(m: re.Match) -> str:
        target, label = m.group(1), m.group(2)
        if target.startswith("@"):  # a user
            return ""
        if target.startswith("#"):  # a channel
            return f"#{label}" if label else target
        if target.startswith("!"):  # <!here>, <!subteam^S1|@team>
            return label or f"@{target[1:].split('^')[0]}"
        return label or target.removeprefix("mailto:")

    # a lone surrogate (JSON can carry "\ud800") is no text: read as an unreadable character
    return valid_text(unescape(SLACK_MARKUP.sub(typed, text or ""))).strip()


def small_talk(text: str) -> str | None:
    """What small talk `text` (as Slack sends it) is: "greeting", "thanks", "ack" (no reply), or
    None: a question."""
    return talk.small_talk(plain_text(text))


# the context entities that name a channel (Slack's app_context_changed, app_home_opened)
CHANNEL_ENTITY = "slack#/types/channel_id"
MESSAGE_ENTITY = "slack#/types/message_context"  # value: {channel_id, message_ts}


def viewed_channel(context: object) -> str:
    """The channel a user is looking at, from an event's `context` (its entities ordered by
    relevance: the first that names a channel; a canvas or list names none): "" when none."""
    entities = context.get("entities") if isinstance(context, dict) else None
    for e in entities if isinstance(entities, list) else []:
        if not isinstance(e, dict):
            continue
        value = e.get("value")
        if e.get("type") == MESSAGE_ENTITY and isinstance(value, dict):
            value = value.get("channel_id")
        if e.get("type") in (CHANNEL_ENTITY, MESSAGE_ENTITY) and isinstance(value, str):
            return value
    return ""


def is_user_message(event: dict, bot_user: str) -> bool:
    """A message a person wrote (not an edit, a deletion, a bot, or ourselves), whatever the
    event's kind: a `message`, an `app_mention` (Slack sends those for bots' messages too, and
    again for an edit that adds the mention, marked `edited`), an assistant thread's message.
    Answering a bot could start two bots answering each other."""
    return (
        event.get("subtype") in USER_SUBTYPES
        and not event.get("bot_id")
        and not event.get("bot_profile")
        and not event.get("edited")
        and event.get("user") not in (None, "", bot_user)
    )


def message_kind(event: dict, bot_user: str, thread_answered: bool) -> str | None:
    """How a `message` event is answered: "dm", "follow_up", or None (not ours to answer).
    `thread_answered`: has the bot answered in the event's thread before."""
    if not is_user_message(event, bot_user):
        return None
    if event.get("channel_type") == "im":
        return "dm"
    if f"<@{bot_user}>" in event.get("text", ""):
        return None  # the app_mention event answers it
    if event.get("thread_ts") and thread_answered:
        return "follow_up"
    return None


def reply_thread(event: dict, in_thread: bool) -> str | None:
    """The thread the answer goes in: the event's own thread, else a new thread under the message
    when `in_thread` (channel mentions), else none (a DM answered in the conversation)."""
    return event.get("thread_ts") or (event["ts"] if in_thread else None)


def dedupe_keys(body: dict, event: dict) -> tuple[str, str]:
    """Slack's event id, and channel:ts: the same message delivered as app_mention and as message
    has two event ids but one ts."""
    return body.get("event_id", ""), f"{event.get('channel')}:{event.get('ts')}"


def is_chatter(message: dict, bot_user: str) -> bool:
    """One of the bot's own messages that is not an answer (the greeting, the placeholder, the
    busy note)."""
    from_bot = message.get("user") == bot_user or bool(message.get("bot_id"))
    text = unescape(message.get("text", "")).strip()
    return from_bot and (text in NOT_ANSWERS or text.startswith(GREETING))


def history_from(messages: list[dict], current_ts: str, bot_user: str) -> list[dict]:
    """A thread's messages (oldest first) → the latest turns before the current one, as
    {"role", "text"}: the current message, empty ones and the bot's chatter left out."""
    history = []
    for m in messages:
        if m.get("ts") == current_ts or not (m.get("text") or "").strip():
            continue
        if is_chatter(m, bot_user):
            continue
        role = "assistant" if m.get("user") == bot_user or m.get("bot_id") else "user"
        text = plain_text(m["text"])[:HISTORY_CHARS]
        history.append({"role": role, "text": text})
    return history[-HISTORY_MESSAGES:]


REINDEX_USAGE = (
    "Usage: `{cmd}` reindexes the docs folder (admins only); `{cmd} status` shows the last run;"
    " `{cmd} help` shows this."
)


def reindex_action(text: str) -> str:
    """What a /docs-reindex argument asks for: "run", "status" or "help" (anything unknown)."""
    arg = (text or "").strip().lower()
    if arg == "":
        return "run"
    if arg == "status":
        return "status"
    return "help"


def thread_title(question: str, limit: int = 60) -> str:
    """An assistant thread's title: the first question, on one line, cut at a word."""
    one_line = " ".join(plain_text(question).split())
    if len(one_line) <= limit:
        return one_line
    return one_line[:limit].rsplit(" ", 1)[0] + "…"
