"""Answering a Slack question off Bolt's threads, and always delivering something.

Questions wait in a bounded queue for a small pool of answer workers, so a slow Claude or Voyage
never holds up Bolt's own threads: acks, feedback clicks and commands are handled at once.

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
import queue
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient

from router.answer import Answer
from router.question import QuestionError

from .slack_format import answer_messages, escape, fallback_text, plain_pieces
from .slack_rules import (
    ACK_REPLY,
    BUSY,
    THANKS_REPLY,
    WORKING,
    example_questions,
    greeting,
    history_from,
    small_talk,
    thread_title,
)
from .stream import FAILURES, Stream

if TYPE_CHECKING:
    from router.engine import Scope

    from .guide import Guide

log = logging.getLogger(__name__)

SORRY = ":warning: Sorry, something went wrong while answering. Please try again in a minute."
FULL = ":warning: Too many questions at once right now: please ask again in a minute."
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
    keys: tuple[str, ...] = ()  # its claim (State.claim_event), closed with the answer
    extra: dict[str, Any] = field(default_factory=dict)


class Answerer:
    """A bounded queue of questions and `workers` threads answering them."""

    def __init__(
        self,
        guide: Guide,
        bot_user: str,
        workers: int = 4,
        queue_size: int = 20,
        task_updates: bool = True,
    ):
        """`guide`: fieldguide, whose `ask` answers and records, and whose scopes (resolved)
        choose what each channel searches. `task_updates`: show the work as the stream's task
        updates (else a placeholder says the bot is looking, and offline answers are posted
        whole, as before task updates: bench/slack_latency.py compares the two)."""
        self.guide = guide
        self.bot_user = bot_user
        self.task_updates = task_updates
        self.workers = workers
        self.queue: queue.Queue[Question | None] = queue.Queue(maxsize=queue_size)
        self._busy = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"answer-{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def submit(self, q: Question) -> None:
        """Queue `q` without blocking; tell the user when it has to wait, or when the queue is
        full (then it is not answered)."""
        with self._lock:
            waits = self._busy + self.queue.qsize() >= self.workers
        try:
            self.queue.put_nowait(q)
        except queue.Full:
            log.warning("answer queue full, question %s/%s refused", q.channel, q.ts)
            self._post(q, FULL)
            self._done(q)
            return
        if waits and not small_talk(q.text):  # "thanks" is not told to wait for its reply
            self._post(q, BUSY)

    def close(self) -> None:
        for _ in self._threads:
            try:
                self.queue.put_nowait(None)
            except queue.Full:
                break

    def _work(self) -> None:
        while True:
            q = self.queue.get()
            if q is None:
                return
            with self._lock:
                self._busy += 1
            try:
                self.answer(q)
            except Exception:  # a worker must outlive any one question
                log.exception("answering %s/%s failed", q.channel, q.ts)
            finally:
                with self._lock:
                    self._busy -= 1

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
        return example_questions(self.guide.engine.intents_for(self.scope_for(user, channel)))

    def answer(self, q: Question) -> None:
        talk = small_talk(q.text)
        if talk == "ack" and q.history_thread:
            talk = None  # a short follow-up ("tell me more") reads through the thread's turns
        if talk:  # "hi", "thanks", "ok": no question for the docs
            examples = self.examples(q.user, q.channel)
            reply = {"greeting": greeting(examples), "thanks": THANKS_REPLY}
            self.deliver_text(q, None, reply.get(talk, ACK_REPLY))
            self._done(q)
            return
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
            "keys": list(q.keys),
        }
        try:
            ans = self.guide.ask(
                q.text,
                history,
                context,
                on_text=stream.append if stream else None,
                scope=self.scope_for(q.user, q.channel),
                on_progress=stream.progress if shown and stream else None,
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
        if stream is not None and stream.finish(ans):
            return
        self.deliver(q, stream.close() if stream else placeholder, ans)

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
        """No answer will be recorded for `q`: close its claim, so no replica answers it again."""
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
