"""How one question is being answered, beside what its steps find (router/pipeline.py): its
Claude (deadline, retries, the steps that fell back), the trace the steps record in, the timer,
the answer's stream and the asker's progress hook (`Run`, set once per question)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from .answer import Progress, Trace
from .claude import Claude

log = logging.getLogger(__name__)


class Stream:
    """Claude's answer text on its way to the asker's `on_text`, and whether any was shown."""

    def __init__(self, on_text: Callable[[str], None] | None):
        self.on_text = on_text
        self.shown = False

    def __call__(self, piece: str) -> None:
        self.shown = True
        if self.on_text is not None:
            self.on_text(piece)

    def open(self) -> Callable[[str], None] | None:
        """Where the answer streams: nowhere without `on_text`, nor once words were shown (a
        second try's text replaces what was streamed)."""
        return self if self.on_text is not None and not self.shown else None


class Tell:
    """The asker's `on_progress`, told what the answer does; it never breaks the answer."""

    def __init__(self, on_progress: Callable[[Progress], None] | None):
        self.on_progress = on_progress

    def __call__(self, kind: str, labels: list[str] | None = None) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(Progress(kind, list(labels or [])))
        except Exception:  # the asker's hook: logged, and the answer goes on
            log.exception("on_progress(%s) failed; the answer goes on", kind)


class Laps:
    """Each step's time into `timings` (ms since the step before)."""

    def __init__(self, timings: dict):
        self.timings = timings
        self.clock = time.perf_counter()

    def __call__(self, step: str) -> None:
        now = time.perf_counter()
        self.timings[step] = round((now - self.clock) * 1000, 1)
        self.clock = now


@dataclass(frozen=True)
class Run:
    """How one question is being answered, set once: its Claude (deadline, retries, the steps
    that fell back), the trace the steps record in, the timer, the stream and the progress."""

    claude: Claude
    trace: Trace
    laps: Laps
    stream: Stream
    tell: Tell
