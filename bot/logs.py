"""`fieldguide serve`'s logging: the level (FIELDGUIDE_LOG_LEVEL) and the format
(FIELDGUIDE_LOG_FORMAT): `text` lines for a person, or `json`, one object a line, for a log
collector (time, level, logger, message, and the traceback when there is one)."""

from __future__ import annotations

import json
import logging
import sys
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
