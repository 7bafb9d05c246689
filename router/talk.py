"""Small talk: a message that asks the docs nothing ("thanks!", "hello", "bye"), told from a
question by a principle rather than a list of phrases: it asks nothing (no "?"), is short, and
every word of it that is not a function word is among the most frequent words of English
(wordfreq), so that it names nothing the docs could be about. Its kind (which short reply it gets)
is read from its words afterwards."""

from __future__ import annotations

import re

from index.search import STOPWORDS

from .words import zipf

# A message of more words than this is a question, whatever its words (a greeting, a thanks or a
# goodbye is a few words; the shortest questions of the sets are four to six).
SMALL_TALK_WORDS = 6
# Every content word of small talk is at least this frequent in English (wordfreq's zipf scale):
# fitted as just above the rarest content word of every short question (at most SMALL_TALK_WORDS
# words, "?" left out) of the eval and real-question sets, answerable and off-topic, so that none
# of them is small talk ("Who won the 2018 FIFA World Cup", 4.21); "hello" is 4.72, "bye" 4.39.
# bench/gaps.py refits it and counts what it reads as small talk.
TALK_ZIPF = 4.22
# a message that asks is a question however common its words ("how long is the grace period"):
# a "?" or English's interrogatives, a closed class of function words
INTERROGATIVES = frozenset(("what", "how", "why", "when", "where", "which", "who", "whom", "whose"))
# the reply's kind, read only once a message is small talk
THANKS = ("thank", "thx", "cheers", "appreciate")
GREETINGS = frozenset(
    ("hi", "hello", "hey", "hiya", "howdy", "morning", "afternoon", "evening", "help")
)
# (the replies, the same at every door, are bot/asking.py's)


def content_words(text: str) -> list[str] | None:
    """The message's words that are not function words, lowercased; None when it has more than
    SMALL_TALK_WORDS words."""
    bare = re.sub(r":[a-z0-9_+'-]+:", " ", text.lower())  # Slack's emoji codes, ":thumbsup:"
    words = re.findall(r"[^\W_]+", bare.replace("'", "").replace("’", ""))
    if len(words) > SMALL_TALK_WORDS:
        return None
    return [w for w in words if w not in STOPWORDS]


def says_nothing_to_look_up(text: str) -> bool:
    """True for small talk: nothing asked ("?"), and no content word rarer in English than
    TALK_ZIPF (a name, a number, a term); a message of no words at all (an emoji) too. A message
    of function words only ("what is it") is a question, too vague to answer; so is one with an
    interrogative ("how long is the grace period")."""
    text = text.strip()
    content = content_words(text)
    if not text or content is None:
        return False
    if not re.search(r"[^\W_]", re.sub(r":[a-z0-9_+'-]+:", " ", text)):
        return True  # an emoji, a "?" alone
    words = set(re.findall(r"[a-z]+", text.lower()))
    if "?" in text or words & INTERROGATIVES or not content:
        return False
    return all(w.isalpha() and zipf(w) >= TALK_ZIPF for w in content)


def small_talk(text: str) -> str | None:
    """What small talk `text` is: "thanks", "greeting", "ack" (anything else: "ok", "bye", an
    emoji), or None: a question."""
    if not says_nothing_to_look_up(text):
        return None
    content = content_words(text) or []
    if any(w.startswith(THANKS) for w in content):
        return "thanks"
    if any(w in GREETINGS for w in content):
        return "greeting"
    return "ack"
