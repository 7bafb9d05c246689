"""`fieldguide calibrate`: fit the answer decision (router/decide.py) on calibration data and
measure it on a corpus left out of the fit.

Calibration data, from any corpus in the shared/eval format:
- `question`: its answerable questions (label 1);
- `offtopic`: its close off-topic questions (label 0);
- `hidden`: each answerable question whose gold sections are known, searched with those sections
  hidden (label 0: the nearest sections are close and do not answer it);
- `heading` / `heading_hidden`: the docs' own section headings as questions, searched as they are
  (label 1) and with their doc hidden (label 0): data that does not run out, for any corpus;
  measured, not fitted on (FIT_KINDS).

Each example is read the way `ask` reads a question (reading.plain, typos, embedding, the unrouted
hybrid search the offline router uses, decide.signals). A logistic regression (L2, Newton's method)
is fitted on the standardised signals, each corpus and label weighing alike. The bands come from
the stated cost of each wrong outcome (COSTS), lowest on the training corpora, each corpus and
each kind weighing alike: ANSWER from the upper band, PARTIAL ("I'm not sure the docs answer
this; the closest sections are:") between the two, ABSTAIN below the lower; with Claude, only
below the CLAUDE_SHARE quantile of the answerable questions' closeness.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from router import decide, reading, words
from router.answer import ABSTAIN, ANSWER, PARTIAL
from router.decide import FEATURES, LEXICAL, Model

from .answers import split_offtopic
from .retrieval import load_items, matches

# What each wrong outcome costs, per question (issue 33): an off-topic question answered as if the
# docs answered it is a confident wrong answer and costs most; an answerable question refused costs
# next (the asker is sent away from an answer the docs hold); an unsure PARTIAL, which quotes the
# closest sections under "I'm not sure", costs least: an answerable one (its answer under a
# doubt) twice an off-topic one (an honest "not sure" with places to look). An off-topic
# question refused and an answerable one answered cost nothing.
COSTS = {
    ("offtopic", ANSWER): 1.0,
    ("question", ABSTAIN): 0.5,
    ("question", PARTIAL): 0.2,
    ("offtopic", PARTIAL): 0.1,
}
DECISIONS = (ANSWER, PARTIAL, ABSTAIN)
CLAUDE_SHARE = 0.005
# The headings read as questions are measured (how often a heading is abstained with its doc
# hidden) but not fitted on: fitted on too, they took claude-docs' left-out off-topic abstention
# from 0.733 to 0.567 at the same answerable abstention (a heading is worded like no question).
FIT_KINDS = ("question", "offtopic", "hidden")
HEADINGS = 150  # headings sampled per corpus (seeded)
L2 = 1.0
# Enough to fit on: the fit of every set together needs this many examples of each label per
# signal it weighs (events per variable >= 10, Peduzzi et al. 1996: fewer, and the weights are
# noise), and each set needs answerable and off-topic questions, as it is measured on both when
# left out (none of a kind: NaN figures, or a fit that reads nothing).
EVENTS_PER_SIGNAL = 10


@dataclass
class Example:
    corpus: str
    kind: str
    label: int
    signals: decide.Signals
    right: bool  # the top hit is a gold section (or, without gold sections, of a gold intent)
    question: str


def corpus_examples(
    name: str, items: list[dict], engine, seed: int = 0, headings: int = HEADINGS
) -> list[Example]:
    """Every kind of example of one corpus, read through `engine` (its index and embedder)."""
    corpus = engine.corpus()
    searcher = corpus.searcher
    records = searcher.fetch(list(range(searcher.size)))
    by_doc: dict[str, list[int]] = {}
    for row, rec in enumerate(records):
        by_doc.setdefault(rec["doc"], []).append(row)
    answerable, offtopic = split_offtopic(items)
    out: list[Example] = []

    def read(q: str, kind: str, label: int, hide: list[int], gold: list[dict], intents: list[str]):
        text, _ = words.correct_typos(reading.read(reading.plain(q)), corpus.words)
        vec, _ = engine.embed_query(text)
        exclude = np.array(sorted(hide), dtype=np.int64)
        hits = searcher.search(text, vec, k=10, exclude=exclude)
        top = hits[0].chunk if hits else {}
        right = bool(top) and (
            any(matches(top, g) for g in gold) if gold else top["intent"] in intents
        )
        signals = decide.signals(reading.read(text), vec, hits, corpus)
        out.append(Example(name, kind, label, signals, right, q))

    for q in answerable:
        read(q["question"], "question", 1, [], q["gold"], q["intents"])
        sections = [g for g in q["gold"] if g.get("doc")]
        if sections:
            hide = [r for g in sections for r in by_doc.get(g["doc"], []) if matches(records[r], g)]
            read(q["question"], "hidden", 0, hide, [], [])
    for q in offtopic:
        read(q["question"], "offtopic", 0, [], [], [])
    firsts = [r for r, rec in enumerate(records) if rec["heading_path"]]
    for r in random.Random(seed).sample(firsts, min(headings, len(firsts))):
        rec = records[r]
        heading = rec["heading_path"][-1]
        gold = [{"doc": rec["doc"], "section": heading}]
        read(heading, "heading", 1, [], gold, [])
        read(heading, "heading_hidden", 0, by_doc[rec["doc"]], [], [])
    return out


def _weights(examples: list[Example]) -> np.ndarray:
    """Each corpus and label weighs alike; within them each kind alike."""
    groups: dict[tuple, int] = {}
    for e in examples:
        groups[(e.corpus, e.label, e.kind)] = groups.get((e.corpus, e.label, e.kind), 0) + 1
    kinds: dict[tuple, int] = {}
    for c, lab, _ in groups:
        kinds[(c, lab)] = kinds.get((c, lab), 0) + 1
    w = np.array(
        [1.0 / (groups[(e.corpus, e.label, e.kind)] * kinds[(e.corpus, e.label)]) for e in examples]
    )
    return w * len(w) / w.sum()  # mean 1, so that L2 weighs as one example per coefficient


def fit(examples: list[Example], features: tuple[str, ...]) -> Model:
    """Logistic regression on the standardised signals, then the bands (module doc)."""
    examples = [e for e in examples if e.kind in FIT_KINDS]
    X = np.array([e.signals.vector(features) for e in examples])
    y = np.array([e.label for e in examples], dtype=float)
    w = _weights(examples)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0
    Z = np.hstack([(X - mean) / scale, np.ones((len(X), 1))])
    beta = np.zeros(Z.shape[1])
    penalty = np.diag([L2] * (Z.shape[1] - 1) + [0.0])  # the intercept is not shrunk
    for _ in range(50):  # Newton's method (IRLS)
        p = 1 / (1 + np.exp(-Z @ beta))
        grad = Z.T @ (w * (p - y)) + penalty @ beta
        hess = (Z * (w * p * (1 - p))[:, None]).T @ Z + penalty
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    model = Model(features, mean, scale, beta[:-1], float(beta[-1]), {})
    near: dict[str, list[float]] = {}
    for e in examples:
        if e.kind == "question":
            near.setdefault(e.corpus, []).append(model.p(e.signals, near_only=True))
    model.bands = {"claude": min(float(np.quantile(p, CLAUDE_SHARE)) for p in near.values())}
    model.bands |= style_bands(model, examples)
    return model


def style_bands(model: Model, examples: list[Example], costs: dict = COSTS) -> dict[str, float]:
    """The band edges of least cost for one-sentence questions ("partial", "answer") and for
    messages of several sentences ("partial_message", "answer_message"), each among questions of
    its kind: a message's closeness is read through its context and pasted output, and weighs
    otherwise (measured leave-one-corpus-out: section calibration of bench/RESULTS.md). A kind
    the examples lack takes the edges of all of them."""
    bands: dict[str, float] = {}
    for style, message in (("", False), ("_message", True)):
        alike = [e for e in examples if e.signals.message == message]
        kinds = {e.kind for e in alike}
        edges = cheapest_bands(
            model, alike if {"question", "offtopic"} <= kinds else examples, costs
        )
        bands |= dict(zip(("partial" + style, "answer" + style), edges, strict=True))
    return bands


def cheapest_bands(
    model: Model, examples: list[Example], costs: dict = COSTS
) -> tuple[float, float]:
    """(partial, answer): the two band edges of least mean cost on these examples, each corpus and
    kind weighing alike, searched over every distinct p of their answerable and off-topic
    questions. With F(x) a group's share of p below x, a group's cost is
    C_answer + (C_partial - C_answer) F(answer) + (C_abstain - C_partial) F(partial): a term of
    each edge, so the best lower edge for every upper one is a running minimum."""
    ps: dict[tuple[str, str], list[float]] = {}
    for e in examples:
        if e.kind in ("question", "offtopic"):
            ps.setdefault((e.corpus, e.kind), []).append(model.p(e.signals))
    edges = np.unique(np.concatenate([np.array(v) for v in ps.values()] + [np.array([0.0, 1.0])]))
    upper, lower = np.zeros(len(edges)), np.zeros(len(edges))
    for (_, kind), p in ps.items():
        below = np.searchsorted(np.sort(p), edges, side="left") / len(p)  # F at each edge
        c_answer, c_partial, c_abstain = (costs.get((kind, d), 0.0) for d in DECISIONS)
        upper += (c_partial - c_answer) * below
        lower += (c_abstain - c_partial) * below
    where, at = [], 0  # the cheapest lower edge at or below each edge
    for i in range(len(edges)):
        at = i if lower[i] < lower[at] else at
        where.append(at)
    hi = int(np.argmin(upper + lower[where]))
    return float(edges[where[hi]]), float(edges[hi])


def rates(model: Model, examples: list[Example]) -> dict:
    """What the model decides on one corpus: the share of each outcome for the answerable and the
    off-topic questions, the share abstained of the other kinds, and how often ANSWER and PARTIAL
    have the right section on top."""
    verdict = {id(e): decide.decide(e.signals, model, "").decision for e in examples}
    out: dict = {}
    for kind in ("question", "offtopic", "hidden", "heading", "heading_hidden"):
        of = [e for e in examples if e.kind == kind]
        if of:
            out[kind] = {"n": len(of)} | {d: _share(of, verdict, d) for d in DECISIONS}
    asked = [e for e in examples if e.kind == "question"]
    for band in (ANSWER, PARTIAL):
        got = [e.right for e in asked if verdict[id(e)] == band]
        out[f"right_{band.lower()}"] = (round(sum(got) / len(got), 3), len(got)) if got else None
    return out


def _share(of: list[Example], verdict: dict, decision: str) -> float:
    return round(sum(verdict[id(e)] == decision for e in of) / len(of), 3)


def auc(model: Model, examples: list[Example], feature: str | None = None) -> float | None:
    """How often an answerable question's p (or one signal) ranks above an off-topic one's."""

    def value(e: Example) -> float:
        return float(getattr(e.signals, feature) or 0.0) if feature else model.p(e.signals)

    pos = [value(e) for e in examples if e.kind == "question"]
    neg = [value(e) for e in examples if e.kind == "offtopic"]
    return ranking_auc(pos, neg) if pos and neg else None


def ranking_auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """P(a random positive scores above a random negative), ties counted half."""
    p, n = np.asarray(pos, dtype=float)[:, None], np.asarray(neg, dtype=float)[None, :]
    return float((p > n).mean() + 0.5 * (p == n).mean())


# the costs of an answerable PARTIAL the trade-off is shown over (an off-topic one at half)
PARTIAL_COSTS = (0.05, 0.1, 0.2, 0.3, 0.4)


def leave_one_out(data: dict[str, list[Example]], features: tuple[str, ...]) -> dict:
    """Fit on every corpus but one, measure on that one. "costs": the left-out rates with the
    bands chosen at other PARTIAL costs (the trade-off); "auc": how well the fitted p and the
    closeness alone tell the left-out corpus's answerable questions from its off-topic ones."""
    out = {}
    for held in data:
        train = [e for name, ex in data.items() if name != held for e in ex]
        model = fit(train, features)
        trade = {}
        for c in PARTIAL_COSTS:
            costs = COSTS | {("question", PARTIAL): c, ("offtopic", PARTIAL): c / 2}
            other = Model(model.features, model.mean, model.scale, model.weights, model.bias, {})
            other.bands = style_bands(other, train, costs)
            trade[c] = rates(other, data[held])
        out[held] = {
            "rates": rates(model, data[held]),
            "costs": trade,
            "auc": (auc(model, data[held]), auc(model, data[held], "sim")),
        }
    return out


def write_models(data: dict[str, list[Example]], embedder: str, path: Path) -> dict:
    """The decision file: a model per embedder and the embedder-free one, fitted on every
    corpus."""
    everything = [e for ex in data.values() for e in ex]
    models = {embedder: fit(everything, FEATURES), "lexical": fit(everything, LEXICAL)}
    problems = [f"{name} {p}" for name, m in models.items() if (p := decide.check_model(m))]
    if problems:  # never written: the bot would load it and decide every question alike
        raise ValueError(f"calibrate fitted no usable decision: {'; '.join(problems)}")
    counts: dict[str, int] = {}
    for e in everything:
        counts[f"{e.corpus}/{e.kind}"] = counts.get(f"{e.corpus}/{e.kind}", 0) + 1
    body = {
        "version": 1,
        "fitted": date.today().isoformat(),
        "written_by": "fieldguide calibrate",
        "examples": counts,
        "models": {name: m.to_dict() for name, m in models.items()},
    }
    path.write_text(json.dumps(body, indent=1) + "\n")
    return body


def distinct(items: list[dict]) -> list[dict]:
    """The items whose question differs from every earlier one's (case and spacing aside)."""
    seen: set[str] = set()
    out = []
    for q in items:
        key = " ".join(str(q.get("question", "")).lower().split())
        if key not in seen:
            seen.add(key)
            out.append(q)
    return out


def check_sets(sets: dict[str, list[dict]]) -> None:
    """ValueError saying what is missing when these sets (name → their question items) are not
    enough to fit on: a set without answerable or off-topic questions, or fewer than
    EVENTS_PER_SIGNAL per signal of either label altogether (answerable; off-topic, and
    answerable ones whose gold sections are hidden)."""
    problems, yes, no, copies = [], 0, 0, 0
    for name, items in sets.items():
        answerable, offtopic = split_offtopic(items)
        problems += [f"{name} has no answerable questions"] if not answerable else []
        problems += [f"{name} has no off-topic questions"] if not offtopic else []
        # a copy of a question tells a fit nothing its first did: distinct questions count
        answerable, offtopic = distinct(answerable), distinct(offtopic)
        copies += len(items) - len(answerable) - len(offtopic)
        yes += len(answerable)
        no += len(offtopic) + sum(any(g.get("doc") for g in q["gold"]) for q in answerable)
    need = EVENTS_PER_SIGNAL * len(FEATURES)
    if yes < need or no < need:
        copied = f" ({copies} copies of a question not counted)" if copies else ""
        problems.append(
            f"a fit needs at least {need} distinct answerable questions and {need} that the docs"
            f" do not answer (off-topic ones, and answerable ones with gold sections to hide),"
            f" ten per signal; these sets have {yes} answerable and {no}{copied}"
        )
    if problems:
        raise ValueError(
            "calibrate cannot fit on these sets: " + "; ".join(problems) + " (off-topic"
            " questions: offtopic.jsonl, or questions with no intents, gold or answer)"
        )


def load_set(set_dir: Path, offtopic: Path | None = None) -> list[dict]:
    """The questions of an eval set (its off-topic ones too); ValueError when it has none."""
    items = load_items(set_dir / "questions.jsonl")
    if not items:
        raise ValueError(f"{set_dir / 'questions.jsonl'} holds no questions")
    for extra in (set_dir / "offtopic.jsonl", offtopic):
        if extra and Path(extra).is_file():
            items += load_items(extra)
    return items


def format_report(loco: dict, feature_sets: dict[str, tuple[str, ...]]) -> str:
    """The leave-one-corpus-out tables (figures of the left-out corpus only), the trade-off over
    the PARTIAL cost, and how far the signals can tell the kinds apart at all (AUC)."""
    lines = []
    for label in feature_sets:
        lines += [
            f"**{label}** (`{', '.join(feature_sets[label])}`)",
            "",
            "| left out | answerable: refused / unsure / answered | off-topic: ANSWER / PARTIAL"
            " / ABSTAIN | gold hidden abstain | headings hidden abstain | right when ANSWER"
            " | right when PARTIAL |",
            "|---|---|---|---|---|---|---|",
        ]
        for held, res in loco[label].items():
            r = res["rates"]
            lines.append(
                f"| {held} | {_three(r, 'question', (ABSTAIN, PARTIAL, ANSWER))} | "
                f"{_three(r, 'offtopic', DECISIONS)} | {_cell(r, 'hidden')} | "
                f"{_cell(r, 'heading_hidden')} | {_right(r, 'right_answer')} | "
                f"{_right(r, 'right_partial')} |"
            )
        lines.append("")
    first = next(iter(feature_sets))
    lines += [
        "The trade-off on each left-out corpus (full model): the bands chosen on the other corpora"
        " at other costs of an answerable PARTIAL (an off-topic PARTIAL at half of it; an"
        " off-topic ANSWER 1, an answerable ABSTAIN 0.5). Each cell: answerable refused /"
        " unsure, off-topic ANSWER.",
        "",
        "| left out | " + " | ".join(f"PARTIAL {c}" for c in PARTIAL_COSTS) + " |",
        "|---|" + "---|" * len(PARTIAL_COSTS),
    ]
    for held, res in loco[first].items():
        cells = [
            f"{r['question'][ABSTAIN]:.2f} / {r['question'][PARTIAL]:.2f}, "
            + (f"{r['offtopic'][ANSWER]:.2f}" if "offtopic" in r else "—")
            for r in res["costs"].values()
        ]
        lines.append(f"| {held} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "How far apart the kinds are on each left-out corpus (AUC, answerable above off-topic;"
        " 0.5 is chance): the fitted p / the closeness `sim` alone:",
        "",
    ]
    for held, res in loco[first].items():
        p, sim = res["auc"]
        lines.append(f"- {held}: " + (f"{p:.3f} / {sim:.3f}" if p is not None else "—"))
    return "\n".join(lines)


def _three(r: dict, kind: str, order: tuple[str, ...]) -> str:
    if kind not in r:
        return "—"
    return " / ".join(f"{r[kind][d]:.3f}" for d in order) + f" ({r[kind]['n']})"


def _cell(r: dict, kind: str) -> str:
    return f"{r[kind][ABSTAIN]:.3f} ({r[kind]['n']})" if kind in r else "—"


def _right(r: dict, key: str) -> str:
    return f"{r[key][0]:.3f} ({r[key][1]})" if r.get(key) else "—"


def report(data: dict[str, list[Example]]) -> str:
    feature_sets = {"full": FEATURES, "lexical (no vectors)": LEXICAL}
    loco = {label: leave_one_out(data, f) for label, f in feature_sets.items()}
    return format_report(loco, feature_sets)
