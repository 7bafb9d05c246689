"""Work that runs beside a question's answer and that nothing waits for (Claude's classification,
router/classify.py `beside`): on a few threads of its own, owned by the Pipeline and closed with
it. Its threads never hold the process: a `fieldguide ask` exits once its answer is printed,
whatever is still running here (the answer says what was not back)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger(__name__)


class Beside:
    def __init__(self, workers: int = 8, name: str = "beside"):
        """At most `workers` threads (started as work comes); more work waits its turn."""
        self.workers, self.name = workers, name
        self._work: queue.SimpleQueue[tuple[Future, Callable[[], Any]] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """`fn(*args)` on one of the threads; its Future. Once closed, a cancelled Future."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                future.cancel()
                return future
            self._work.put((future, lambda: fn(*args)))
            if self._idle:
                self._idle -= 1
            elif len(self._threads) < self.workers:
                n = len(self._threads) + 1
                thread = threading.Thread(target=self._run, name=f"{self.name}-{n}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def _run(self) -> None:
        while (item := self._work.get()) is not None:
            future, call = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except Exception as e:  # noqa: BLE001  # handed to whoever reads the Future
                    future.set_exception(e)
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """No more work: what has not started is cancelled, and the threads stop once their work
        is done. Not waited for."""
        with self._lock:
            self._closed = True
            threads = len(self._threads)
        while True:
            try:
                item = self._work.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in range(threads):
            self._work.put(None)
