"""The logging of `fieldguide serve`, `mcp` and `ask`, one way: the level (FIELDGUIDE_LOG_LEVEL)
and the format (FIELDGUIDE_LOG_FORMAT): `text` lines for a person, or `json`, one object a line,
for a log collector (time, level, logger, message, and the traceback when there is one), always
on stderr (stdout is MCP's protocol over stdio). And a log that never repeats one kind of line
without bound (`Repeats`, `RepeatFilter`)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class Stderr(logging.StreamHandler):
    """A handler writing to `sys.stderr` as it is when a record is written, not as it was when
    the handler was made: the CLI wraps stderr for the terminal while a command runs, and a
    thread that logs after the command returned (a reconnecting pool) writes where a print
    would, not into a wrapper of a stream since closed."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def configure(level: str, form: str) -> None:
    """serve's log handler on the root logger, in place of one an earlier call added (handlers
    others installed, such as a test's capture, stay)."""
    unconfigure()
    root = logging.getLogger()
    handler = Stderr()
    handler.fieldguide = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT))
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)  # a library's warnings too, in the same format


@contextlib.contextmanager
def configured(level: str, form: str) -> Iterator[None]:
    """`configure` for the length of the block, then `unconfigure`."""
    configure(level, form)
    try:
        yield
    finally:
        unconfigure()


def unconfigure() -> None:
    """serve's log handler removed: it lives as long as serve does (a serve run inside another
    program, or a test, leaves the root logger as it found it)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "fieldguide", False)]:
        root.removeHandler(old)


def say(message: str) -> None:
    """A start-up line of `serve`: as written in text format (people and tests read it), and as a
    log record in JSON format, so a collector gets nothing but JSON."""
    if any(isinstance(h.formatter, JsonFormatter) for h in logging.getLogger().handlers):
        logging.getLogger("fieldguide").info(message.removeprefix("fieldguide: "))
    else:
        print(message, file=sys.stderr)


# -- a log that never repeats one thing without bound -------------------------------------------

REPEAT_SECONDS = 60.0  # one kind of line (per key) at most once in this long
REPEAT_KEYS = 10_000  # kinds remembered at most (the oldest forgotten first)


class Repeats:
    """How often each kind of log line was held back: `allow(key)` is the number of lines of that
    kind held back since the last one written when this one may be written (0: none), else None
    (held back: one was written less than `seconds` ago). Thread-safe; at most `keys` kinds kept."""

    def __init__(
        self,
        seconds: float = REPEAT_SECONDS,
        keys: int = REPEAT_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.seconds, self.keys = seconds, keys
        self.clock = clock
        self.seen: OrderedDict[object, list] = OrderedDict()  # key → [written at, held back]
        self.lock = threading.Lock()

    def allow(self, key: object) -> int | None:
        now = self.clock()
        with self.lock:
            entry = self.seen.get(key)
            if entry is not None and now - entry[0] < self.seconds:
                entry[1] += 1
                return None
            held = entry[1] if entry is not None else 0
            self.seen[key] = [now, 0]
            self.seen.move_to_end(key)
            while len(self.seen) > self.keys:
                self.seen.popitem(last=False)
            return held


class RepeatFilter(logging.Filter):
    """A logging filter: a record of the same logger, level and message template as one written
    less than REPEAT_SECONDS ago is dropped; the next one written says how many were."""

    def __init__(self, repeats: Repeats | None = None):
        super().__init__()
        self.repeats = repeats or Repeats()

    def filter(self, record: logging.LogRecord) -> bool:
        held = self.repeats.allow((record.name, record.levelno, str(record.msg)))
        if held is None:
            return False
        if held:
            record.msg = f"{record.msg} ({held:,} more like it held back)"
        return True


def hold_repeats(*loggers: str) -> None:
    """Each of `loggers` writes one kind of line at most once a minute (RepeatFilter)."""
    for name in loggers:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(RepeatFilter())
