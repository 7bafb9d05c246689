"""Words as the decision reads them: how rare a word is in English (wordfreq), its Snowball stem
(PyStemmer), whether the docs know it in any form, and what a typo stands for (symspellpy over the
docs' vocabulary, and the words English knows one edit away, read off wordfreq)."""

from __future__ import annotations

import re
import threading
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from index.search import BM25, MAX_WORD, STOPWORDS, Vocab, tokenize, zipf

if TYPE_CHECKING:
    from symspellpy import SymSpell

    from .reading import Reading

# a word is found inside one of the docs' identifiers ("crashlooping" in KubePodCrashLooping) when
# its stem has at least this many letters: a shorter stem ("pay", "run") is inside some identifier
# of any large corpus by chance. Chosen leave-one-set-out among 4-7 (bench/RESULTS.md, calibration)
ROOT_INSIDE = 6
# A word English knows is typed on purpose, never read as a typo ("git" is not "get", though the
# docs say "get" far more often): a word wordfreq counts at least this often (zipf scale). Fitted
# by bench/typos.py (KNOWN_QUANTILE): one edit (a swap of neighbours, a letter dropped) of every
# lowercase word of the dev sets' questions that makes no dictionary word (symspellpy's) is a
# typo; 99.5% of those typos lie below 3.05 on the zipf scale: a word at or above it is English's.
KNOWN_ZIPF = 3.05


@cache
def _stemmer():
    import Stemmer  # PyStemmer: Snowball's English stemmer

    return Stemmer.Stemmer("english")


def snowball(word: str) -> str:
    return str(_stemmer().stemWord(word))


def snowballs(words: list[str]) -> list[str]:
    """snowball() of each word, in one call to the stemmer."""
    return list(_stemmer().stemWords(words))


def english_neighbours(word: str) -> set[str]:
    """The words English knows (KNOWN_ZIPF) one edit from `word`: a letter dropped, swapped with
    its neighbour, replaced or added (Norvig's edits1), read off wordfreq's table, which the
    decision has loaded anyway: no English spelling dictionary is built per process."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    edits = {a + b[1:] for a, b in splits if b}
    edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    edits |= {a + c + b[1:] for a, b in splits if b for c in letters}
    edits |= {a + c + b for a, b in splits for c in letters}
    edits.discard(word)
    return {e for e in edits if zipf(e) >= KNOWN_ZIPF}


class Postings:
    """The postings of a scope's chunks only (`Searcher.within`): the terms they hold, each with
    the rows holding it, and `size` their number. What DocsWords reads of a scope, so that a
    scoped question's spelling, signals and messages know nothing of the docs outside it (a word
    of another team's docs is as unknown there as a word no doc holds)."""

    def __init__(self, bm25: BM25, rows: np.ndarray):
        inside = np.zeros(bm25.size, dtype=bool)
        inside[rows] = True
        keep = inside[bm25.postings_docs]
        seen = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
        per_term = seen[bm25.offsets[1:]] - seen[bm25.offsets[:-1]]
        terms = np.flatnonzero(per_term)
        self.size = int(rows.size)
        self.vocab = Vocab.of([bm25.vocab[int(t)].decode() for t in terms])  # still byte order
        self.postings_docs = bm25.postings_docs[keep]
        self.offsets = np.zeros(terms.size + 1, dtype=np.int64)
        np.cumsum(per_term[terms], out=self.offsets[1:])


class DocsWords:
    """What the docs' vocabulary knows: one index generation's, or a scope's part of it (built
    once for each by router/corpus.py's Corpus)."""

    def __init__(self, bm25: BM25 | Postings):
        words = [w for w in bm25.vocab.words() if len(w) <= MAX_WORD]
        self.bm25 = bm25
        self.words = words
        self.stems = set(_stemmer().stemWords([w for w in words if w.isalpha()]))
        # identifiers and compounds, searched for a word inside them ("kubepodcrashlooping")
        self.long = "\n".join(w for w in words if len(w) >= 8)
        self._spell: SymSpell | None = None
        self._spell_lock = threading.Lock()  # built once: a warm-up and a question wait for one

    @property
    def spell(self) -> SymSpell:
        """symspellpy over the docs' words, counted by the chunks holding them: built on the
        first word the docs don't know as it is (most questions have none)."""
        if self._spell is None:
            with self._spell_lock:
                if self._spell is None:
                    self._spell = self._speller()
        return self._spell

    def _speller(self) -> SymSpell:
        from symspellpy import SymSpell

        spell = SymSpell(max_dictionary_edit_distance=2, prefix_length=7)
        for w in self.words:
            if w.isalpha() and len(w) >= 2:
                spell.create_dictionary_entry(w, self.df(w))
        return spell

    def df(self, term: str) -> int:
        v = self.bm25.vocab.get(term)
        return 0 if v is None else int(self.bm25.offsets[v + 1] - self.bm25.offsets[v])

    def knows(self, word: str) -> bool:
        """The word in any form: an index term, a Snowball stem of one, inside an identifier of
        the docs, or written apart ("buckethost": "bucket host")."""
        w = word.lower()
        if len(w) > MAX_WORD:
            return False
        terms = tokenize(w)
        if terms and all(self.bm25.vocab.get(t) is not None for t in terms):
            return True
        if not w.isalpha():
            return False
        root = snowball(w)
        if root in self.stems or (len(root) >= ROOT_INSIDE and root in self.long):
            return True
        return self.apart(w) is not None

    def apart(self, word: str) -> str | None:
        """How the docs write `word` as two or more of their words, if they do."""
        if len(word) < 4 or len(word) > MAX_WORD:
            return None
        parts = self.spell.word_segmentation(word, max_edit_distance=0).corrected_string.split()
        if len(parts) > 1 and all(len(p) >= 2 and self.df(p) for p in parts):
            return " ".join(parts)
        return None

    def correction(self, word: str) -> str | None:
        """The word a typo stands for, by the noisy channel: among the docs' words within one edit
        (two from 8 letters, symspellpy) and the words English knows within one edit (wordfreq),
        first letter kept (a wrong first letter
        is the rarest misspelling), the likeliest, p(c) * EDIT**d, when it beats p(word) itself.
        p is a word's share of the docs' chunks or of English text (wordfreq), whichever is higher:
        "webhok" (never seen) is "webhook", "teh" (3.0 on the zipf scale) is "the" (7.7), while
        "xmas" or "things" stay."""
        from symspellpy import Verbosity

        if len(word) > MAX_WORD:
            return None
        reach = 1 if len(word) < 8 else 2
        found = [
            (s.term, s.distance)
            for s in self.spell.lookup(word, Verbosity.CLOSEST, max_edit_distance=reach)
        ]
        found += [(e, 1) for e in english_neighbours(word)]
        scored = [
            (self.p(term) * EDIT**distance, term)
            for term, distance in found
            if term[0] == word[0] and term != word and term.isalpha()
        ]
        best = max(scored, default=(0.0, ""))
        return best[1] if best[0] > self.p(word) else None

    def p(self, word: str) -> float:
        return max(10 ** (zipf(word) - 9) if zipf(word) else 0.0, self.df(word) / self.bm25.size)


# the noisy channel's chance of one given edit in a typed word (Kernighan, Church & Gale 1990 put
# single-edit typo probabilities around 1e-3 to 1e-4): a correction must be that much likelier
EDIT = 1e-3


# a lowercase word, or the question's first word capitalised ("Recieve webhooks?"); not the stem
# of a contraction or a possessive ("couldn't", "mise's": its ending is part of the word)
LOWER_WORD = re.compile(r"(?<![\w./])(?:^[A-Z])?[a-z]+(?![\w/'’]|\.\w)")
TYPO_NOTE = "read "  # how a typo note starts: the Slack context line shows those notes


def correct_typos(question: Reading, words: DocsWords) -> tuple[str, dict[str, str]]:
    """The question with its typos read as the words they stand for, and what was read as what.
    A word the docs or English know (KNOWN_ZIPF) is no typo; nor is a capitalised or code-like
    name, nor a word the question's prose does not use (the asker's pasted code and output are
    theirs, as written)."""
    names = {w.lower() for p in question.names for w in p.split()}
    prose = {m.group().lower() for m in LOWER_WORD.finditer(question.prose)}
    fixed: dict[str, str] = {}

    def fix(m: re.Match) -> str:
        w = m.group()
        low = w.lower()
        if len(low) < 3 or low in names or low not in prose or low in STOPWORDS:
            return w
        if zipf(low) >= KNOWN_ZIPF:
            return w
        if words.knows(low):
            return w
        right = words.apart(low) or words.correction(low)
        if not right:
            return w
        fixed[w] = right.capitalize() if w[0].isupper() else right
        return fixed[w]

    return LOWER_WORD.sub(fix, question.text), fixed


def typo_note(typos: dict[str, str]) -> str:
    return TYPO_NOTE + ", ".join(f'"{typo}" as "{word}"' for typo, word in typos.items())
