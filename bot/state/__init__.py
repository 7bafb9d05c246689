"""What outlives one answer: the audit trail, feedback, hand-offs, Slack event claims, rate limits,
the reindex lock and the channel each user is looking at beside the app, behind one declared
interface, `State`, split by capability (AuditTrail, EventClaims, RateLimits, ReindexLock,
Viewing): a caller that needs one names that one.

Implementations: `SqliteState` (sqlite.py, the default: tables in the index file, the rest in this
process through `InProcess`, memory.py) and `PostgresState` (postgres/, a fleet's replicas sharing
one PostgreSQL). What only a fleet does is declared here too, with what it means on one machine,
so no caller probes a State for what it can do: `fleet` says whether the state is shared;
`durable`, `take_orphans` and `note_placeholder` are the fleet's claim lease, answered trivially
by one process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .loop import Loop


class AuditTrail(Protocol):
    """Every answer with what led to it, its feedback and its hand-off."""

    def record_answer(self, ans: Any, context: dict) -> int | None:
        """Store an answer (a router.answer.Answer) with where it was asked (`context`: Slack
        channel, user, thread, its claim's keys); its id (None: not stored yet)."""
        ...

    def record_feedback(self, answer_id: int, user: str, value: str) -> None:
        """Last choice per user and answer wins."""
        ...

    def list_answers(
        self, since: str | None = None, decision: str | None = None, limit: int = 50
    ) -> list[dict]:
        """The recorded answers, newest first, each with its feedback and hand-off."""
        ...

    def usage_rows(self, since: str | None = None) -> Iterator[dict]:
        """Every answer since `since` as {"decision", "usage", "feedback"} (for `audit
        --stats`), read in batches."""
        ...

    def get_answer(self, answer_id: int) -> dict | None:
        """One audit row, as list_answers gives it; None when it is not (or no longer) there."""
        ...

    def thread_answered(self, channel: str, thread_ts: str) -> bool:
        """Has an answer been posted in this thread (so a reply there is a follow-up)?"""
        ...

    def claim_handoff(self, answer_id: int, user: str, owner: str, target: str) -> str | None:
        """Record that `user` handed answer `answer_id` to `owner` (posted to `target`), once per
        answer across every replica: None when this call recorded it, else the earlier target."""
        ...

    def release_handoff(self, answer_id: int) -> None:
        """Forget a hand-off whose message could not be posted, so it can be tried again."""
        ...


class EventClaims(Protocol):
    """Slack events claimed once, across every replica of a fleet."""

    # True when replicas share this state (PostgreSQL): an event is acknowledged only once its
    # claim is durable, and events a dead replica claimed are answered by another
    fleet: bool

    def claim_event(self, *keys: str, event: dict | None = None) -> bool:
        """True for the first claim of any of `keys` (Slack event id, channel:ts); a retry or a
        second delivery of the same event gets False. `event` (what is needed to answer it) is
        kept with the claim where another replica could answer it if this one dies."""
        ...

    def done_event(self, *keys: str) -> None:
        """The claimed event was handled without an answer being recorded (refused, failed):
        nobody is to answer it again."""
        ...

    def durable(self) -> bool:
        """Would a claim made now outlive this process (checked before Slack gets its ack)?
        Always on one machine, where no other replica would answer it anyway."""
        ...

    def note_placeholder(self, keys: tuple[str, ...], ts: str) -> None:
        """Keep the answer's placeholder message with its claim, for a replica that takes the
        event over to answer in (nothing to keep on one machine)."""
        ...

    def take_orphans(self, limit: int) -> list[dict]:
        """Up to `limit` events that a dead replica claimed and did not answer, now claimed here
        (none on one machine)."""
        ...


class RateLimits(Protocol):
    def allow_question(self, user: str, per_minute: int) -> bool:
        """Per-user rate limit over a sliding minute."""
        ...


class Viewing(Protocol):
    """The channel a user is looking at while the app is open beside it (Slack's
    app_context_changed, an assistant thread's context), per user and app DM: the scope the
    user's questions in that DM are answered in (bot/slack/answers.py)."""

    def note_viewing(self, user: str, channel: str, viewing: str) -> None:
        """`user`, in the app's DM `channel`, is looking at `viewing` ("": at no channel)."""
        ...

    def viewing(self, user: str, channel: str) -> str:
        """The channel `user` last looked at beside the DM `channel` ("" when none is known)."""
        ...


class ReindexLock(Protocol):
    def reindex_lock(self) -> AbstractContextManager[bool]:
        """A context manager yielding True when this caller holds the one reindex at a time."""
        ...

    def reindex_running(self) -> bool: ...


class OwnersLoop(Protocol):
    """The owners' loop: gap topics and their state, drafts, replays and once-only claims
    (bot/state/loop.py's statements; in this process's memory for InProcess)."""

    @property
    def loop(self) -> Loop: ...


class State(AuditTrail, EventClaims, RateLimits, ReindexLock, OwnersLoop, Viewing, Protocol):
    """Where a process keeps what outlives one answer (shared by replicas in a fleet): each
    capability above, and `close`."""

    def close(self) -> None:
        """Give back what it holds (a fleet's pool); nothing is used after."""
        ...
