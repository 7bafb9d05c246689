"""Where a question's path reads the time and waits: its deadline is computed and checked on a
`Clock` (router/claude.py `Claude`, router/compose.py `compose`), the real one unless the caller
gives its own (a test's, on which the Messages API stand-in plays its latencies)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Clock:
    """`monotonic()`: seconds, only ever growing; `sleep(seconds)`: a wait (a retry's backoff)."""

    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


REAL = Clock()
