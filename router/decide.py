"""Whether the docs answer a question: one calibrated probability from a few signals.

`signals` reads the question and what retrieval found:

- `sim`: the best cosine of the top 3 chunks (the embedder's own scale, hence a model per embedder);
- `gap`: `sim` less the 10th best cosine of the hits: how far the best stands out of its neighbours;
- `rare`: how far below everyday English the rarest word the docs never use in any form is, among
  the words English knows: max(0, RARE_ZIPF - zipf) / RARE_ZIPF on wordfreq's zipf scale (log10 of
  its frequency per billion words): "rancher" 0.24, "couple" or "things" 0. A word the world uses
  and the docs never do is a subject they don't cover ("Terraform", "Kafka"); an everyday one
  ("Explain", "things", "perhaps") only frames the question. The rarest word, not a share, so a
  long question typed as in chat weighs as its short form;
- `unseen`: 1 when a word the docs never use is no word of English either (zipf 0): a subject
  nobody writes about, or the asker's own name for their project, package or variable: the fit
  weighs which it more often is, apart from `rare`;
- `missing`: the same of the words the docs know but the top 3 chunks lack, times how rare each is
  in the docs (normalised idf): a near section about something else; words rare both in English
  and in the docs are the question's specific terms;
- `phrase`: 1 when a run of names ("Claude Opus 4") stands nowhere in the docs side by side;
- `agree`: 1 when BM25's and the vectors' best hits are the same section.

A word is known to the docs in any form: as an index term, by its Snowball stem, inside one of the
docs' identifiers ("crashlooping" in KubePodCrashLooping) or written apart ("buckethost": "bucket
host"). Typos are read first (`correct_typos`: symspellpy over the docs' vocabulary, and the words
English knows one edit away, read off wordfreq). The lexical signals read what the question asks
(`reading.py`): its prose without the asker's material (code, quoted output, a log, paths, versions,
identifiers, values), and of that only the sentences that ask: the first (an issue's title, a
message's opening) and each ending in "?"; the rest of a long message is context, chatter and what
was tried, and a word the docs lack there is no topic they lack. Closeness reads the whole question.

The share of the question's words found in the top chunks or in their headings was tried too and
left out: it ranks a long question typed as in chat below a short one of the same subject, and the
fit did not carry to a corpus it was not fitted on (bench/RESULTS.md, section calibration).

A logistic regression turns the signals into p = P(the docs answer the question); ANSWER, PARTIAL
and ABSTAIN are bands of p. Weights and bands are data (`router/decision.json`), written by
`fieldguide calibrate` (bot/evaluation/calibrate.py) from answerable questions, close off-topic
ones and answerable ones with their gold sections hidden from the search (the docs' own headings
as questions are measured, not fitted on); one model per embedder, and an embedder-free one
(`lexical`) for an embedder that was not calibrated and for a search without vectors.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from index.search import BM25, EVERYDAY_ZIPF, STOPWORDS, Hit, tokenize

from .answer import ABSTAIN, ANSWER, PARTIAL
from .reading import VERSION, Reading
from .words import DocsWords, Postings, snowball, snowballs, zipf

if TYPE_CHECKING:
    from .corpus import Corpus

MODEL_FILE = Path(__file__).with_name("decision.json")
FEATURES = ("sim", "gap", "rare", "unseen", "missing", "phrase", "agree")
LEXICAL = ("rare", "unseen", "missing", "phrase", "agree")
NAME_SIGNALS = ("rare", "unseen", "missing", "phrase")  # what the question's names say
# where everyday English ends on the zipf scale: index.search.EVERYDAY_ZIPF, chosen for the decision
# leave-one-set-out among 2.5-4.5 (the figures vary by <= 0.07 over that range: bench/RESULTS.md,
# section calibration) and the edge search's words' share falls from too
RARE_ZIPF = EVERYDAY_ZIPF


# -- names: runs of specific words that must stand side by side in the docs --

# a word in more than this share of the chunks is the docs' own vocabulary ("Claude", "cluster"),
# which says nothing about where a phrase stands (chosen leave-one-set-out among 0.03, 0.1, 0.3:
# bench/RESULTS.md, section calibration); how many chunks holding all of a phrase's words are read
# to find them side by side
COMMON_SHARE = 0.1
PHRASE_CANDIDATES = 400


def _rows_with(terms: list[str], bm25: BM25 | Postings) -> np.ndarray | None:
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


def known_phrase(phrase: str, docs: Corpus) -> bool:
    """Whether the phrase's words stand side by side somewhere in the docs (the docs' everyday
    words allowed between them; a version kept: "Opus 4" is not "Claude 3 Opus ... 4")."""
    words = docs.words
    bm25 = words.bm25  # the scope's postings when the docs are a scope's
    common = lambda t: words.df(t) > COMMON_SHARE * bm25.size  # noqa: E731
    versions = {t for w in phrase.split() if VERSION.fullmatch(w) for t in tokenize(w)}
    terms = [t for t in tokenize(phrase) if t in versions or not common(t)]
    if len(terms) < 2:
        return True  # one word: `rare` weighs it
    rows = _rows_with(terms, bm25)
    if rows is None or rows.size == 0:
        return False
    n = len(terms)
    for rec in docs.searcher.fetch([int(r) for r in rows[:PHRASE_CANDIDATES]]):
        toks = [t for t in tokenize(rec["search_text"]) if t in versions or not common(t)]
        if any(toks[i : i + n] == terms for i in range(len(toks) - n + 1)):
            return True
    return False


# a word as the lexical signals read it: an English contraction whole ("shouldn't" is everyday
# English, its "shouldn" no word of any docs)
CONTENT_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:'[a-z]+)?")

# -- the signals --


@dataclass
class Signals:
    sim: float | None
    gap: float | None
    rare: float
    unseen: float
    missing: float
    phrase: float
    agree: float
    unknown_words: list[str]
    missing_words: list[str]
    unknown_phrases: list[str]
    message: bool = False  # more than one sentence: decided in its own bands (`decide`)

    def vector(self, names: tuple[str, ...]) -> np.ndarray:
        return np.array([float(getattr(self, n) or 0.0) for n in names])

    def to_dict(self) -> dict:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def rarity(found: list[str], docs: DocsWords | None = None) -> float:
    """How far below everyday English the rarest of these words is (0 when none is); with `docs`,
    each times how rare it is in the docs too (its idf over the largest possible, 0 for a word in
    every chunk): a word the docs use everywhere ("webhook" in a webhook service's docs) is their
    vocabulary, not a subject the sections found lack."""

    def docs_rarity(w: str) -> float:
        if docs is None:
            return 1.0
        df = max(1, max((docs.df(t) for t in tokenize(w)), default=1))
        return math.log(docs.bm25.size / df) / math.log(max(2, docs.bm25.size))

    return max(
        (max(0.0, RARE_ZIPF - zipf(w)) / RARE_ZIPF * docs_rarity(w) for w in found), default=0.0
    )


def signals(
    question: Reading, query_vec: np.ndarray | None, hits: list[Hit], docs: Corpus
) -> Signals:
    """What the question and the hits (best first) say about whether the docs answer it: the
    lexical signals read only what the question asks (`Reading.asking`), closeness the whole
    question."""
    asked = question.asking or question.text
    words = docs.words
    top = hits[:3]
    top_terms = {t for h in top for t in tokenize(h.chunk["search_text"])}
    top_stems = set(snowballs([t for t in top_terms if t.isalpha()]))
    # a word of one or two letters names no subject ("am", "ve" of "I've", "th" of "5th")
    content = [
        w
        for w in dict.fromkeys(m.lower() for m in CONTENT_WORD.findall(asked))
        if w.split("'")[0] not in STOPWORDS and len(w.split("'")[0]) >= 3
    ]
    unknown = [w for w in content if not words.knows(w.split("'")[0])]
    missing = [
        w
        for w in content
        if w not in unknown
        and "'" not in w
        and not set(tokenize(w)) & top_terms
        and snowball(w) not in top_stems
        and not any(p in top_terms for p in (words.apart(w) or "").split())
    ]
    phrases = [p for p in question.asking_names if not known_phrase(p, docs)]
    sim = gap = None
    if query_vec is not None and hits:
        cosines = sorted((h.vector for h in hits), reverse=True)
        sim = max(h.vector for h in top)
        gap = sim - cosines[min(9, len(cosines) - 1)]
    agree = 0.0
    if hits:
        agree = float(
            max(hits, key=lambda h: h.bm25).section == max(hits, key=lambda h: h.vector).section
        )
    return Signals(
        sim=sim,
        gap=gap,
        rare=rarity([w for w in unknown if zipf(w) > 0]),
        unseen=float(any(zipf(w) == 0 for w in unknown)),
        missing=rarity(missing, words),
        phrase=float(bool(phrases)),
        agree=agree,
        unknown_words=unknown,
        missing_words=missing,
        unknown_phrases=phrases,
        message=len(question.sentences) > 1,
    )


# -- the calibrated decision --


@dataclass
class Model:
    """A fitted logistic regression over standardised signals, and the bands of its p."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    # answer, partial (p below: ABSTAIN) of a one-sentence question, answer_message and
    # partial_message of a message of several, claude (with Claude: abstain below)
    bands: dict[str, float]

    def contributions(self, s: Signals) -> dict[str, float]:
        """Each signal's share of the log-odds (standardised value times weight)."""
        z = (s.vector(self.features) - self.mean) / self.scale * self.weights
        return dict(zip(self.features, z.tolist(), strict=True))

    def p(self, s: Signals, near_only: bool = False) -> float:
        """P(the docs answer); `near_only`: from closeness alone, the names read as known (what
        the gate before Claude asks: Claude judges the names itself)."""
        parts = self.contributions(s)
        z = sum(v for k, v in parts.items() if not (near_only and k in NAME_SIGNALS)) + self.bias
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def to_dict(self) -> dict:
        return {
            "features": list(self.features),
            "mean": self.mean.round(6).tolist(),
            "scale": self.scale.round(6).tolist(),
            "weights": self.weights.round(6).tolist(),
            "bias": round(self.bias, 6),
            "bands": {k: round(v, 6) for k, v in self.bands.items()},
        }

    @classmethod
    def from_dict(cls, d: dict) -> Model:
        return cls(
            tuple(d["features"]),
            np.array(d["mean"]),
            np.array(d["scale"]),
            np.array(d["weights"]),
            float(d["bias"]),
            {k: float(v) for k, v in d["bands"].items()},
        )


class DecisionFileError(ValueError):
    """The decision file cannot be used; the message names it and says why."""


def load_models(path: Path = MODEL_FILE) -> dict[str, Model]:
    """The models of the decision file at `path`, each checked (`check_model`); a file that is
    not one, or a model that cannot decide, is a DecisionFileError naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        models = {name: Model.from_dict(m) for name, m in data["models"].items()}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as e:
        why = e.strerror if isinstance(e, OSError) else str(e) or type(e).__name__
        raise DecisionFileError(
            f"{path}: not a decision file ({why}); refit it with fieldguide calibrate"
        ) from None
    problems = [f"model {name!r} {p}" for name, m in models.items() if (p := check_model(m))]
    if "lexical" not in models:
        problems.append("no 'lexical' model (the one without vectors)")
    if problems:
        raise DecisionFileError(
            f"{path}: {'; '.join(problems)}; refit it with fieldguide calibrate"
        )
    return models


def check_model(m: Model) -> str:
    """What makes a model unable to decide ("" when nothing does): signals it does not know,
    arrays of another length, numbers that are not finite, bands outside 0-1, or no weight on
    any signal (p is then the same for every question: everything answered, or nothing)."""
    n = len(m.features)
    if not n or set(m.features) - set(FEATURES):
        return f"has unknown signals {sorted(set(m.features) - set(FEATURES))}"
    for name in ("mean", "scale", "weights"):
        values = getattr(m, name)
        if values.shape != (n,) or not np.isfinite(values).all():
            return f"has {name} that are not {n} finite numbers"
    if (m.scale <= 0).any() or not math.isfinite(m.bias):
        return "has a scale of 0 or a bias that is not a finite number"
    if not {"answer", "partial", "claude"} <= set(m.bands) or not all(
        0 <= v <= 1 for v in m.bands.values()
    ):
        return f"has bands {m.bands} (answer, partial and claude at least, each within 0-1)"
    # p is above 0 for every question: an edge at 0 takes them all, and a decision that can
    # refuse nothing answers "how do I bake bread?" from any docs
    if zero := sorted(k for k, v in m.bands.items() if v <= 0):
        return f"has band edges at 0 ({', '.join(zero)}): it would refuse no question"
    for style in ("", "_message"):
        if f"partial{style}" in m.bands and m.bands[f"partial{style}"] > m.bands.get(
            f"answer{style}", 1.0
        ):
            return f"has its partial{style} edge above its answer{style} edge"
    if not np.any(m.weights):
        return "weighs no signal (every weight 0): it decides every question alike"
    return ""


def model_for(embedder: str, vectors: bool, models: dict[str, Model]) -> tuple[str, Model]:
    """(name, model) of `models` (load_models): the embedder's calibrated model, else the
    embedder-free one (also for a search without vectors)."""
    name = embedder if vectors and embedder in models else "lexical"
    return name, models[name]


@dataclass
class Decision:
    decision: str  # ANSWER / PARTIAL / ABSTAIN
    p: float
    signals: Signals
    model: str
    why: str  # the signal that weighs most against answering ("language": another language)
    language: tuple[str, str] | None = None  # (the question's, the docs') when they differ

    def evidence(self) -> dict:
        head = {"p": round(self.p, 3), "model": self.model, "why": self.why}
        lang = dict(zip(("language", "docs_language"), self.language or (), strict=False))
        return head | lang | self.signals.to_dict()


def decide(s: Signals, model: Model, name: str, claude: bool = False) -> Decision:
    """The band of p: a question of one sentence in its bands, a message of several (context,
    what was tried, pasted output around the question) in its own, each fitted on questions like
    it. With Claude (its answer cites the passages, the claim check reads them), only a question
    with nothing near at all stops here: closeness alone below the `claude` band."""
    p, bands = model.p(s), model.bands
    parts = model.contributions(s)
    why = min(parts, key=lambda k: parts[k])
    if claude:
        near = model.p(s, near_only=True)
        return Decision(ABSTAIN if near < bands["claude"] else ANSWER, near, s, name, why)
    style = "_message" if s.message and "answer_message" in bands else ""
    answer, partial = bands["answer" + style], bands["partial" + style]
    verdict = ANSWER if p >= answer else PARTIAL if p >= partial else ABSTAIN
    return Decision(verdict, p, s, name, why)


@dataclass(frozen=True)
class Decided:
    """The decisions a question's search leads to: `offline`, read in the offline bands (the one
    that stands whenever the docs' own quotes are shown), and `gate`, the one the answer's branch
    starts on (with Claude: closeness alone in Claude's own band)."""

    offline: Decision
    gate: Decision


NOTHING = Signals(None, None, 0, 0, 0, 0, 0, [], [], [])


def assess(
    question: Reading,
    query_vec: np.ndarray | None,
    hits: list[Hit],
    docs: Corpus,
    models: dict[str, Model],
    embedder: str,
    claude: bool,
) -> Decided:
    """The question's decisions (`Decided`) from its signals, by the calibrated model of
    `embedder` in `models` (load_models). With `claude` the gate is Claude's band; without it, a
    question not answered may be in another language than the docs."""
    if not hits:
        found = Decision(ABSTAIN, 0.0, NOTHING, "", "sim")
        return Decided(found, found)
    used, model = model_for(embedder, query_vec is not None, models)
    s = signals(question, query_vec, hits, docs)
    offline = decide(s, model, used)
    if claude:
        return Decided(offline, decide(s, model, used, claude=True))
    if offline.decision != ANSWER and (lang := docs.foreign_language(question)):
        offline = replace(offline, decision=ABSTAIN, why="language", language=(lang, docs.language))
    return Decided(offline, offline)
