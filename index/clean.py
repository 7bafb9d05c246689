"""Text that cannot be used as it is: lone surrogates (invalid Unicode: a JSON "\\ud800", a
non-UTF-8 command-line argument), NUL (PostgreSQL text cannot hold it), control characters that
a terminal would obey (escape sequences: a question, a doc or a model's answer could move the
cursor, retitle the window, hide text) or that reorder what is shown (bidirectional overrides),
and the invisible characters a doc's title or heading can hide, join or reorder text with
(`display`, the one place a doc's display text is made safe for the CLI, Slack and MCP).
"""

from __future__ import annotations

import re
import unicodedata

SURROGATES = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"  # what a decoder puts for what it could not read
KEPT = "\n\t"  # line breaks and tabs are layout, not commands
# Unicode's explicit bidirectional formatting classes: embeddings, overrides, isolates and their
# ends (each is also a format character, category Cf)
BIDI_CONTROLS = frozenset({"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"})


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
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def unsafe(ch: str) -> bool:
    """A character a terminal would obey or that changes what is shown around it: a control
    character (category Cc: C0, DEL, C1) but a line break or tab, a format character (Cf:
    zero-width, bidirectional, tags), any explicit bidirectional control, a lone surrogate."""
    category = unicodedata.category(ch)
    if category in ("Cc", "Cf", "Cs"):
        return ch not in KEPT
    return unicodedata.bidirectional(ch) in BIDI_CONTROLS


# what may be unsafe: everything outside printable ASCII, line breaks and tabs (`unsafe` decides)
SUSPECT = re.compile(r"[^\x20-\x7e\n\t]")


def terminal_safe(text: str) -> str:
    """`text` with the characters a terminal would obey or that hide or reorder text (`unsafe`)
    written as visible escapes (ESC as \\x1b, a zero-width space as \\u200b), so printing it
    shows it and does nothing else."""
    return SUSPECT.sub(lambda m: _escaped(m.group()) if unsafe(m.group()) else m.group(), text)


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


JOINERS = "\u200c\u200d"  # zero-width non-joiner and joiner: how some scripts and emoji are written


def _shapes(ch: str) -> bool:
    """A character a joiner can shape with: a letter, mark or symbol outside ASCII (Arabic,
    Persian and Indic letters, emoji)."""
    return not ch.isascii() and unicodedata.category(ch)[0] in "LMS"


def display(text: str) -> str:
    """A doc's title, heading or label as shown to people (the CLI, Slack, MCP's fields): without
    the invisible characters that can hide, join or reorder what a reader sees, Unicode's format
    characters (category Cf: zero-width space, word joiner, bidirectional embeddings, overrides,
    isolates and marks, tag characters, soft hyphen, byte-order mark) and any character of an
    explicit bidirectional class; a zero-width joiner or non-joiner is kept between two letters,
    marks or symbols outside ASCII, where a script or an emoji sequence is written with it. Control
    characters and line or paragraph separators read as a space, runs of spaces as one; a lone
    surrogate is U+FFFD. The index keeps the text as written: quotes are checked against it."""
    if text.isprintable():  # no format, control or separator character but the space: as is
        return text
    out = []
    for i, ch in enumerate(text):
        category = unicodedata.category(ch)
        if category == "Cs":
            out.append(REPLACEMENT)
        elif category == "Cf" or unicodedata.bidirectional(ch) in BIDI_CONTROLS:
            joins = 0 < i < len(text) - 1 and _shapes(text[i - 1]) and _shapes(text[i + 1])
            if ch in JOINERS and joins:
                out.append(ch)
        elif category in ("Cc", "Zl", "Zp"):
            out.append(" ")
        else:
            out.append(ch)
    return " ".join("".join(out).split())
