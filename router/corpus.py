"""The docs a question is read against: one index generation's, or a channel scope's part of one
(`Corpus`), with what a question's path derives from them. Each is made on first use, kept on the
Corpus and gone with it when a reindex loads a new generation (router/engine.py's `Loaded` holds
the generation's Corpus and its scopes'): the docs' words (their spelling, the decision's
vocabulary), the docs' language, the last questions' languages, and each section's rows."""

from __future__ import annotations

import threading

import numpy as np

from index.search import Searcher, zipf

from . import language
from .policy import Router
from .reading import Reading
from .words import DocsWords, Postings

FOREIGN_KEPT = 256  # questions whose language is kept (a question asks it up to twice)


class Corpus:
    def __init__(self, router: Router):
        """`router`: the generation's (or the scope's) Router; its searcher searches these docs
        (a scope's view searches only the scope's rows)."""
        self.router = router
        self.searcher: Searcher = router.searcher
        self._words: DocsWords | None = None
        self._language: str | None = None
        self._foreign: dict[str, str | None] = {}
        self._sections: tuple[np.ndarray, np.ndarray] | None = None
        self._pages: np.ndarray | None = None
        self._lock = threading.Lock()  # the words are built once: a warm-up and a question share

    @property
    def words(self) -> DocsWords:
        """What the docs' vocabulary knows: the whole index's, or only its scope's."""
        if self._words is None:
            with self._lock:
                if self._words is None:
                    bm25, base = self.searcher.bm25, self.searcher.base
                    self._words = DocsWords(bm25 if base is None else Postings(bm25, base))
        return self._words

    @property
    def language(self) -> str:
        """The docs' language (ISO 639-1), read from a sample of their chunks."""
        if self._language is None:
            self._language = language.docs_language(self.searcher)
        return self._language

    def foreign_language(self, question: Reading) -> str | None:
        """The question's language when it is surely not the docs' (router/language.py), kept for
        the last FOREIGN_KEPT questions."""
        with self._lock:
            if question.text in self._foreign:
                return self._foreign[question.text]
        found = language.foreign_language(question, self.words, self.language)
        with self._lock:
            self._foreign[question.text] = found
            while len(self._foreign) > FOREIGN_KEPT:
                self._foreign.pop(next(iter(self._foreign)))
        return found

    def section_rows(self, section: int) -> np.ndarray:
        """Every row of one section (a section lies in one doc, so a scope holds all of it or
        none), from the rows sorted by section once a generation."""
        if self._sections is None:
            order = np.argsort(self.searcher.sections, kind="stable")
            self._sections = order, np.asarray(self.searcher.sections)[order]
        order, ids = self._sections
        lo, hi = np.searchsorted(ids, section, "left"), np.searchsorted(ids, section, "right")
        return order[lo:hi]

    def section_chunks(self, section: int) -> list[dict]:
        """Every chunk record of one section."""
        return self.searcher.fetch(self.section_rows(section).tolist())

    @property
    def pages(self) -> np.ndarray:
        """Each row's page (doc) as a small integer, read once a generation."""
        if self._pages is None:
            with self._lock:
                if self._pages is None:
                    ids: dict[str, int] = {}
                    docs = self.searcher.docs()
                    self._pages = np.fromiter(
                        (ids.setdefault(d, len(ids)) for d in docs), np.int32, len(docs)
                    )
        return self._pages

    def prepare(self, spelling: bool = False) -> None:
        """Load what every question reads: the docs' words and English word frequencies
        (`spelling`: the spelling dictionary too, which most questions never need)."""
        words = self.words
        if spelling:
            words.spell  # noqa: B018
        zipf("the")  # wordfreq's English table
