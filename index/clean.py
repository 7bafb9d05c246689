"""Text that cannot be used as it is: lone surrogates (invalid Unicode: a JSON "\\ud800", a
non-UTF-8 command-line argument), NUL (PostgreSQL text cannot hold it), and control characters that
a terminal would obey (escape sequences: a question, a doc or a model's answer could move the
cursor, retitle the window, hide text) or that reorder what is shown (bidirectional overrides).
"""

from __future__ import annotations

import re

SURROGATES = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"  # what a decoder puts for what it could not read
KEPT = "\n\t"  # line breaks and tabs are layout, not commands


def valid_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (as a decoder does for bad bytes)."""
    return SURROGATES.sub(REPLACEMENT, text)


def storable(text: str) -> str:
    """`text` as any store can hold it: valid Unicode, without NUL."""
    return valid_text(text).replace("\x00", "")


def storable_json(value):
    """A JSON-like value (dicts, lists, strings, ...) with every string, key included, storable."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable_json(k): storable_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(v) for v in value]
    return value


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# Unicode's control characters (category Cc: C0, DEL, C1), the bidirectional controls and lone
# surrogates, written out as ranges (tests/test_hostile.py checks them against unicodedata)
UNSAFE = re.compile(
    "["
    + "".join(
        re.escape(chr(c))
        for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
        if chr(c) not in KEPT
    )
    + "\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def terminal_safe(text: str) -> str:
    """`text` with the characters a terminal would obey written as visible escapes (ESC as
    \\x1b), so printing it shows it and does nothing else."""
    return UNSAFE.sub(lambda m: _escaped(m.group()), text)


class SafeTerminal:
    """A text stream that writes through `terminal_safe` (sys.stdout for human-readable output)."""

    def __init__(self, stream):
        self.stream = stream
        self.raw = stream  # for our own control output (a progress bar's redraws)

    def write(self, text: str) -> int:
        self.stream.write(terminal_safe(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)
