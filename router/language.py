"""The language of a question and of the docs (lingua, reliable on short text)."""

from __future__ import annotations

import threading
from functools import cache, lru_cache

from index.search import Searcher

from .words import LETTERS

# The local embedder reads English only: offline, a question in another language than the docs
# finds nothing, and the user is told so. lingua tells the language, reliable on short text; a
# question is foreign when lingua is sure of another language (CONFIDENT) and it has words enough
# to tell (MIN_WORDS): one slang word or typo can't make it Czech.
MIN_WORDS, CONFIDENT = 3, 0.9
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


@lru_cache(maxsize=4)
def docs_language(searcher: Searcher) -> str:
    """The language most of the docs are written in (a sample of the chunks; of a scope's
    chunks when `searcher` is a scope's view)."""
    every = range(searcher.size) if searcher.base is None else searcher.base.tolist()
    rows = list(every[:: max(1, len(every) // 40)])[:40]
    sample = "\n".join(r["text"][:300] for r in searcher.fetch(rows))
    return language_of(sample)[0] if sample.strip() else "en"


def docs_language_name(searcher: Searcher) -> str:
    return language_name(docs_language(searcher))


def foreign_language(question: str, searcher: Searcher) -> str | None:
    """The question's language when it is surely not the docs' language, else None."""
    if len(LETTERS.findall(question)) < MIN_WORDS:
        return None
    lang, confidence = language_of(question)
    return lang if lang != docs_language(searcher) and confidence >= CONFIDENT else None
