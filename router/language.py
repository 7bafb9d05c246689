"""The language of a question and of the docs (lingua, reliable on short text)."""

from __future__ import annotations

import re
import threading
from functools import cache

from index.search import Searcher

from .reading import read
from .words import DocsWords, docs_words, specific_phrases, zipf

# The local embedder reads English only: offline, a question in another language than the docs
# finds nothing, and the user is told so. lingua tells the language; it is read on the question's
# own words, without its names and what the asker pasted ("Is there a Terraform provider for
# Tidewater?" reads as Indonesian whole, as English without its two names), with words enough to
# tell (MIN_WORDS: one slang word or typo can't make it Czech), and with the docs' language as the
# prior: as likely as every other language together (DOCS_PRIOR), so that lingua's likelihoods
# must outweigh it before a question is another language (CONFIDENT).
# (chosen on the seven eval sets' 1,100 questions: with the names left out, a prior of 0.5 reads
# none of their English questions as another language and finds 9 of 9 foreign ones; 0.9 and 0.99
# miss "Quanto tempo dura un token di accesso?": bench/RESULTS.md, section calibration)
MIN_WORDS, CONFIDENT, DOCS_PRIOR = 3, 0.9, 0.5
# a word: a run of letters, or one character of a script written without spaces (CJK, kana)
UNSPACED = "\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff"
WORDS = re.compile(rf"[{UNSPACED}]|[^\W\d_{UNSPACED}]+")
FOREIGN_KEPT = 256  # questions whose language is kept per generation (asked twice each)
_lingua_lock = threading.Lock()


@cache
def _detector():
    from lingua import LanguageDetectorBuilder

    with _lingua_lock:
        return LanguageDetectorBuilder.from_all_spoken_languages().with_low_accuracy_mode().build()


def language_of(text: str) -> tuple[str, float]:
    """(ISO 639-1 code, confidence) of the most likely language."""
    values = _detector().compute_language_confidence_values(text)
    if not values:
        return "en", 0.0
    best = values[0]
    return best.language.iso_code_639_1.name.lower(), float(best.value)


def language_name(code: str) -> str:
    from lingua import IsoCode639_1, Language

    try:
        return Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())).name.title()
    except (AttributeError, ValueError):
        return code


def docs_language(searcher: Searcher) -> str:
    """The language most of the docs are written in (a sample of the chunks; of a scope's
    chunks when `searcher` is a scope's view), read once per generation (Searcher.memo)."""
    found = searcher.memo.get("docs_language")
    if found is None:
        every = range(searcher.size) if searcher.base is None else searcher.base.tolist()
        rows = list(every[:: max(1, len(every) // 40)])[:40]
        sample = "\n".join(r["text"][:300] for r in searcher.fetch(rows))
        found = searcher.memo["docs_language"] = language_of(sample)[0] if sample.strip() else "en"
    return found


def docs_language_name(searcher: Searcher) -> str:
    return language_name(docs_language(searcher))


def own_words(question: str, docs: DocsWords | None = None) -> str:
    """The question's words that tell its language: its prose (`reading.read`: without what the
    asker pasted or typed as code, paths, versions, values) less the names in it, which read alike
    in every language: the question's names, and the docs' words that are no English word
    ("duckdb", "kubectl")."""
    names = {w for p in specific_phrases(question) for w in p.split()}

    def name(w: str) -> bool:
        w = w.strip(".,:;!?\"'()")
        low = w.lower()
        return w in names or (docs is not None and zipf(low) == 0 and docs.knows(low))

    return " ".join(w for w in read(question).prose.split() if not name(w))


def foreign_language(question: str, searcher: Searcher) -> str | None:
    """The question's language when it is surely not the docs' language, else None (asked
    before the typos are read and again when deciding: the last FOREIGN_KEPT questions' are kept
    on the generation, Searcher.memo)."""
    kept: dict[str, str | None] = searcher.memo.setdefault("foreign_language", {})
    if question in kept:
        return kept[question]
    found = kept[question] = _foreign_language(question, searcher)
    while len(kept) > FOREIGN_KEPT:
        kept.pop(next(iter(kept)), None)
    return found


def _foreign_language(question: str, searcher: Searcher) -> str | None:
    """The most likely other language's posterior, with the docs' language as the prior
    (DOCS_PRIOR, the rest shared alike by the other languages lingua knows), at least
    CONFIDENT."""
    text = own_words(question, docs_words(searcher))
    if len(WORDS.findall(text)) < MIN_WORDS:
        return None
    docs = docs_language(searcher)
    values = _detector().compute_language_confidence_values(text)
    likelihood = {v.language.iso_code_639_1.name.lower(): float(v.value) for v in values}
    others = [(c, lang) for lang, c in likelihood.items() if lang != docs]
    if not others:
        return None
    c, lang = max(others)
    other_prior = (1 - DOCS_PRIOR) / max(1, len(likelihood) - 1)
    evidence = c * other_prior + likelihood.get(docs, 0.0) * DOCS_PRIOR
    return lang if evidence and c * other_prior / evidence >= CONFIDENT else None
