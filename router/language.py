"""The language of a question and of the docs (lingua, reliable on short text)."""

from __future__ import annotations

import re
import threading
from functools import cache

from index.search import Searcher

from .reading import Reading
from .words import DocsWords, zipf

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
    """The language most of the docs `searcher` searches are written in (a sample of the chunks;
    of a scope's chunks when `searcher` is a scope's view)."""
    every = range(searcher.size) if searcher.base is None else searcher.base.tolist()
    rows = list(every[:: max(1, len(every) // 40)])[:40]
    sample = "\n".join(r["text"][:300] for r in searcher.fetch(rows))
    return language_of(sample)[0] if sample.strip() else "en"


def own_words(question: Reading, docs: DocsWords | None = None) -> str:
    """The question's words that tell its language: its prose (without what the asker pasted or
    typed as code, paths, versions, values) less the names in it, which read alike in every
    language: the question's names, and the docs' words that are no English word ("duckdb",
    "kubectl")."""
    names = {w for p in question.names for w in p.split()}

    def name(w: str) -> bool:
        w = w.strip(".,:;!?\"'()")
        low = w.lower()
        return w in names or (docs is not None and zipf(low) == 0 and docs.knows(low))

    return " ".join(w for w in question.prose.split() if not name(w))


def foreign_language(question: Reading, docs: DocsWords, docs_lang: str) -> str | None:
    """The question's language when it is surely not the docs' (`docs_lang`), else None: the
    most likely other language's posterior, with the docs' language as the prior (DOCS_PRIOR,
    the rest shared alike by the other languages lingua knows), at least CONFIDENT."""
    text = own_words(question, docs)
    if len(WORDS.findall(text)) < MIN_WORDS:
        return None
    values = _detector().compute_language_confidence_values(text)
    likelihood = {v.language.iso_code_639_1.name.lower(): float(v.value) for v in values}
    others = [(c, lang) for lang, c in likelihood.items() if lang != docs_lang]
    if not others:
        return None
    c, lang = max(others)
    other_prior = (1 - DOCS_PRIOR) / max(1, len(likelihood) - 1)
    evidence = c * other_prior + likelihood.get(docs_lang, 0.0) * DOCS_PRIOR
    return lang if evidence and c * other_prior / evidence >= CONFIDENT else None
