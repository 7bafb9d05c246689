"""A clock on which a test's waits take no real time: the question path's deadline
(router/clock.py) and the stand-ins' latencies (FakeClaude's `clock`) read the same one."""

from __future__ import annotations

import threading
import time

from router.clock import Clock

# the most a skipped wait still sleeps for real: enough for a reader on another thread (the
# client reading a stream the stand-in writes) to take in what was sent before the time moves on
YIELD = 0.005


def skipping() -> Clock:
    """Real time plus every wait skipped: `sleep(s)` moves the time on by `s` at once, for every
    thread that reads it (so one wait at a time: waits on two threads at once add up)."""
    skipped = [0.0]
    lock = threading.Lock()

    def monotonic() -> float:
        return time.monotonic() + skipped[0]

    def sleep(seconds: float) -> None:
        with lock:
            skipped[0] += max(seconds, 0.0)
        time.sleep(min(max(seconds, 0.0), YIELD))

    return Clock(monotonic, sleep)
