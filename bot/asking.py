"""How every door asks: Slack's answer workers (bot/slack/answers.py), `fieldguide ask` and the
Python API (bot/api.py), and MCP's `ask` (bot/mcp_server.py) all go through `Asking`, which
FieldGuide owns (`guide.asking`):

- small talk ("thanks", "hello", "ok": router/talk.py) gets its short reply, the same words at
  every door, and is neither searched nor recorded;
- a question takes a place in one line (`Line`): `workers` answered at once, at most `waiting`
  more waiting their turn, and each client (a Slack user, an MCP client, the CLI) at most its
  share of the places, so that no client holds the line; with no place the question is refused at
  once (`Busy`, whose message every door shows as it is), never queued without bound; a freed
  worker goes to the waiting question whose client has the fewest being answered, then to the
  first come;
- the answer is FieldGuide.ask's: the pipeline's, asked again on the new index generation when a
  reindex takes a chunk it found, and recorded in the audit trail.

A door that shows work while a question waits (Slack's placeholder) takes the two steps itself:
`enter` (small talk's reply, or a place), then, holding the place (`with place:` waits for its
turn), FieldGuide.ask. Everything else calls `ask`.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from index.store import IndexMissing
from router.answer import ABSTAIN, Answer
from router.talk import small_talk

if TYPE_CHECKING:
    from collections.abc import Callable

    from router.engine import Scope

    from .app import FieldGuide

# What small talk gets, at every door (the greeting adds example questions of the asker's scope)
GREETING = "Hi! Ask me about the docs: I answer from them only, with links to the sections I used."
THANKS_REPLY = "You're welcome!"
ACK_REPLY = "Ask me a question about the docs whenever you like."
# Why a question found no place (Busy's message, shown as it is by every door)
LINE_FULL = "Too many questions at once right now: please ask again in a minute."
SHARE_USED = (
    "You already have {n} questions being answered or waiting: ask again once one is answered."
)
GREETING_EXAMPLES = 2  # example questions in the greeting


class Busy(Exception):
    """No place for a question in the line: the message says why, fit to show the asker."""


def example_questions(intents: list[dict]) -> list[str]:
    """The first example question of each intent that has some (intents.yaml), at most 4."""
    return [i["examples"][0] for i in intents if i["examples"]][:4]


def greeting(examples: list[str]) -> str:
    """GREETING, with up to two example questions."""
    if not examples:
        return GREETING
    shown = examples[:GREETING_EXAMPLES]
    return f"{GREETING} For example: " + " or ".join(f"“{e}”" for e in shown)


def reply_to(talk: str, examples: list[str]) -> str:
    """What small talk of kind `talk` ("greeting", "thanks", "ack") gets."""
    if talk == "greeting":
        return greeting(examples)
    return THANKS_REPLY if talk == "thanks" else ACK_REPLY


# -- the line -------------------------------------------------------------------------------------

WAITING, ANSWERING, LEFT = "waiting", "answering", "left"


class Place:
    """A question's place in the line. `waits`: it had to wait when it was given. `with place:`
    waits for its turn and leaves the line at the end; `leave()` leaves it (once; again is
    nothing)."""

    def __init__(self, line: Line, client: str, seq: int, state: str):
        self.line, self.client, self.seq, self.state = line, client, seq, state
        self.waits = state == WAITING

    def __enter__(self) -> Place:
        self.line._turn(self)
        return self

    def __exit__(self, *_: object) -> None:
        self.leave()

    def leave(self) -> None:
        self.line._leave(self)


class Line:
    """The questions of one process: `workers` answered at once, at most `waiting` more waiting,
    each client at most `per_client` places (answered or waiting; 0: the workers and half the
    waiting places, so one client alone can keep every worker busy but never fill the line)."""

    def __init__(self, workers: int, waiting: int, per_client: int = 0):
        self.workers, self.waiting = max(1, workers), max(0, waiting)
        self.per_client = per_client or self.workers + math.ceil(self.waiting / 2)
        self.cond = threading.Condition()
        self.answering: Counter[str] = Counter()  # client → its questions being answered
        self.held: Counter[str] = Counter()  # client → its places (answered or waiting)
        self.queued: dict[Place, None] = {}  # the waiting places, first come first
        self.seq = itertools.count()

    def place(self, client: str) -> Place:
        """A place for a question of `client`: answered now or waiting its turn; Busy at once
        when the client has its share or the line is full."""
        with self.cond:
            free = self.answering.total() < self.workers and not self.queued
            if not free and len(self.queued) >= self.waiting:
                raise Busy(LINE_FULL)
            if self.held[client] >= self.per_client:
                raise Busy(SHARE_USED.format(n=self.held[client]))
            place = Place(self, client, next(self.seq), ANSWERING if free else WAITING)
            self.held[client] += 1
            if free:
                self.answering[client] += 1
            else:
                self.queued[place] = None
            return place

    def room(self) -> int:
        """Places left in the line (answered or waiting)."""
        with self.cond:
            return max(0, self.workers + self.waiting - self.held.total())

    def _next(self) -> Place | None:
        """The waiting place a freed worker goes to: its client has the fewest being answered,
        then it came first."""
        return min(self.queued, key=lambda p: (self.answering[p.client], p.seq), default=None)

    def _turn(self, place: Place) -> None:
        with self.cond:
            while place.state == WAITING:
                if self.answering.total() < self.workers and self._next() is place:
                    del self.queued[place]
                    place.state = ANSWERING
                    self.answering[place.client] += 1
                    self.cond.notify_all()  # a worker may still be free for the next one
                else:
                    self.cond.wait()

    def _leave(self, place: Place) -> None:
        with self.cond:
            if place.state == LEFT:
                return
            if place.state == ANSWERING:
                self.answering[place.client] -= 1
            else:
                del self.queued[place]
            self.held[place.client] -= 1
            for counts in (self.answering, self.held):
                if counts[place.client] <= 0:
                    del counts[place.client]
            place.state = LEFT
            self.cond.notify_all()


# -- every door's way in --------------------------------------------------------------------------


@dataclass
class Reply:
    """What a door shows: `answer` (recorded, with its audit_id), or, for small talk (`talk`:
    "greeting", "thanks" or "ack"), an ABSTAIN holding the short reply, neither searched nor
    recorded."""

    answer: Answer
    talk: str | None = None


class Asking:
    """Small talk, the line and the answer, the same for every door (the module doc)."""

    def __init__(self, guide: FieldGuide, line: Line):
        self.guide, self.line = guide, line

    def enter(
        self, question: str, client: str, scope: Scope | None = None, follow_up: bool = False
    ) -> Reply | Place:
        """Small talk's Reply, or a place in the line for the question (Busy when there is
        none). `follow_up`: asked in a conversation with earlier turns, where a short "ok, and
        for the team plan" takes its meaning from them: only a greeting or thanks is small talk
        there."""
        talk = small_talk(question)
        if talk == "ack" and follow_up:
            talk = None
        if talk:
            text = reply_to(talk, self.examples(scope) if talk == "greeting" else [])
            return Reply(Answer(question, question, ABSTAIN, text), talk)
        return self.line.place(client)

    def examples(self, scope: Scope | None) -> list[str]:
        """Example questions of the intents a question under `scope` is routed among (a
        greeting never suggests another team's); none without an index."""
        try:
            return example_questions(self.guide.engine.intents_for(scope))
        except IndexMissing:
            return []

    def ask(
        self,
        question: str,
        *,
        client: str,
        history: list[dict] | None = None,
        context: dict | None = None,
        on_text: Callable[[str], None] | None = None,
        scope: Scope | None = None,
    ) -> Reply:
        """`enter`, then the answer in its turn (FieldGuide.ask). Busy when there is no place;
        what FieldGuide.ask raises otherwise."""
        got = self.enter(question, client, scope, follow_up=bool(history))
        if isinstance(got, Reply):
            return got
        with got:
            return Reply(self.guide.ask(question, history, context, on_text=on_text, scope=scope))
