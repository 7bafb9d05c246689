"""Deciding from retrieval alone, before any model is asked, whether the docs can answer.

Two kinds of evidence. Closeness (the best chunk's cosine to the question, the share of the
question's idf weight the top chunks contain) says a section is *near* the question; a section
about a sibling product is near too. So the decision also reads the question's *specific terms*
(names, products, versions, flags: capitalised words, acronyms, code-like tokens) and asks whether
the docs know them at all: "Claude Opus 4", "Rancher", "budget_tokens" that occur nowhere in the
docs (as that sequence of words) mean the docs don't cover the question, however close its
nearest section sounds. A section that is merely near cannot fake a name it does not contain.
Nor can it fake the question's subject: when the match is loose, a word the docs seldom use and
the top chunks lack, carrying a good share of the question's weight ("the *memory* tool" answered
from a section on tools), means the section is near but about something else (topic_gaps).
"""

from __future__ import annotations

import bisect
import json
import re
import threading
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

from index.chunker import context_header
from index.search import BM25, STOPWORDS, Hit, Searcher, stem, tokenize

from .answer import ABSTAIN, ANSWER, PARTIAL, Answer

# Evidence thresholds, calibrated on shared/eval and examples/ (answerable questions) against
# off-topic questions (each set's offtopic.jsonl, bench/offtopic.jsonl and the examples' own): see
# bench/RESULTS.md, section answers-eval.
# `similarity` is the best chunk's cosine to the question (local all-MiniLM-L6-v2 scale: answerable
# questions scored >= 0.44, generic off-topic ones <= 0.31); `coverage` is the share of the
# question's idf weight found in the top chunks, a second opinion for questions whose words the
# docs never use.
ABSTAIN_SIMILARITY = 0.36
# few of its words and only a loose match: abstain too
ABSTAIN_COVERAGE, WEAK_SIMILARITY = 0.2, 0.45
PARTIAL_COVERAGE, PARTIAL_SIMILARITY = 0.3, 0.45
# Every word of the question in the top chunks (coverage >= FULL_COVERAGE): a cosine down to
# FULL_SIMILARITY is a short or plainly worded question ("what is idempotency key": 0.34, its
# section ranked first), not a distant one: PARTIAL instead of an abstention. On the dev sets every
# off-topic question that reaches this coverage names something the docs never mention (an
# abstention before closeness is read) or has a cosine >= 0.55.
FULL_COVERAGE, FULL_SIMILARITY = 0.95, 0.30
# The subject check (topic_gaps): a loose match (cosine < TOPIC_SIMILARITY) whose top 3 chunks lack
# words the docs seldom use (a word family in at most TOPIC_RARE of the chunks, or in one), when
# those words carry at least TOPIC_SHARE of the question's idf weight, abstains: the sections found
# are near the question but not about its subject ("the memory tool", "a monthly spend limit").
# Calibrated on the dev sets, answerable against off-topic questions (offline, local model):
# off-topic abstain 0.767 -> 0.900 (claude-docs), 0.867 -> 0.933 (openshift-4.15, 100 sampled),
# 1.000 (examples), answerable abstain 0.000 -> 0.010, 0.030 and 0.033 unchanged. The values sit at
# an edge: a share of 0.20 costs openshift 4 answerable questions ("purpose", "kept", "certain",
# everyday words the docs seldom use), a cosine of 0.65 costs claude-docs one more, a share of 0.30
# gains one off-topic question fewer on each.
TOPIC_RARE, TOPIC_SHARE, TOPIC_SIMILARITY = 0.01, 0.25, 0.6
# A top section whose title and headings carry at least HEADING_COVERAGE of the idf weight of a
# question of two words or more ("List available models" for "What models are available?") is
# about the question, however low the cosine of a short question (0.31 there, below
# ABSTAIN_SIMILARITY): the closeness thresholds don't stop it. On the dev sets the off-topic
# questions reach at most 0.49 of their weight in the top heading (answerable ones up to 1.0), so
# it changes none of their decisions.
HEADING_COVERAGE = 0.8
# With Claude, the gate before it only stops questions with nothing near at all: Claude's
# extraction (nothing_relevant) and answer (NOT_IN_DOCS) decide the rest.
CLAUDE_ABSTAIN_SIMILARITY = 0.25

WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./+#-]*")
PLAIN_WORD = re.compile(r"\b(?=[A-Za-z0-9_]*[A-Za-z]{3})[A-Za-z0-9_]+\b")
VERSION = re.compile(r"\d{1,2}(?:\.\d+)*")  # 4, 3.5, 4.15: joins a name (Opus 4), starts none
# a word in more than this share of the chunks is the docs' own vocabulary (Claude, API, cluster),
# not a name that singles out a topic: it is left out of a phrase
COMMON_SHARE = 0.1
# how many chunks containing all of a phrase's words are read to find the words side by side
PHRASE_CANDIDATES = 400


def specific_phrases(question: str) -> list[str]:
    """The question's names, versions and flags, as runs of consecutive specific words: a word with
    a capital after its first letter (OAuth, SCIM, GPT-4), a capitalised word that does not start
    the question (Rancher, Opus), a code-like word (budget_tokens, v1/messages), and a short
    version number right after one of those ("Opus 4"). "Opus 4" is one run: the docs must know
    the words together."""
    runs: list[list[str]] = []
    prev_end = -1
    for i, m in enumerate(WORD.finditer(question)):
        w = m.group().rstrip(".-/")
        version = bool(VERSION.fullmatch(w))
        code = not version and bool(re.search(r"_|[a-z][A-Z]|[A-Za-z][./][A-Za-z]|[A-Za-z]-?\d", w))
        cap = any(c.isupper() for c in w[1:]) or (w[:1].isupper() and i > 0 and w != "I")
        joins = bool(runs) and prev_end >= 0 and question[prev_end : m.start()] == " "
        if not (code or cap or (version and joins)) or not tokenize(w):
            prev_end = -1
            continue
        if joins:
            runs[-1].append(w)
        else:
            runs.append([w])
        prev_end = m.end()
    return [" ".join(r) for r in runs]


# The asker's own values pasted into a question ("pod my-app-7d9fb-x2x is stuck",
# "https://hooks.acme.io/tw never gets events", "event evt_8f3k2"): no docs name them, so they are
# no name the docs lack, no missing subject and no unseen term of the question's coverage.
URL_OR_EMAIL = re.compile(r"[a-z][a-z0-9+.-]*://\S+|[^@\s]+@[^@\s]+\.[a-z]{2,}", re.I)
IP_ADDRESS = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?:/\d+)?")
# a host name of 3+ labels ending in a usual top-level label (not a module path, "tidewater.errors")
HOST = re.compile(
    r"[a-z0-9-]+(?:\.[a-z0-9-]+)+\.(?:com|net|org|io|dev|app|cloud|ai|co|us|eu|uk|de|local"
    r"|internal|lan|corp|home|example|test|svc)(?::\d+)?(?:/\S*)?",
    re.I,
)
TOKEN_EDGES = "\"'`()[]{}<>,;:!?."


def own_value(word: str) -> bool:
    """Whether a whitespace-separated word is the asker's own value rather than a name: a URL, an
    email or IP address, a host name of three or more labels (worker-2.acme.local), or an ID with
    a random-looking part (a piece of 4+ characters that switches between letters and digits 3+
    times: 7d9fb, 2Zt8KxR4; not x509, sha256, rhel8, 20241022)."""
    w = word.strip(TOKEN_EDGES)
    if URL_OR_EMAIL.fullmatch(w) or IP_ADDRESS.fullmatch(w) or HOST.fullmatch(w):
        return True
    return any(
        len(piece) >= 4 and len(re.findall(r"[A-Za-z]+|\d+", piece)) >= 4
        for piece in re.split(r"[-_./:=]", w)
    )


# what the asker pasted from a terminal or a log: a fenced block, an indented line after the
# first, a stack trace's header and frames (Python's 'File "...", line 42', JavaScript's
# "at f (file.js:88:11)")
PASTED = re.compile(
    r"```[^`]*```|\n(?:\t| {2,})[^\n]*|^Traceback \(most recent call last\):"
    r"|^\s*File \"[^\"]*\", line \d+[^\n]*|\bat [\w.$<>]+ \([^()\s]*:\d+:\d+\)",
    re.M,
)


def without_own_values(question: str) -> str:
    """The question without what the asker pasted (PASTED) and their own values (own_value): the
    names in a stack trace are theirs ("srv/app/handlers.py", "sig"), not the docs'. A question
    that is nothing else is read whole."""
    asked = " ".join(w for w in PASTED.sub(" ", question).split() if not own_value(w))
    return asked or question


def _rows_with(terms: list[str], bm25: BM25) -> np.ndarray | None:
    """Rows that contain every term (None when a term is unknown to the index)."""
    rows = None
    for t in dict.fromkeys(terms):
        v = bm25.vocab.get(t)
        if v is None:
            return None
        docs = bm25.postings_docs[bm25.offsets[v] : bm25.offsets[v + 1]]
        rows = docs if rows is None else np.intersect1d(rows, docs, assume_unique=True)
        if rows.size == 0:
            return rows
    return rows


def _common(term: str, bm25: BM25) -> bool:
    v = bm25.vocab.get(term)
    if v is None:
        return False
    return int(bm25.offsets[v + 1] - bm25.offsets[v]) > COMMON_SHARE * bm25.size


def known_phrase(phrase: str, searcher: Searcher) -> bool:
    """Whether the docs contain the phrase somewhere in the whole index: its words side by side
    (stopwords skipped, plurals folded, the docs' everyday words left out), and a code-like word
    (budget_tokens, claude.ai) letter for letter."""
    # a version number is kept even when common ("4" of "Opus 4"): the name and its version must
    # stand together in the docs
    versions = {t for w in phrase.split() if VERSION.fullmatch(w) for t in tokenize(w)}
    terms = [t for t in tokenize(phrase) if t in versions or not _common(t, searcher.bm25)]
    if not terms:
        return True
    rows = _rows_with(terms, searcher.bm25)
    if rows is None or rows.size == 0:
        return False
    literals = [w.lower() for w in phrase.split() if "_" in w]
    if len(terms) == 1 and not literals:
        return True
    n = len(terms)
    for rec in searcher.fetch([int(r) for r in rows[:PHRASE_CANDIDATES]]):
        if literals and not all(w in rec["search_text"].lower() for w in literals):
            continue
        # the phrase's words in this order, the docs' everyday words allowed in between
        toks = [
            t
            for t in tokenize(rec["search_text"])
            if t in versions or not _common(t, searcher.bm25)
        ]
        if any(toks[i : i + n] == terms for i in range(len(toks) - n + 1)):
            return True
    return False


def unknown_terms(
    question: str, searcher: Searcher, english: frozenset[str] = frozenset()
) -> list[str]:
    """The question's specific terms that the docs never mention: its names (specific_phrases),
    and its words that are neither in the docs (in any form: "hallucinating" is known when the
    docs say "hallucinations", word_family) nor everyday English (`english`), such as "ztunnel",
    "doctl", "rerank": a lowercase name is a name too."""
    out = [
        p
        for p in specific_phrases(question)
        if not known_phrase(p, searcher) and (" " in p or not spelt_apart(p.lower(), searcher))
    ]
    if not english:
        return out
    named = {t for p in out for t in tokenize(p)}
    for w in dict.fromkeys(PLAIN_WORD.findall(question)):
        terms = tokenize(w)
        if everyday(w, english) or not terms or named.intersection(terms):
            continue
        if all(searcher.bm25.vocab.get(t) is None for t in terms) and not (
            word_family(w.lower(), searcher.bm25) or spelt_apart(w.lower(), searcher)
        ):
            out.append(w)
    return out


def spelt_apart(word: str, searcher: Searcher) -> str | None:
    """How the docs write `word` when they write it as two words or with a hyphen ("wifi": "wi
    fi" of Wi-Fi, "addon": "add on"): two pieces of it side by side somewhere in the index."""
    vocab = searcher.bm25.vocab
    for i in range(2, len(word) - 1):
        head, rest = word[:i], word[i:]
        if vocab.get(head) is None or vocab.get(stem(rest)) is None:
            continue
        if known_phrase(f"{head} {rest}", searcher):
            return f"{head} {rest}"
    return None


SUFFIXES = ("ing", "ed", "es", "s", "ly", "er", "ers")
ES_BASES = ("s", "x", "z", "ch", "sh", "o")  # the words whose plural adds "es"
# contractions typed without their apostrophe ("cant find my api key"), which the vocabulary lacks
CONTRACTIONS = frozenset(
    ("cant", "wont", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "hasnt",
     "havent", "hadnt", "shouldnt", "couldnt", "wouldnt", "mustnt", "neednt", "aint", "ive",
     "youve", "weve", "theyve", "youre", "theyre", "hes", "shes", "itll", "youll", "theyll",
     "whats", "thats", "theres", "heres", "hows", "wheres", "whos", "im")
)  # fmt: skip
# the shorthand of a team's chat ("what's the diff between", "which config", "pls"), which the
# vocabulary lacks too: everyday words, not names the docs never mention
CHAT_WORDS = frozenset(
    ("diff", "diffs", "config", "configs", "repo", "repos", "env", "envs", "lib", "libs", "param",
     "params", "arg", "args", "msg", "msgs", "req", "reqs", "resp", "admin", "admins", "auth",
     "prod", "infra", "pls", "plz", "btw", "fyi", "asap", "idk", "iirc", "afaik", "tbh", "imo",
     "tldr", "lemme", "dunno", "cuz", "coz", "thx")
)  # fmt: skip


# what kind of help a question asks for ("hdmi arc setup", "webhook tutorial"): everyday words,
# and never the question's subject (topic_gaps)
TASK_WORDS = frozenset(
    ("setup", "setups", "install", "installation", "configure", "configuration", "usage",
     "tutorial", "tutorials", "guide", "guides", "howto", "instructions", "steps", "example",
     "examples", "walkthrough", "overview", "explanation")
)  # fmt: skip


def everyday(word: str, english: frozenset[str]) -> bool:
    """Whether `word` is an everyday English word or an inflection of one (the vocabulary lists
    "pad" but not "padding", "rotate" but not "rotated", "block" but not "unblock" or
    "disconnect")."""
    w = word.lower()
    if w in english or (w.startswith("un") and everyday(w[2:], english)):  # unblock
        return True
    # disconnecting; not discord: "cord" is too short to tell a prefix from a name
    if w.startswith("dis") and len(w) >= 8 and everyday(w[3:], english):
        return True
    if english and (w in CONTRACTIONS or w in CHAT_WORDS or w in TASK_WORDS):
        return True
    if w.endswith(("ably", "ibly")) and w[:-1] + "e" in english:  # reliably: reliable
        return True
    for suffix in SUFFIXES:
        base = w[: -len(suffix)]
        if suffix == "es" and not base.endswith(ES_BASES):  # "browes" is no plural of "brow"
            continue
        # rotat(ed) + e, padd(ing) undoubled
        undoubled = base[:-1] if len(base) > 1 and base[-1] == base[-2] else base
        if w.endswith(suffix) and len(base) >= 3 and {base, base + "e", undoubled} & english:
            return True
    return False


# Typos. A misspelt word ("recieve", "webhok", "shedule") is in neither the docs nor everyday
# English, so it read as a name the docs never mention and the question was refused. A lowercase
# word of TYPO_MIN_LETTERS or more (alone or part of a hyphenated word, not of a path, file name or
# code) that one edit inside it (two neighbouring letters swapped, a letter dropped, changed or
# added; its first and last letters kept in place) turns into a word of the docs is read as that
# word; so is one that a swap of two neighbouring letters turns into an everyday English word
# ("hpapens"). Not the other edits into everyday English at large: "crispy", "yolk" and "resize"
# are missing from that vocabulary too, and their neighbours ("crisp", "york", "reside") would
# change the question. A capitalised or code-like word (specific_phrases) is a name and is never
# corrected, nor is one whose only near words change its ends ("ztunnel" is not "tunnel",
# "browse" not "browser").
TYPO_MIN_LETTERS = 4
# a lowercase word, or the question's first word capitalised ("Recieve webhooks?")
LOWER_WORD = re.compile(r"(?<![\w./])(?:^[A-Z])?[a-z]+(?![\w/]|\.\w)")


def _edits(word: str) -> tuple[list[str], list[str]]:
    """The words one edit inside `word` away, its first and last letters in place (or the last
    two swapped: "schedlue"): (swaps, other edits)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    head, body, tail = word[0], word[1:-1], word[-1]
    splits = [(body[:i], body[i:]) for i in range(len(body) + 1)]
    swaps = [head + a + b[1] + b[0] + b[2:] + tail for a, b in splits if len(b) > 1]
    swaps.append(word[:-2] + tail + word[-2])
    drops = [a + b[1:] for a, b in splits if b]
    changes = [a + c + b[1:] for a, b in splits if b for c in letters if c != b[0]]
    adds = [a + c + b for a, b in splits for c in letters]
    others = [head + x + tail for x in dict.fromkeys(drops + changes + adds)]
    return swaps, others


def _correction(word: str, bm25: BM25, english: frozenset[str]) -> str | None:
    """The docs' most frequent word one edit away from `word`, else an everyday English word one
    swap away, if any."""
    swaps, others = _edits(word)
    best, best_df = None, 0
    for cand in swaps + others:
        terms = tokenize(cand)
        if terms != [cand] and cand.endswith(tuple(b + "s" for b in ES_BASES)):  # "meshs"
            continue
        v = bm25.vocab.get(terms[0]) if len(terms) == 1 else None
        df = int(bm25.offsets[v + 1] - bm25.offsets[v]) if v is not None else 0
        if df > best_df:
            best, best_df = cand, df
    return best or next((c for c in swaps if everyday(c, english)), None)


def correct_typos(
    question: str, searcher: Searcher, english: frozenset[str]
) -> tuple[str, dict[str, str]]:
    """The question with its typos corrected, and what was read as what."""
    if not english:  # without the everyday vocabulary every plain word would look like a typo
        return question, {}
    bm25 = searcher.bm25
    names = {w.lower() for p in specific_phrases(question) for w in p.split()}
    fixed: dict[str, str] = {}

    def fix(m: re.Match) -> str:
        w = m.group()
        low = w.lower()
        if len(w) < TYPO_MIN_LETTERS or low in names or _known_word(low, bm25, english):
            return w
        right = spelt_apart(low, searcher) or _correction(low, bm25, english)
        if not right:
            return w
        fixed[w] = right.capitalize() if w[0].isupper() else right
        return fixed[w]

    return LOWER_WORD.sub(fix, question), fixed


TYPO_NOTE = "read "  # how a typo note starts: the Slack context line shows those notes


def typo_note(typos: dict[str, str]) -> str:
    return TYPO_NOTE + ", ".join(f'"{typo}" as "{word}"' for typo, word in typos.items())


# The vocabulary's ids follow frequency in English text ("the" 1996, "differ" 11234, "batch" 14108,
# "swarm" 21708): the words below COMMON_ENGLISH are the common ones. Typed in lowercase, a product
# ("docker swarm", "flux cd", "azure ai foundry") is an everyday word, and only its rarity tells it
# from the words that frame a question ("differ", "versus", "happens"), which the docs may not use
# either (topic_gaps). Calibrated on the dev sets: of their answerable questions' words that the
# docs lack, the least common is "differ" (11234: a lower value refuses its question); of the
# off-topic ones' that decide a question, "batches" (14108: a higher one answers its question).
# Off-topic abstain as written: claude-docs 0.900 -> 0.933; typed in lowercase: claude-docs
# 0.700 -> 0.800, openshift-4.15 0.733 -> 0.800. No answerable question's decision changes.
COMMON_ENGLISH = 12_500


@lru_cache(maxsize=4)
def english_words(model_dir: str | Path | None, below: int | None = None) -> frozenset[str]:
    """Everyday English: the whole words of the local model's WordPiece vocabulary (30k entries
    chosen by frequency in English text), read from its tokenizer.json; with `below`, only those
    of a lower id, the more frequent ones (COMMON_ENGLISH). Empty (the check is off) when the local
    model is not prepared, e.g. with Voyage embeddings."""
    if not model_dir:
        return frozenset()
    try:
        vocab = json.loads((Path(model_dir) / "tokenizer.json").read_text())["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
    return frozenset(
        w for w, i in vocab.items() if w.isalpha() and w.isascii() and (below is None or i < below)
    )


# Languages. The local embedder reads English only, so offline a question in another language
# than the docs finds nothing; the user is told so plainly. py3langid (langid.py's maintained fork,
# 4.6 MB with its model, numpy only) tells the language: a question is in another language when
# the docs' language gets less than LANGUAGE_MARGIN of the probability (the 580 English questions
# of the eval sets all give English >= 0.32; German, Czech, Spanish, French questions < 0.01).
LANGUAGE_MARGIN = 0.05
LANGUAGE_NAMES = {
    "en": "English", "de": "German", "cs": "Czech", "es": "Spanish", "fr": "French",
    "it": "Italian", "pt": "Portuguese", "nl": "Dutch", "pl": "Polish", "sk": "Slovak",
    "sv": "Swedish", "da": "Danish", "no": "Norwegian", "fi": "Finnish", "hu": "Hungarian",
    "ro": "Romanian", "tr": "Turkish", "ru": "Russian", "uk": "Ukrainian", "el": "Greek",
    "ja": "Japanese", "zh": "Chinese", "ko": "Korean", "ar": "Arabic", "he": "Hebrew",
}  # fmt: skip
_identifier_lock = threading.Lock()


@cache
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    with _identifier_lock:  # loaded once, on the first question that needs it (~1 s)
        return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


@lru_cache(maxsize=4)
def docs_language(searcher: Searcher) -> str:
    """The language most of the docs are written in (a sample of the chunks)."""
    step = max(1, searcher.size // 40)
    sample = "\n".join(
        r["text"][:300] for r in searcher.fetch(list(range(0, searcher.size, step))[:40])
    )
    return str(_identifier().classify(sample)[0]) if sample.strip() else "en"


def docs_language_name(searcher: Searcher) -> str:
    return language_name(docs_language(searcher))


# langid guesses wildly on a word or two of English ("pricing": Latin, "rate limits": Sotho,
# "auto standby": Italian), and names and loanwords pass for other languages: a question is taken
# as foreign only from FOREIGN_MIN_WORDS words, and only when at most FOREIGN_KNOWN_SHARE of its
# words of 4 letters or more are everyday English or words of the docs (shorter ones are left out:
# the model's vocabulary holds "ich", "der", "la").
FOREIGN_MIN_WORDS, FOREIGN_KNOWN_SHARE = 3, 0.5
LETTERS = re.compile(r"[^\W\d_]{2,}")


def _known_word(word: str, bm25: BM25, english: frozenset[str]) -> bool:
    if everyday(word, english):
        return True
    terms = tokenize(word) if word.isascii() else []  # "neúspěšné" would split into fragments
    return len(terms) == 1 and bm25.vocab.get(terms[0]) is not None


def foreign_language(
    question: str, searcher: Searcher, english: frozenset[str] = frozenset()
) -> str | None:
    """The question's language when it is confidently not the docs' language, else None.
    `english`: everyday English words (english_words), known as well as the docs' own."""
    words = LETTERS.findall(question)
    long = [w for w in words if len(w) >= 4]
    known = sum(_known_word(w, searcher.bm25, english) for w in long)
    few = len(words) < FOREIGN_MIN_WORDS or known > FOREIGN_KNOWN_SHARE * len(long)
    if few or len(long) - known < 2:  # one unknown word is a name: "my WiFi drops" is not Czech
        return None
    docs = docs_language(searcher)
    ranked = dict(_identifier().rank(question))
    if ranked.get(docs, 0.0) >= LANGUAGE_MARGIN:
        return None
    lang = max(ranked, key=lambda k: ranked[k])
    return None if lang in (docs, "zxx") else str(lang)


def abstain_message(ans: Answer) -> str | None:
    """Why the docs can't answer, when the evidence knows more than "not found": a question in
    another language than the docs (offline), or names the docs never mention."""
    lang, docs = ans.evidence.get("language"), ans.evidence.get("docs_language")
    if lang and docs:
        d, q = language_name(docs), language_name(lang)
        return (
            f"Offline search works only in the docs' language ({d}), and this question looks like"
            f" {q}. Please ask it in {d}."
        )
    unknown = ans.evidence.get("unknown_terms")
    if unknown:
        return (
            "I couldn't find this in the docs, so I won't guess: they don't mention "
            + ", ".join(f'"{t}"' for t in unknown)
            + "."
        )
    gaps = ans.evidence.get("topic_gaps")
    if gaps:
        return (
            "I couldn't find this in the docs, so I won't guess: the closest sections don't"
            " mention " + ", ".join(f'"{t}"' for t in gaps) + "."
        )
    return None


def evidence(
    question: str,
    query_vec: np.ndarray | None,
    hits: list[Hit],
    bm25: BM25,
    ans: Answer,
    searcher: Searcher | None = None,
    claude: bool = False,
    english: frozenset[str] = frozenset(),
    common: frozenset[str] = frozenset(),
) -> str:
    """ABSTAIN / PARTIAL / ANSWER from retrieval alone, before any model is asked. With `claude`
    (a Claude client will extract and answer), only a question with nothing near at all stops
    here; Claude's extraction and answer decide the rest. `english` and `common`: everyday and
    common English words (english_words)."""
    if not hits:
        ans.evidence = {"coverage": 0.0, "similarity": 0.0}
        return ABSTAIN
    question = without_own_values(question)  # what the checks below read
    # "whats" is "what" once stemmed, a stopword no chunk is indexed under: an unseen term, it
    # weighed as much as the rarest name and sank the coverage of "whats the difference between …"
    q = [t for t in tokenize(question) if t not in STOPWORDS and t not in CONTRACTIONS]
    top = top_terms(hits)
    cover = bm25.coverage(q, list(top))
    sim = max(h.vector for h in hits[:3]) if query_vec is not None else None
    unknown = unknown_terms(question, searcher, english) if searcher is not None else []
    # one word under its heading ("pricing" under Voyage's "Pricing") says little: closeness decides
    header = context_header(hits[0].chunk["title"], hits[0].chunk["heading_path"])
    titled = bm25.coverage(q, tokenize(header)) if len(set(q)) >= 2 else 0.0
    ans.evidence = {
        "coverage": round(cover, 3),
        "similarity": None if sim is None else round(sim, 3),
        "heading_coverage": round(titled, 3),
        "unknown_terms": unknown,
    }
    strength = _offline_strength(sim, cover, unknown, titled >= HEADING_COVERAGE)
    if strength != ABSTAIN and english and sim is not None:
        # is the question's subject missing from the sections found? (its share is recorded for
        # every question, so that bench/answers_eval.py can re-tune the thresholds)
        gaps, share = topic_gaps(question, top, bm25, english, common)
        ans.evidence["topic_share"] = round(share, 3)
        if share >= TOPIC_SHARE and sim < TOPIC_SIMILARITY:
            ans.evidence["topic_gaps"] = gaps
            strength = ABSTAIN
    if claude:
        # kept for after_fallback: if Claude's extraction fails, the offline decision holds
        ans.evidence["offline_decision"] = strength
        near = cover >= ABSTAIN_COVERAGE if sim is None else sim >= CLAUDE_ABSTAIN_SIMILARITY
        return ANSWER if near or titled >= HEADING_COVERAGE else ABSTAIN
    if strength != ANSWER and searcher is not None:
        # not found: because the question is in another language than the docs?
        lang = foreign_language(question, searcher, english)
        if lang:
            ans.evidence |= {"language": lang, "docs_language": docs_language(searcher)}
            return ABSTAIN
    if strength == ANSWER and searcher is not None and absent_names(question, top, searcher):
        return PARTIAL
    return strength


def after_fallback(strength: str, ans: Answer, claude_failed: bool) -> str:
    """The decision once extraction has run: when Claude was to check the passages but failed
    (so the offline extractor ran), nothing checks them but the offline evidence, so its decision
    holds (ABSTAIN on a name the docs never mention, PARTIAL on a loose match)."""
    offline = ans.evidence.get("offline_decision")
    return str(offline) if claude_failed and offline else strength


def _offline_strength(sim: float | None, cover: float, unknown: list[str], titled: bool) -> str:
    """`titled`: the top section's headings name the question (HEADING_COVERAGE)."""
    if unknown:
        return ABSTAIN
    if titled:
        return ANSWER
    if sim is None:  # keyword search only: coverage decides alone
        return (
            ABSTAIN if cover < ABSTAIN_COVERAGE else PARTIAL if cover < PARTIAL_COVERAGE else ANSWER
        )
    if sim < ABSTAIN_SIMILARITY or (cover < ABSTAIN_COVERAGE and sim < WEAK_SIMILARITY):
        return PARTIAL if cover >= FULL_COVERAGE and sim >= FULL_SIMILARITY else ABSTAIN
    if cover < PARTIAL_COVERAGE or sim < PARTIAL_SIMILARITY:
        return PARTIAL
    return ANSWER


def top_terms(hits: list[Hit]) -> set[str]:
    """The index terms of the top 3 chunks: what the passages found can speak of."""
    return {t for h in hits[:3] for t in tokenize(h.chunk["search_text"])}


def absent_names(question: str, top: set[str], searcher: Searcher) -> list[str]:
    """The question's specific words (not the docs' everyday ones) that the docs know but the top
    chunks don't contain: the passages found are about something else, so at best PARTIAL. A
    short acronym (DR, CLI) is left out: a passage often spells it out instead. `top`: the top
    chunks' terms (top_terms)."""
    bm25 = searcher.bm25
    return [
        t
        for p in specific_phrases(question)
        for w in p.split()
        if not (w.isupper() and len(w) <= 3)
        for t in tokenize(w)
        if bm25.vocab.get(t) is not None and not _common(t, bm25) and t not in top
    ]


# A word's inflections and derivations, for topic_gaps: a root is the word less one of these
# endings ("deleting" -> "delet"), and its family is the index terms made of the root and one of
# ENDINGS ("delete", "deleted", "deletion"). Plurals are already folded by the index's stemmer.
ROOT_SUFFIXES = (
    "ations", "ation", "ions", "ion", "ments", "ment", "ers", "er", "ors", "or", "ings", "ing",
    "ies", "ied", "ed", "es", "able", "ally", "al", "ly", "ive", "ity", "y", "s", "e", "d",
)  # fmt: skip
ENDINGS = frozenset(
    ("", "s", "es", "e", "ed", "d", "ing", "er", "or", "ion", "ation", "ment", "able", "al",
     "ally", "ly", "ive", "y", "ity", "ie", "ied")
)  # fmt: skip
QUESTION_WORD = re.compile(r"[a-z]+")


def _root(word: str) -> str:
    for suffix in ROOT_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            root = word[: -len(suffix)]
            if root[-1] == root[-2] and suffix in ("ing", "ed", "er"):  # stopp(ing), plann(ed)
                root = root[:-1]
            return root
    return word


def word_family(word: str, bm25: BM25) -> list[int]:
    """The index's term ids of `word` and its inflections (the vocabulary is sorted, so they are
    one run of terms sharing the root)."""
    root = _root(stem(word))
    key = root.encode()
    vocab = bm25.vocab
    out = []
    i = bisect.bisect_left(vocab, key)
    while i < len(vocab) and (term := vocab[i]).startswith(key):
        if term[len(key) :].decode() in ENDINGS or _root(term.decode()) == root:
            out.append(i)
        i += 1
    return out


# when something happened or how often: words that frame a question ("stopped arriving since
# yesterday"), never its subject
WHEN_WORDS = frozenset(
    ("yesterday", "today", "tomorrow", "tonight", "weekend", "recently", "lately", "suddenly",
     "anymore", "sometimes", "often", "always", "never", "currently", "still", "already", "soon",
     "ago", "earlier", "later", "randomly", "intermittently", "occasionally", "constantly")
)  # fmt: skip
# what a tool did with the error a user reports ("oc login says x509 ..."): never the subject
REPORT_WORDS = frozenset(
    ("says", "said", "shows", "shown", "throws", "threw", "thrown", "complains", "prints",
     "displays", "tells", "told", "gives", "gave", "keeps", "kept", "seems", "looks")
)  # fmt: skip


# how a question compares two things ("what's the difference between Free and Team"): the things
# are its subject, not the comparison
COMPARE_WORDS = frozenset(
    ("difference", "differences", "differ", "differs", "compare", "compared", "comparison",
     "versus", "vs")
)  # fmt: skip


FRAMING_WORDS = WHEN_WORDS | REPORT_WORDS | COMPARE_WORDS | TASK_WORDS


def topic_gaps(
    question: str,
    top: set[str],
    bm25: BM25,
    english: frozenset[str],
    common: frozenset[str] = frozenset(),
) -> tuple[list[str], float]:
    """The question's words that the docs seldom use (a word family in at most TOPIC_RARE of the
    chunks, or in one) and that none of the top chunks contains, with the share of the question's
    idf weight they carry. A close section of the same product that lacks the subject the question
    asks about ("the memory tool", "a spend limit") cannot fake that word. So is an everyday word
    that the docs never use and that is not `common` English: typed in lowercase, a product's name
    ("swarm", "flux") is such a word. A participle of an
    everyday verb ("covered", "going"), a contraction ("doesn't"), a word of when or how often
    (WHEN_WORDS), a verb reporting an error ("says": REPORT_WORDS), a comparison
    ("difference": COMPARE_WORDS) and the kind of help asked for ("setup": TASK_WORDS) frame a
    question rather than name its subject, so they never count as missing."""
    text = question.lower()
    framing = set(re.findall(r"([a-z]+)['’](?:t|re|ve|ll|d|m)\b", text)) | FRAMING_WORDS
    total, missing, gaps = 0.0, 0.0, []
    for w in dict.fromkeys(QUESTION_WORD.findall(text)):
        if w in STOPWORDS or len(w) < 3:
            continue
        ids = word_family(w, bm25)
        rows = (
            np.unique(
                np.concatenate(
                    [bm25.postings_docs[bm25.offsets[i] : bm25.offsets[i + 1]] for i in ids]
                )
            )
            if ids
            else ()
        )
        weight = float(np.log((bm25.size + 0.5) / (len(rows) + 0.5)))
        total += weight
        participle = w.endswith(("ing", "ed")) and everyday(w, english)
        rare = 0 < len(rows) <= max(1.0, TOPIC_RARE * bm25.size)
        # absent from the docs and uncommon (not a name the docs lack: unknown_terms stops those)
        uncommon = not ids and bool(common) and everyday(w, english) and not everyday(w, common)
        if (
            (rare or uncommon)
            and not participle
            and w not in framing
            and not any(bm25.vocab[i].decode() in top for i in ids)
        ):
            missing += weight
            gaps.append(w)
    return gaps, (missing / total if total else 0.0)
