"""Answering a Slack question off Bolt's threads, and always delivering something.

A question goes in as every door's does (bot/asking.py): small talk gets its reply, and a question
takes a place in the process's one line of questions (a user at most their share of it), told
when it must wait and turned away when there is no place. Each question is answered on a thread
of its own that waits for its turn, so a slow Claude or Voyage never holds up Bolt's own threads:
acks, feedback clicks and commands are handled at once.

An answer in a thread (every one: mentions, DMs, follow-ups) is streamed there showing its work
(stream.py): task updates at once, the words, the sources at the end. Delivery never leaves a
question hanging: when Slack refuses the stream, a placeholder says the bot is looking and is
updated with the whole answer; if Slack refuses the update (too long, rate limited after
retries, 5xx, ...) the answer is posted as new messages, then as plain text in pieces, and at
worst a short apology is posted.

A question asked in the app's DM is answered in the scope of the channel the user is looking at
beside it, when Slack said which (app_context_changed; State.viewing), else in the DM's own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient

from router.answer import Answer
from router.question import QuestionError

from ..asking import Busy, Place, Reply
from .slack_format import answer_messages, escape, fallback_text, plain_pieces
from .slack_rules import BUSY, WORKING, history_from, thread_title
from .stream import FAILURES, Stream

if TYPE_CHECKING:
    from router.engine import Scope

    from .guide import Guide

log = logging.getLogger(__name__)

SORRY = ":warning: Sorry, something went wrong while answering. Please try again in a minute."
UNDELIVERED = (
    ":warning: Sorry, I found an answer but Slack would not take it. Please ask again in a minute."
)
STATUS = "is looking through the docs…"
LOADING_MESSAGES = [
    "Looking through the docs…",
    "Reading the sections that match…",
    "Checking every quote against the docs…",
]
SLACK_FAILURES = FAILURES  # what a Web API call raises once the client's retries are spent
# no previews under answers: a link in one (a source's) is for reading, not for Slack to fetch
NO_UNFURL = {"unfurl_links": False, "unfurl_media": False}
HISTORY_PAGES = 20  # conversations.replies pages read at most (200 messages each)


@dataclass
class Question:
    """One question to answer, and where the answer goes."""

    client: WebClient
    channel: str
    ts: str  # the question's message
    user: str
    text: str
    reply_thread: str | None  # thread_ts for the answer (None: straight into the DM)
    history_thread: str | None  # the thread to read earlier turns from
    team: str = ""
    assistant: bool = False  # an assistant-panel thread: status instead of a placeholder
    keys: tuple[str, ...] = ()  # its claim (State.take_event), closed with the answer
    extra: dict[str, Any] = field(default_factory=dict)


class Answerer:
    """Each question of the line (bot/asking.py) answered on a thread of its own."""

    def __init__(self, guide: Guide, bot_user: str, task_updates: bool = True):
        """`guide`: fieldguide, whose `asking` lets questions in and whose `ask` answers and
        records, and whose scopes (resolved) choose what each channel searches. `task_updates`:
        show the work as the stream's task updates (else a placeholder says the bot is looking,
        and offline answers are posted whole: bench/slack_latency.py compares the two)."""
        self.guide = guide
        self.bot_user = bot_user
        self.task_updates = task_updates
        self.running: set[threading.Thread] = set()
        self._lock = threading.Lock()
        # answers recorded and not yet delivered: a stop waits for these
        self._delivering = 0
        self._stopping = False
        self._delivered = threading.Condition(self._lock)

    def submit(self, q: Question) -> None:
        """Start on `q` without blocking: small talk gets its reply; a question takes its place
        in the line, the user told when it has to wait, or when there is no place (then it is
        not answered)."""
        try:
            got = self.guide.asking.enter(
                q.text,
                f"slack:{q.team}:{q.user}",
                self.scope_for(q.user, q.channel),
                follow_up=bool(q.history_thread),
            )
        except Busy as e:
            log.warning("no place in the line for question %s/%s: %s", q.channel, q.ts, e)
            self._post(q, f":warning: {e}")
            self._done(q)
            return
        except Exception:  # the user gets a short message, the log gets the traceback
            log.exception("could not take question %s/%s", q.channel, q.ts)
            self._post(q, SORRY)
            self._done(q)
            return
        if isinstance(got, Reply):  # "hi", "thanks", "ok": no question for the docs
            reply = got
            self._start(q, None, lambda: self.deliver_text(q, None, reply.answer.text))
            return
        place = got
        if place.waits:
            self._post(q, BUSY)
        self._start(q, place, lambda: self.answer(q))

    def _start(self, q: Question, place: Place | None, work: Callable[[], None]) -> None:
        """`work` on a thread of its own, in `place`'s turn (small talk, `place` None, has
        nothing to wait for, and its claim is closed once replied to: nothing is recorded)."""

        def run() -> None:
            try:
                if place is None:
                    work()
                else:
                    with place:
                        work()
            except Exception:  # the thread ends with the question, whatever it raised
                log.exception("answering %s/%s failed", q.channel, q.ts)
            finally:
                if place is None:
                    self._done(q)
                with self._lock:
                    self.running.discard(thread)

        thread = threading.Thread(target=run, name=f"answer-{q.channel}-{q.ts}", daemon=True)
        with self._lock:
            self.running.add(thread)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: said, and the place freed
            with self._lock:
                self.running.discard(thread)
            if place is not None:
                place.leave()
            log.exception("could not start answering %s/%s", q.channel, q.ts)
            self._post(q, SORRY)
            self._done(q)

    def close(self, wait: float = 0.0) -> None:
        """The questions being answered waited for, up to `wait` seconds."""
        deadline = time.monotonic() + wait
        with self._lock:
            running = list(self.running)
        for t in running:
            t.join(max(0.0, deadline - time.monotonic()))

    def pending(self) -> int:
        """How many questions are being answered or wait for their place."""
        with self._lock:
            return len(self.running)

    def drain(self, deadline: float) -> int:
        """Go on answering what is in hand until it is done or `deadline` (a time.monotonic())
        passes; how many are left then (their claims stay open: the next process answers them,
        bot/slack/orphans.py). An answer already recorded is delivered first (else the next
        process would answer and record it again), for up to the Slack client's timeout; one not
        yet recorded stops before its record."""
        self.close(max(0.0, deadline - time.monotonic()))
        with self._delivered:
            self._stopping = True
            self._delivered.wait_for(lambda: not self._delivering, self.guide.settings.timeout)
            return len(self.running) - self._delivering

    def _recording(self) -> None:
        """Just before an answer's record: past the stop's deadline it goes no further (the
        process exits, the claim stays open); else it counts as delivering until
        `_delivery_done`, so that a stop does not answer it twice."""
        with self._delivered:
            while self._stopping:
                self._delivered.wait()
            self._delivering += 1

    def _delivery_done(self) -> None:
        with self._delivered:
            self._delivering -= 1
            self._delivered.notify_all()

    # -- one question ----------------------------------------------------------------------------

    def viewed(self, user: str, channel: str) -> str:
        """The channel whose scope a question of `user` in `channel` is answered in: in the app's
        DM, the channel the user is looking at beside it when Slack said which; else `channel`."""
        if channel.startswith("D"):
            return self.guide.state.viewing(user, channel) or channel
        return channel

    def scope_for(self, user: str, channel: str) -> Scope | None:
        """The scope (FIELDGUIDE_SCOPES) of a question of `user` in `channel` (None: everything)."""
        scopes = self.guide.scopes
        return scopes.for_channel(self.viewed(user, channel)) if scopes else None

    def examples(self, user: str, channel: str) -> list[str]:
        """Example questions from the intents a question of `user` in `channel` is routed among
        (its scope's): a greeting never suggests another team's questions."""
        return self.guide.asking.examples(self.scope_for(user, channel))

    def answer(self, q: Question) -> None:
        """Answer `q` (in its turn in the line) and deliver the answer, or say why not."""
        placeholder, stream, shown = self._begin(q)
        shown_in = placeholder or (stream.ts if stream else None)
        if q.keys and not q.extra.get("placeholder") and shown_in:
            self.guide.state.note_placeholder(q.keys, shown_in)
        history = self.history(q)
        if q.assistant and not history:
            self._call(
                q.client.assistant_threads_setTitle,
                q,
                "set the thread title",
                channel_id=q.channel,
                thread_ts=q.reply_thread,
                title=thread_title(q.text),
            )
        context = {
            "channel": q.channel,
            "user": q.user,
            "thread_ts": q.reply_thread or q.ts,
            "message_ts": shown_in,
        }
        try:
            ans = self.guide.ask(
                q.text,
                history,
                context,
                on_text=stream.append if stream else None,
                scope=self.scope_for(q.user, q.channel),
                on_progress=stream.progress if shown and stream else None,
                before_record=self._recording,
            )
        except QuestionError as e:
            self.deliver_text(q, placeholder, escape(str(e)), stream)
            self._done(q)
            return
        except Exception:  # the user gets a short message, the log gets the traceback
            log.exception("answer failed")
            self.deliver_text(q, placeholder, SORRY, stream)
            self._done(q)
            return
        try:
            if stream is None or not stream.finish(ans):
                self.deliver(q, stream.close() if stream else placeholder, ans)
        finally:
            self._delivery_done()
        # closed once the thread is told, not when the answer is recorded: a process killed in
        # between leaves the claim open, and the next start answers in the same message
        self._done(q)

    def _begin(self, q: Question) -> tuple[str | None, Stream | None, bool]:
        """The first sign of work: the stream's first task update, else a placeholder (or the
        assistant panel's status). (the placeholder, the stream, does the stream show the work)
        An event taken over from a dead replica is answered in that replica's placeholder."""
        placeholder = q.extra.get("placeholder")
        stream = Stream(q, placeholder, self._drop) if not placeholder and self.streams(q) else None
        shown = stream is not None and self.task_updates and stream.start()
        if not placeholder and not shown:
            placeholder = self._show_work(q)
            if stream is not None:  # it goes when the stream shows something
                stream.placeholder = placeholder
        return placeholder, stream, shown

    def _done(self, q: Question) -> None:
        """`q` is answered (or will not be): close its claim, so no replica answers it again."""
        if q.keys:
            self.guide.state.done_event(*q.keys)

    def streams(self, q: Question) -> bool:
        """Answers in a thread are streamed (the stream API replies in threads only); without
        task updates, only Claude's (offline answers are written at once)."""
        if q.reply_thread is None:
            return False
        return self.task_updates or self.guide.anthropic is not None

    def _show_work(self, q: Question) -> str | None:
        """The first sign of work when the stream is not: the assistant panel's status (a reply
        would clear it), else a placeholder message; the placeholder's ts, if one was posted."""
        if q.assistant:
            self._call(
                q.client.assistant_threads_setStatus,
                q,
                "set the status",
                channel_id=q.channel,
                thread_ts=q.reply_thread,
                status=STATUS,
                loading_messages=LOADING_MESSAGES,
            )
            return None
        resp = self._call(
            q.client.chat_postMessage,
            q,
            "post the placeholder",
            channel=q.channel,
            thread_ts=q.reply_thread,
            text=WORKING,
            **NO_UNFURL,  # the answer replaces it
        )
        return resp.get("ts") if resp is not None else None

    def history(self, q: Question) -> list[dict]:
        """The thread's latest turns before this question. conversations.replies pages oldest
        first, so it is read to the end (bounded) and the newest messages are kept."""
        if not q.history_thread:
            return []
        latest: deque[dict] = deque(maxlen=50)
        cursor = None
        try:
            for _ in range(HISTORY_PAGES):
                resp = q.client.conversations_replies(
                    channel=q.channel, ts=q.history_thread, limit=200, cursor=cursor
                )
                latest.extend(resp.get("messages", []))
                cursor = (resp.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    break
        except SLACK_FAILURES:  # without history the question is still answered as asked
            log.warning("could not read thread %s/%s", q.channel, q.history_thread, exc_info=True)
        return history_from(list(latest), q.ts, self.bot_user)

    # -- delivery --------------------------------------------------------------------------------

    def deliver(self, q: Question, placeholder: str | None, ans: Answer) -> None:
        """The answer, however Slack lets it through: the placeholder updated, else new messages
        with blocks, else plain text pieces, else an apology."""
        messages = answer_messages(ans, ans.audit_id)
        text = fallback_text(ans)
        if placeholder and self._update(q, placeholder, text, messages[0]):
            if self._post_all(q, [("(continued)", b) for b in messages[1:]]):
                return
        elif self._post_all(
            q, [(text if i == 0 else "(continued)", b) for i, b in enumerate(messages)]
        ):
            self._drop(q, placeholder)
            return
        if self._post_all(q, [(piece, None) for piece in plain_pieces(ans)]):
            self._drop(q, placeholder)
            return
        self.deliver_text(q, placeholder, UNDELIVERED)

    def deliver_text(
        self, q: Question, placeholder: str | None, text: str, stream: Stream | None = None
    ) -> None:
        """`text` in place of an answer: ending the stream, else over the placeholder, else
        posted."""
        if stream is not None:
            if stream.fail(text):
                return
            placeholder = stream.close() or placeholder
        if placeholder and self._update(q, placeholder, text, None):
            return
        if not self._post_all(q, [(text, None)]):
            log.error(
                "could not tell %s in %s anything: Slack refused every message", q.user, q.channel
            )
            if q.assistant:  # at least don't leave "is looking…" on forever
                self._call(
                    q.client.assistant_threads_setStatus,
                    q,
                    "clear the status",
                    channel_id=q.channel,
                    thread_ts=q.reply_thread,
                    status="",
                )

    def _update(self, q: Question, ts: str, text: str, blocks: list | None) -> bool:
        return (
            self._call(
                q.client.chat_update,
                q,
                "update the placeholder",
                channel=q.channel,
                ts=ts,
                text=text,
                blocks=blocks or [],
            )
            is not None
        )

    def _post_all(self, q: Question, messages: list[tuple[str, list | None]]) -> bool:
        for text, blocks in messages:
            extra = {"blocks": blocks} if blocks else {}
            resp = self._call(
                q.client.chat_postMessage,
                q,
                "post the answer",
                channel=q.channel,
                thread_ts=q.reply_thread,
                text=text,
                **NO_UNFURL,
                **extra,
            )
            if resp is None:
                return False
        return True

    def _drop(self, q: Question, placeholder: str | None) -> None:
        """The answer went out as a new message: remove the placeholder left above it."""
        if placeholder:
            self._call(
                q.client.chat_delete, q, "delete the placeholder", channel=q.channel, ts=placeholder
            )

    def _post(self, q: Question, text: str) -> None:
        self._call(
            q.client.chat_postMessage,
            q,
            "post a note",
            channel=q.channel,
            thread_ts=q.reply_thread,
            text=text,
        )

    @staticmethod
    def _call(method, q: Question, what: str, **kwargs):
        """A Web API call (the client retries 429, 5xx and connection errors); its response, or
        None when Slack still refused it."""
        try:
            return method(**kwargs)
        except SLACK_FAILURES as e:
            log.warning("could not %s in %s: %s", what, q.channel, e)
            return None
