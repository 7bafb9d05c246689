"""A clock a test moves by hand: `clock()` is the time, `clock.sleep(s)` moves it on by `s` at once.
Given to what takes a clock and a sleep (router/claude.py's Claude through a Pipeline's `timer`,
index/retries.py's policy, a stand-in's pace), it makes minutes of deadlines, backoffs and slow
streams pass in no real time, in the order they would."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx2


class FakeClock:
    def __init__(self, start: float = 1000.0):
        self.now = start
        self._lock = threading.Lock()
        self.slept: list[float] = []  # every sleep asked for, in order

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
            self.now += max(0.0, seconds)


class PacedStream(httpx2.SyncByteStream):
    """A response's server-sent events handed on one at a time, `clock` moved on by `per_word`
    seconds for each text delta as the client reads it: a stream at a model's pace on the
    client's side, in step with what the client has read, in no real time."""

    def __init__(self, inner: httpx2.SyncByteStream, clock: FakeClock, per_word: float):
        self.inner, self.clock, self.per_word = inner, clock, per_word

    def __iter__(self) -> Iterator[bytes]:
        pending = b""
        for chunk in self.inner:
            pending += chunk
            while b"\n\n" in pending:
                event, pending = pending.split(b"\n\n", 1)
                if b'"text_delta"' in event:
                    self.clock.sleep(self.per_word)
                yield event + b"\n\n"
        if pending:
            yield pending

    def close(self) -> None:
        self.inner.close()


class PacedTransport(httpx2.HTTPTransport):
    """The real HTTP transport, its event streams read at `words_per_second` on `clock`
    (PacedStream); for `anthropic.Anthropic(http_client=httpx2.Client(transport=...))`."""

    def __init__(self, clock: FakeClock, words_per_second: float):
        super().__init__()
        self.clock, self.per_word = clock, 1 / words_per_second

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        assert isinstance(response.stream, httpx2.SyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=PacedStream(response.stream, self.clock, self.per_word),
            extensions=response.extensions,
            request=request,
        )


class SilentTransport(httpx2.BaseTransport):
    """A service that takes every request and never answers. A streamed request (a question's
    answer) times out as the real transport's read would (httpx2.ReadTimeout) once its read
    timeout has passed on `clock`, in no real time; any other (a classification running beside
    the answer, on its own thread) is held until `release` is set, then times out: waits that
    overlap on a real clock would add up on one moved by hand. `requests` holds what was sent."""

    def __init__(self, clock: FakeClock, release: threading.Event):
        self.clock, self.release = clock, release
        self.requests: list[httpx2.Request] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if b'"stream":true' in request.content.replace(b" ", b""):
            self.clock.sleep(request.extensions["timeout"]["read"])
        else:
            self.release.wait(60)
        raise httpx2.ReadTimeout("timed out", request=request)
