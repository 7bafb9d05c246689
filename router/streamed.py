"""What of Claude's answer is shown while it is written (router/compose.py streams it): held until
it may be shown, with its [n] marks where the checked answer shows them, as far as words already
shown allow."""

from __future__ import annotations

from collections.abc import Callable

from .marks import ends_fence, fences

NOT_IN_DOCS = "NOT_IN_DOCS"


class Holdback:
    """Passes streamed text on once it may be shown: the first words are held until the answer
    has cited a passage (a citation that checks out arrived), and while the text could still be
    the bare NOT_IN_DOCS reply. So a user never sees a NOT_IN_DOCS that turns into "not in the
    docs", nor an answer that cites nothing.

    What is passed on carries the answer's [n] marks as router/marks.py places them, as far as
    words already shown allow: a text block's marks (`end`) go at the end of its
    words, its trailing whitespace held until then; after a code block or a table that ends it,
    on the line after, as a paragraph of their own; inside a code block still open, nowhere (the
    checked answer has them). A block that runs on from a closing fence on its line starts a
    paragraph (`block`)."""

    def __init__(self, on_text: Callable[[str], None] | None):
        self.on_text = on_text
        self.held = ""
        self.released = False
        self.cited = False
        self.shown = ""  # what was passed on
        self.tail = ""  # the trailing whitespace of what was passed on, not yet passed on
        self.fresh = False  # a text block began and none of its text came yet
        self.apart = False  # marks were put on a line of their own: what follows starts apart
        self.marks: dict[str, None] | None = None  # the text block's, while one is read

    def cite(self, source: int | None = None) -> None:
        """A citation checked out (of search result `source`, in the text block being read)."""
        self.cited = True
        if source is not None and self.marks is not None:
            self.marks[f"[{source}]"] = None
        self._release()

    def block(self, kind: str = "text") -> None:
        """A block of the reply begins (its `type`)."""
        if kind == "text":
            self.fresh, self.marks = True, {}

    def end(self) -> None:
        """A block ends: a text block's marks go where the module doc says."""
        run = "".join(self.marks or {})
        self.marks = None
        if not run or self.on_text is None:
            return
        if not self.released:
            words = self.held.rstrip()
            self.held = words + run + self.held[len(words) :] if words else self.held
            return
        if fences(self.shown) % 2:  # inside a code block still open
            return
        words = self.shown.rstrip()
        if ends_fence(words) or words.rsplit("\n", 1)[-1].lstrip().startswith("|"):
            self._send("\n" + run)
            self.tail, self.apart = "", True
        else:
            self._send(run)

    def __call__(self, piece: str) -> None:
        if self.on_text is None:
            return
        if self.released:
            self._pass(piece)
            return
        self.held += piece
        self._release()

    def _release(self) -> None:
        start = self.held.strip()
        if self.released or self.on_text is None or not self.cited or not start:
            return
        if NOT_IN_DOCS.startswith(start) or start.startswith(NOT_IN_DOCS):
            return
        self.released = True
        held, self.held = self.held.lstrip(), ""
        self._pass(held)

    def _pass(self, piece: str) -> None:
        if self.fresh and piece:
            self.fresh = False
            runs_on = not self.tail and not piece.startswith("\n") and ends_fence(self.shown)
            if self.apart or runs_on:
                lead = "\n" if piece.startswith("\n") else " \t"
                piece, self.tail = "\n\n" + piece.lstrip(lead), ""
        self.apart = False
        piece = self.tail + piece
        words = piece.rstrip()
        self.tail = piece[len(words) :]
        if words:
            self._send(words)

    def _send(self, text: str) -> None:
        assert self.on_text is not None
        self.shown += text
        self.on_text(text)
