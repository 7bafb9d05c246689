"""Answering a Slack question off Bolt's threads, and always delivering something.

Questions wait in a bounded queue for a small pool of answer workers, so a slow Claude or Voyage
never holds up Bolt's own threads: acks, feedback clicks and commands are handled at once.

Delivery never leaves a question hanging: the placeholder is updated with the answer; if Slack
refuses the update (too long, rate limited after retries, 5xx, ...) the answer is posted as new
messages, then as plain text in pieces, and at worst a short apology is posted.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

from router.answer import Answer
from router.question import QuestionError

from .slack_format import (
    StreamSanitizer,
    answer_messages,
    escape,
    fallback_text,
    footer_blocks,
    plain_pieces,
    same_words,
)
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

if TYPE_CHECKING:
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
# what a Web API call raises once the client's retries are spent: Slack's refusals and the network
SLACK_FAILURES = (SlackClientError, OSError)
# no previews under answers: a link in one (a source's) is for reading, not for Slack to fetch
NO_UNFURL = {"unfurl_links": False, "unfurl_media": False}
HISTORY_PAGES = 20  # conversations.replies pages read at most (200 messages each)
# Text gathered before each stream call: the first words go at once, then ~80 characters (about
# 0.3 s of Claude's text) or half a second's worth, whichever comes first, to spare rate limits.
STREAM_FIRST, STREAM_BUFFER, STREAM_SECONDS = 12, 80, 0.5


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
    ):
        """`guide`: fieldguide, whose `ask` answers and records, and whose scopes (resolved)
        choose what each channel searches."""
        self.guide = guide
        self.bot_user = bot_user
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

    def drain(self, deadline: float) -> int:
        """Go on answering what is queued and in flight until it is done or `deadline` (a
        time.monotonic()) passes; how many are left then (their claims stay open: the next
        process answers them, bot/slack/orphans.py)."""
        while self.queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.queue.unfinished_tasks

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
                self.queue.task_done()
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
                self.queue.task_done()  # `drain` counts what is queued or in flight

    # -- one question ----------------------------------------------------------------------------

    def examples(self, channel: str) -> list[str]:
        """Example questions from the intents a question in `channel` is routed among (its
        scope's, FIELDGUIDE_SCOPES): a greeting never suggests another team's questions."""
        scopes = self.guide.scopes
        scope = scopes.for_channel(channel) if scopes else None
        return example_questions(self.guide.engine.intents_for(scope))

    def answer(self, q: Question) -> None:
        talk = small_talk(q.text)
        if talk == "ack" and q.history_thread:
            talk = None  # a short follow-up ("tell me more") reads through the thread's turns
        if talk:  # "hi", "thanks", "ok": no question for the docs
            reply = {"greeting": greeting(self.examples(q.channel)), "thanks": THANKS_REPLY}
            self.deliver_text(q, None, reply.get(talk, ACK_REPLY))
            self._done(q)
            return
        # an event taken over from a dead replica answers in that replica's placeholder
        placeholder = q.extra.get("placeholder") or self._show_work(q)
        if placeholder and q.keys and not q.extra.get("placeholder"):
            self.guide.state.note_placeholder(q.keys, placeholder)
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
            "message_ts": placeholder,
            "keys": list(q.keys),
        }
        stream = Stream(self, q, placeholder) if self.streams(q) else None
        try:
            scopes = self.guide.scopes
            ans = self.guide.ask(
                q.text,
                history,
                context,
                on_text=stream.append if stream else None,
                scope=scopes.for_channel(q.channel) if scopes else None,
            )
        except QuestionError as e:
            self.deliver_text(q, stream.close() if stream else placeholder, escape(str(e)))
            self._done(q)
            return
        except Exception:  # the user gets a short message, the log gets the traceback
            log.exception("answer failed")
            self.deliver_text(q, stream.close() if stream else placeholder, SORRY)
            self._done(q)
            return
        if stream is not None and stream.finish(ans):
            return
        self.deliver(q, stream.close() if stream else placeholder, ans)

    def _done(self, q: Question) -> None:
        """No answer will be recorded for `q`: close its claim, so no replica answers it again."""
        if q.keys:
            self.guide.state.done_event(*q.keys)

    def streams(self, q: Question) -> bool:
        """Claude's answers are streamed into a thread; offline answers (written at once) and
        answers straight into a DM (the stream API replies in threads only) are posted whole."""
        return self.guide.anthropic is not None and q.reply_thread is not None

    def _show_work(self, q: Question) -> str | None:
        """The first sign of work: the assistant panel's status (a reply would clear it), else a
        placeholder message; the placeholder's ts, if one was posted."""
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

    def deliver_text(self, q: Question, placeholder: str | None, text: str) -> None:
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


class Stream:
    """One answer streamed into Slack (chat.startStream / appendStream / stopStream through
    slack_sdk's ChatStream), for the user who asked. Any Slack failure ends the streaming; the
    answer is then delivered whole, replacing what was streamed."""

    def __init__(self, answerer: Answerer, q: Question, placeholder: str | None):
        self.answerer, self.q, self.placeholder = answerer, q, placeholder
        self.clean = StreamSanitizer()
        self.broken = False
        self.pending, self.flushed = "", time.monotonic()
        self.streamer = q.client.chat_stream(  # buffering is done here, so every append is sent
            channel=q.channel,
            thread_ts=q.reply_thread or q.ts,
            recipient_team_id=q.team or None,
            recipient_user_id=q.user or None,
            buffer_size=1,
        )

    @property
    def ts(self) -> str | None:
        return self.streamer.ts

    def append(self, delta: str) -> None:
        """The pipeline's on_text: escaped, links held until resolved, then appended."""
        self.pending += self.clean.feed(delta)
        if self.broken or not self.pending:
            return
        started = self.ts is not None
        if not (
            len(self.pending) >= (STREAM_BUFFER if started else STREAM_FIRST)
            or time.monotonic() - self.flushed >= STREAM_SECONDS
        ):
            return
        text, self.pending, self.flushed = self.pending, "", time.monotonic()
        try:
            self.streamer.append(markdown_text=text)
        except SLACK_FAILURES as e:
            log.warning(
                "streaming into %s failed, the answer will be posted whole: %s", self.q.channel, e
            )
            self.broken = True
            return
        if not started and self.ts is not None:
            # the stream is the sign of work now: the placeholder above it goes
            self.answerer._drop(self.q, self.placeholder)
            self.placeholder = None

    def finish(self, ans: Answer) -> bool:
        """Stop the stream with the sources, decision and feedback; True when what was streamed
        is the answer (else the caller delivers it whole over the streamed message)."""
        if self.broken or not self.clean.raw:
            return False
        if not same_words(self.clean.raw, ans.text):
            log.info("the checked answer differs from what was streamed: replacing it")
            return False
        try:
            self.streamer.stop(
                markdown_text=(self.pending + self.clean.flush()) or None,
                blocks=footer_blocks(ans, ans.audit_id, with_caveat=True),
            )
        except SLACK_FAILURES as e:
            log.warning("could not stop the stream in %s: %s", self.q.channel, e)
            self.broken = True
            return False
        self.answerer._drop(self.q, self.placeholder)  # a short answer starts at the stop
        self.placeholder = None
        return True

    def close(self) -> str | None:
        """End the stream without an answer; the message to replace with what comes instead
        (the streamed one, else the placeholder)."""
        if self.ts is None:
            return self.placeholder
        if not self.broken:
            try:
                self.streamer.stop(markdown_text=(self.pending + self.clean.flush()) or None)
            except SLACK_FAILURES as e:
                log.warning("could not stop the stream in %s: %s", self.q.channel, e)
        self.answerer._drop(self.q, self.placeholder)
        return self.ts
