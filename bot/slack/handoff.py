""" "Ask a person": an answer the docs did not settle (ABSTAIN, PARTIAL, or a 👎) handed to the
people who own those docs.

The owner is the first looked-at section's doc owner (front matter `owner`), else its intent's
(`intents.yaml`), else the owner of the answer's routed intents. A channel owner gets a message
in its channel with the question, a link to the thread and the sections the bot looked at; a user
or user-group owner is mentioned in the asker's thread instead. A question asked in a DM is sent
to a user owner by DM (no link: nobody else can open a DM); a user group cannot be, and the asker
is told where to ask. Each answer is handed off once,
whichever replica gets the click (`State.claim_handoff`); the row is the audit trail's record of
it, and the asker is told (ephemerally) where it went.
"""

from __future__ import annotations

import logging

from slack_sdk import WebClient

from bot.state import State
from index.loader import is_slack_owner
from index.store import owner_of

from .answers import SLACK_FAILURES
from .slack_format import escape

log = logging.getLogger(__name__)

SECTIONS_SHOWN = 5
NO_OWNER = (
    "Nobody owns these docs yet (no `owner` in their front matter or in intents.yaml),"
    " so I can't hand this on: ask in the team's channel."
)
NAMED_OWNER = (
    "These docs are owned by {owner}, who isn't reachable in Slack by a user, group or channel id:"
    " ask them directly, or in the team's channel."
)
GONE = "That answer is no longer in the audit trail, so I can't hand it on: ask me again."
GROUP_IN_DM = (
    "These docs are owned by {group}, a user group I can't bring into a direct message:"
    " ask in their channel, or mention them there."
)
FAILED = ":warning: I couldn't reach the owners just now: please try the button again in a minute."
# a channel owner the bot may not post in: it must be invited there (or have chat:write.public)
NOT_IN_CHANNEL = (
    ":warning: I can't post in {owner}, the owners' channel: someone there should invite me"
    " (`/invite @fieldguide`), then press the button again."
)
NOT_YOURS = (
    "Only the person who asked (or a fieldguide admin) can hand this question on: ask it"
    " yourself and press the button under your answer."
)


def may_hand_off(row: dict, user: str, admin: bool) -> bool:
    """Whether `user` may hand the answer `row` on: its asker, or an admin. Anyone else would send
    someone's question (a private one, from a DM) to its owners under their own name."""
    return admin or (bool(row.get("user")) and row.get("user") == user)


def owner_for(row: dict, owners: tuple[dict[str, str], dict[str, str]]) -> str:
    """The owner of what the answer looked at: its hits' docs in rank order, then its intents."""
    for hit in row.get("hits") or []:
        if found := owner_of(owners, hit.get("doc"), None):
            return found
    for intent in row.get("intents") or []:
        if found := owner_of(owners, None, intent):
            return found
    return ""


def mention(owner: str) -> str:
    """How Slack shows (and notifies) an owner: <@U…>, <!subteam^S…>, <#C…> or #name."""
    if owner[0] in "UW":
        return f"<@{owner}>"
    if owner[0] == "S":
        return f"<!subteam^{owner}>"
    return owner if owner.startswith("#") else f"<#{owner}>"


def sections(row: dict) -> list[str]:
    seen: list[str] = []
    for hit in row.get("hits") or []:
        name = f"{hit['doc']} › {hit['section']}" if hit.get("section") else hit["doc"]
        if name not in seen:
            seen.append(name)
    return seen[:SECTIONS_SHOWN]


def message(row: dict, asker: str, link: str) -> str:
    looked = "\n".join(f"• {escape(s)}" for s in sections(row)) or "• (none near)"
    why = {"ABSTAIN": "not in the docs", "PARTIAL": "only partly answered"}.get(
        row["decision"], "marked not helpful"
    )
    return (
        f"<@{asker}> asked a question the docs did not settle ({why}):\n"
        f"> {escape(' '.join(row['question'].split()))[:1500]}\n"
        f"{'<' + link + '|Open the thread>' if link else '(asked in a direct message)'}\n"
        f"*Sections the bot looked at*\n{looked}"
    )


def hand_off(
    client: WebClient,
    state: State,
    owners: tuple[dict[str, str], dict[str, str]],
    answer_id: int,
    user: str,
    admin: bool = False,
) -> str:
    """Hand answer `answer_id` to its owner for `user` (its asker, or an admin: `admin`), once;
    what to tell them. `owners`: the index's (FieldGuide.owners)."""
    row = state.get_answer(answer_id)
    if row is None:
        return GONE
    if not may_hand_off(row, user, admin):
        return NOT_YOURS
    owner = owner_for(row, owners)
    if not owner:
        return NO_OWNER
    if not is_slack_owner(owner):
        return NAMED_OWNER.format(owner=escape(owner))
    channel, thread = row["channel"] or "", row["thread_ts"]
    private = channel.startswith("D")  # a DM: nobody else can read it, or be mentioned in it
    if private and owner[0] == "S":
        return GROUP_IN_DM.format(group=mention(owner))
    # a person or group is asked in the asker's own thread; from a DM, a person gets a DM
    by_mention = owner[0] in "UWS" and not private
    target = f"{channel}/{thread}" if by_mention else owner
    earlier = state.claim_handoff(answer_id, user, owner, target)
    if earlier is not None:
        return f"This question was already handed on ({where(earlier, owner)})."
    try:
        link = ""
        if channel and thread and not private:
            link = client.chat_getPermalink(channel=channel, message_ts=thread).get("permalink", "")
        text = message(row, user, link)
        if by_mention:
            client.chat_postMessage(
                channel=channel, thread_ts=thread, text=f"{mention(owner)}: {text}"
            )
        else:
            posted = client.chat_postMessage(channel=owner, text=text, unfurl_links=False)
            # replies under it in the owners' channel are answers too (bot/slack/owners.py)
            state.loop.note_posted(
                answer_id, str(posted.get("channel") or owner), str(posted.get("ts"))
            )
    except SLACK_FAILURES as e:
        log.warning("could not hand answer %s to %s: %s", answer_id, owner, e)
        state.release_handoff(answer_id)  # nothing was posted: the button may be tried again
        response = getattr(e, "response", None)
        if not by_mention and response is not None and response.get("error") == "not_in_channel":
            return NOT_IN_CHANNEL.format(owner=mention(owner))
        return FAILED
    return f"Sent to {where(target, owner)}, with a link to this thread."


def where(target: str, owner: str) -> str:
    return f"{mention(owner)}, in this thread" if "/" in target else mention(owner)
