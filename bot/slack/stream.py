"""One answer streamed into its thread for the user who asked (chat.startStream / appendStream /
stopStream through slack_sdk's ChatStream, with its chunk types), showing its work:

- task updates while the question path works (router.answer.Progress): "Searching the docs",
  "Reading: Title › Section" for each section read (the question's scope only: the path reads
  nothing else), with Claude "Checking each claim";
- the answer's words: Claude's as they are written, an offline answer's whole at the end;
- at the stop, the sources as URL source elements (the only place Slack shows them: a task's
  `sources`), numbered as the answer cites them, then the decision line and feedback buttons
  (the sources with no address stay listed in the text, where the reader finds them).

Once the stream has begun, what is appended is sent by a thread of the stream's own, in order:
the question path never waits on Slack to go on (to read Claude's next words, to quote offline).
Any Slack failure ends the streaming; the caller then delivers the answer whole (answers.py).
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackClientError
from slack_sdk.models.blocks.block_elements import UrlSourceElement
from slack_sdk.models.messages.chunk import Chunk, MarkdownTextChunk, TaskUpdateChunk

from router.answer import Answer, Progress, Source
from router.citations import updated_ago
from router.context import LOOKS

from .slack_format import (
    LABEL_LIMIT,
    MARKDOWN_LIMIT,
    StreamSanitizer,
    answer_text,
    escape,
    footer_blocks,
    safe_url,
    same_words,
    split_text,
)

if TYPE_CHECKING:
    from .answers import Question

log = logging.getLogger(__name__)

# what a Web API call raises once the client's retries are spent: Slack's refusals and the network
FAILURES = (SlackClientError, OSError)
# Text gathered before each stream call: the first words go at once, then ~80 characters (about
# 0.3 s of Claude's text) or half a second's worth, whichever comes first, to spare rate limits.
STREAM_FIRST, STREAM_BUFFER, STREAM_SECONDS = 12, 80, 0.5
# a task's texts as Slack takes them (its details and output are documented to 256 characters;
# titles are held to the same)
TASK_TEXT = 256
# task cards a stream shows at most: each is a block of the message, and a message holds 50 of
# them with the stop's blocks counted apart; room is left for the stop's sources card
MAX_TASKS = 40
# the tasks that may follow a reading: each second look's search and a section it reads, then
# the claim check
LATER = 2 * LOOKS + 1
TITLES = {
    "searching": "Searching the docs",
    "searching_again": "Searching again: {}",
    "reading": "Reading: {}",
    "checking": "Checking each claim",
}
SOURCES_TITLE = "Sources"


def _cut(text: str, limit: int = TASK_TEXT) -> str:
    """`text` from the docs on one line, escaped (nothing in it can mention or link, as in the
    answer's text), within `limit` characters (no entity cut in two)."""
    text = escape(" ".join(text.split()))
    if len(text) <= limit:
        return text
    return re.sub(r"&[a-z]{0,3}$", "", text[: limit - 1]) + "…"


def source_element(s: Source) -> UrlSourceElement | None:
    """`s` as a URL source element ("[n] Title › Section", its age), or None without a plain
    http(s) address (Slack's element needs one)."""
    url = safe_url(s.url)
    if url is None:
        return None
    ago = f" ({updated_ago(s.updated)})" if updated_ago(s.updated) else ""
    return UrlSourceElement(url=url, text=_cut(f"[{s.n}] {s.label}", LABEL_LIMIT) + ago)


class Stream:
    """The answer's stream (see the module). `drop(q, ts)` deletes the placeholder shown before
    the stream began, once the stream shows something of its own."""

    def __init__(
        self,
        q: Question,
        placeholder: str | None,
        drop: Callable[[Question, str | None], None],
    ):
        self.q, self.placeholder, self.drop = q, placeholder, drop
        self.clean = StreamSanitizer()
        self.broken = False
        self.pending, self.flushed = "", time.monotonic()
        self.worded = False  # have the answer's first words been sent
        self.open: dict[str, TaskUpdateChunk] = {}  # tasks in progress, by id
        self.shown: set[str] = set()  # kinds of work already shown ("searching", ...)
        self.tasks = 0  # task ids used
        self.lock = threading.RLock()  # the pipeline's text and progress may come from threads
        self.outbox: queue.Queue[list[Chunk] | None] | None = None  # sent by the sender thread
        self.sender: threading.Thread | None = None
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

    # -- what is sent ----------------------------------------------------------------------------

    def _send(self, chunks: list[Chunk]) -> bool:
        """Append `chunks`: the first call (which starts the stream) here, the others by the
        sender thread, in order; False once Slack refused."""
        if self.broken:
            return False
        if self.ts is None:
            return self._append(chunks)
        if self.outbox is None:
            self.outbox = queue.Queue()
            self.sender = threading.Thread(target=self._sender, name="stream", daemon=True)
            self.sender.start()
        self.outbox.put(chunks)
        return True

    def _sender(self) -> None:
        assert self.outbox is not None
        while (chunks := self.outbox.get()) is not None:
            if not self.broken:
                self._append(chunks)

    def _sent(self) -> bool:
        """Wait until what was appended is sent (before the stop); False when Slack refused."""
        if self.outbox is not None and self.sender is not None:
            self.outbox.put(None)
            self.sender.join()
            self.outbox = self.sender = None
        return not self.broken

    def _append(self, chunks: list[Chunk]) -> bool:
        started = self.ts is not None
        try:
            self.streamer.append(chunks=chunks)
        except FAILURES as e:
            log.warning("streaming into %s failed, the answer goes whole: %s", self.q.channel, e)
            self.broken = True
            return False
        if not started and self.ts is not None:
            # the stream is the sign of work now: the placeholder above it goes
            self.drop(self.q, self.placeholder)
            self.placeholder = None
        return True

    def _task(self, title: str) -> TaskUpdateChunk | None:
        if self.tasks >= MAX_TASKS:
            return None
        self.tasks += 1
        task = TaskUpdateChunk(id=f"task-{self.tasks}", title=_cut(title), status="in_progress")
        self.open[task.id] = task
        return task

    def _done(self, status: str = "complete") -> list[Chunk]:
        """The tasks in progress, now `status`."""
        chunks: list[Chunk] = [
            TaskUpdateChunk(id=t.id, title=t.title, status=status) for t in self.open.values()
        ]
        self.open.clear()
        return chunks

    # -- the question path's work, and its words --------------------------------------------------

    def start(self) -> bool:
        """The first sign of work: "Searching the docs" (True when Slack showed it)."""
        with self.lock:
            return self._work(Progress("searching"))

    def progress(self, p: Progress) -> None:
        """The pipeline's on_progress: a task for what it does now, the ones before done."""
        with self.lock:
            self._work(p)

    def _work(self, p: Progress) -> bool:
        if p.kind == "searching" and p.kind in self.shown:
            return not self.broken  # shown when the stream began
        if p.kind not in TITLES:
            return not self.broken
        self.shown.add(p.kind)
        chunks = self._done()
        title = TITLES[p.kind]
        titles = [title.format(label) for label in p.labels] if "{}" in title else [title]
        if len(titles) > 1:  # the sections read leave room for the tasks that may follow them
            titles = titles[: max(1, MAX_TASKS - self.tasks - LATER)]
        chunks += [t for t in (self._task(title) for title in titles) if t is not None]
        return bool(chunks) and self._send(chunks)

    def append(self, delta: str) -> None:
        """The pipeline's on_text: escaped, links held until resolved, then appended (the tasks
        before the words done with the first of them)."""
        with self.lock:
            self.pending += self.clean.feed(delta)
            if self.broken or not self.pending:
                return
            if not (
                len(self.pending) >= (STREAM_BUFFER if self.worded else STREAM_FIRST)
                or time.monotonic() - self.flushed >= STREAM_SECONDS
            ):
                return
            text, self.pending, self.flushed = self.pending, "", time.monotonic()
            self.worded = self._send([*self._done(), *self._text(text)])

    @staticmethod
    def _text(text: str) -> list[Chunk]:
        return [MarkdownTextChunk(text=piece) for piece in split_text(text, MARKDOWN_LIMIT)]

    # -- the end ---------------------------------------------------------------------------------

    def finish(self, ans: Answer) -> bool:
        """Stop the stream with the rest of the answer (all of it when nothing was streamed:
        offline, an abstention), its sources and its footer; True when the stream is the answer
        (else the caller delivers it whole over the streamed message)."""
        with self.lock:
            if not self._sent():
                return False
            streamed = bool(self.clean.raw)
            if streamed and not same_words(self.clean.raw, ans.text):
                log.info("the checked answer differs from what was streamed: replacing it")
                return False
            rest = self.pending + self.clean.flush() if streamed else answer_text(ans)
            self.pending = ""
            pieces = self._text(rest)
            # a long answer's words go before the stop, which takes one piece of them
            if any(not self._append([*self._done(), p]) for p in pieces[:-1]):
                return False
            elements = [(s, source_element(s)) for s in ans.sources]
            cited = [e for _, e in elements if e is not None]
            chunks: list[Chunk] = [*self._done(), *pieces[-1:]]
            if cited:
                self.tasks += 1
                chunks.append(
                    TaskUpdateChunk(
                        id=f"task-{self.tasks}",
                        title=SOURCES_TITLE,
                        status="complete",
                        sources=cited,
                    )
                )
            listed = [s for s, e in elements if e is None]  # no address: listed in the text
            return self._stop(chunks, footer_blocks(ans, ans.audit_id, listed, streamed))

    def fail(self, text: str) -> bool:
        """End the stream with `text` in place of an answer (the work shown ends in error);
        True when Slack took it."""
        with self.lock:
            if not self._sent() or self.ts is None:
                return False
            return self._stop([*self._done("error"), *self._text(text)], None)

    def close(self) -> str | None:
        """End the stream without an answer; the message to replace with what comes instead
        (the streamed one, else the placeholder)."""
        with self.lock:
            if self.ts is None:
                return self.placeholder
            if self._sent():
                rest = self.pending + self.clean.flush()
                self._stop([*self._done(), *(self._text(rest) if rest else [])], None)
            self.drop(self.q, self.placeholder)
            return self.ts

    def _stop(self, chunks: list[Chunk], blocks: list[dict] | None) -> bool:
        try:
            self.streamer.stop(chunks=chunks or None, blocks=blocks)
        except FAILURES as e:
            log.warning("could not stop the stream in %s: %s", self.q.channel, e)
            self.broken = True
            return False
        self.drop(self.q, self.placeholder)  # a stream that begins at its stop
        self.placeholder = None
        return True
