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

Each example is read the way `ask` reads a question (condense.plain, typos, embedding, the unrouted
hybrid search the offline router uses, decide.signals). A logistic regression (L2, Newton's method)
is fitted on the standardised signals, each corpus and label weighing alike. The bands come from
the training corpora's answerable questions: ABSTAIN below the ABSTAIN_SHARE quantile of their p
(the lowest over the training corpora, so each keeps its answerable abstain under it), PARTIAL
below the PARTIAL_SHARE quantile, and with Claude only below CLAUDE_SHARE.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from router import condense, decide, words
from router.decide import FEATURES, LEXICAL, Model

from .answers import split_offtopic
from .retrieval import load_items, matches

# PARTIAL was fitted as the band between the 2% and 8% quantiles and measured leave-one-set-out:
# its answers had the right section on top no less often than ANSWER's (examples 0.83 vs 0.52,
# openshift-4.15 0.57 vs 0.75, claude-docs 1 of 1), so the offline decision has no PARTIAL band:
# a loose match is no sign of a worse answer. PARTIAL comes from Claude's checks alone.
ABSTAIN_SHARE, PARTIAL_SHARE, CLAUDE_SHARE = 0.02, 0.02, 0.005
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
    searcher = engine.loaded().searcher
    records = searcher.fetch(list(range(searcher.size)))
    by_doc: dict[str, list[int]] = {}
    for row, rec in enumerate(records):
        by_doc.setdefault(rec["doc"], []).append(row)
    answerable, offtopic = split_offtopic(items)
    out: list[Example] = []

    def read(q: str, kind: str, label: int, hide: list[int], gold: list[dict], intents: list[str]):
        text, _ = words.correct_typos(condense.plain(q), searcher)
        vec, _ = engine.embed_query(text)
        exclude = np.array(sorted(hide), dtype=np.int64)
        hits = searcher.search(text, vec, k=10, exclude=exclude)
        top = hits[0].chunk if hits else {}
        right = bool(top) and (
            any(matches(top, g) for g in gold) if gold else top["intent"] in intents
        )
        out.append(Example(name, kind, label, decide.signals(text, vec, hits, searcher), right, q))

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
    real: dict[str, list[float]] = {}
    near: dict[str, list[float]] = {}
    for e in examples:
        if e.kind == "question":
            real.setdefault(e.corpus, []).append(model.p(e.signals))
            near.setdefault(e.corpus, []).append(model.p(e.signals, near_only=True))
    lowest = lambda ps, q: min(float(np.quantile(p, q)) for p in ps.values())  # noqa: E731
    model.bands = {
        "claude": lowest(near, CLAUDE_SHARE),
        "partial": lowest(real, ABSTAIN_SHARE),
        "answer": lowest(real, PARTIAL_SHARE),
    }
    return model


def rates(model: Model, examples: list[Example]) -> dict:
    """What the model decides on one corpus: the shares of each kind abstained, PARTIAL on the
    answerable questions, and how often ANSWER and PARTIAL have the right section on top."""
    verdict = {id(e): decide.decide(e.signals, model, "").decision for e in examples}
    out: dict = {}
    for kind in ("question", "offtopic", "hidden", "heading", "heading_hidden"):
        of = [e for e in examples if e.kind == kind]
        if of:
            out[kind] = {"n": len(of), "abstain": _share(of, verdict, decide.ABSTAIN)}
    asked = [e for e in examples if e.kind == "question"]
    out["question"]["partial"] = _share(asked, verdict, decide.PARTIAL)
    for band in (decide.ANSWER, decide.PARTIAL):
        got = [e.right for e in asked if verdict[id(e)] == band]
        out[f"right_{band.lower()}"] = (round(sum(got) / len(got), 3), len(got)) if got else None
    return out


def _share(of: list[Example], verdict: dict, decision: str) -> float:
    return round(sum(verdict[id(e)] == decision for e in of) / len(of), 3)


def curve(model: Model, examples: list[Example]) -> list[tuple[float, float, float]]:
    """(abstain band, answerable abstain, off-topic abstain) as the abstain band moves."""
    p_real = [model.p(e.signals) for e in examples if e.kind == "question"]
    p_off = [model.p(e.signals) for e in examples if e.kind == "offtopic"]
    points = []
    for q in (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15):
        band = float(np.quantile(p_real, q)) if q else 0.0
        points.append(
            (
                round(band, 3),
                round(float(np.mean([p < band for p in p_real])), 3),
                round(float(np.mean([p < band for p in p_off])), 3) if p_off else float("nan"),
            )
        )
    return points


def leave_one_out(data: dict[str, list[Example]], features: tuple[str, ...]) -> dict:
    """Fit on every corpus but one, measure on that one; "ceiling": the curve of a model fitted on
    that corpus itself (in-sample, so an upper bound of what these signals can separate there,
    not a figure to report)."""
    out = {}
    for held in data:
        train = [e for name, ex in data.items() if name != held for e in ex]
        model = fit(train, features)
        out[held] = {
            "rates": rates(model, data[held]),
            "curve": curve(model, data[held]),
            "ceiling": curve(fit(data[held], features), data[held]),
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
    decide.load_models.cache_clear()
    return body


def check_sets(sets: dict[str, list[dict]]) -> None:
    """ValueError saying what is missing when these sets (name → their question items) are not
    enough to fit on: a set without answerable or off-topic questions, or fewer than
    EVENTS_PER_SIGNAL per signal of either label altogether (answerable; off-topic, and
    answerable ones whose gold sections are hidden)."""
    problems, yes, no = [], 0, 0
    for name, items in sets.items():
        answerable, offtopic = split_offtopic(items)
        problems += [f"{name} has no answerable questions"] if not answerable else []
        problems += [f"{name} has no off-topic questions"] if not offtopic else []
        yes += len(answerable)
        no += len(offtopic) + sum(any(g.get("doc") for g in q["gold"]) for q in answerable)
    need = EVENTS_PER_SIGNAL * len(FEATURES)
    if yes < need or no < need:
        problems.append(
            f"a fit needs at least {need} answerable questions and {need} that the docs do not"
            f" answer (off-topic ones, and answerable ones with gold sections to hide), ten per"
            f" signal; these sets have {yes} answerable and {no}"
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
    """The leave-one-corpus-out tables (figures of the left-out corpus only) and the trade-off
    curve of each left-out corpus."""
    lines = []
    for label in feature_sets:
        lines += [
            f"**{label}** (`{', '.join(feature_sets[label])}`)",
            "",
            "| left out | answerable abstain | PARTIAL | off-topic abstain | gold hidden abstain"
            " | headings hidden abstain | right when ANSWER | right when PARTIAL |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for held, res in loco[label].items():
            r = res["rates"]
            lines.append(
                f"| {held} | {_cell(r, 'question')} | {r['question']['partial']:.3f} | "
                f"{_cell(r, 'offtopic')} | {_cell(r, 'hidden')} | {_cell(r, 'heading_hidden')} | "
                f"{_right(r, 'right_answer')} | {_right(r, 'right_partial')} |"
            )
        lines.append("")
    lines += [
        "Trade-off on each left-out corpus (full model): the abstain band moved over quantiles of"
        " the corpus's own answerable p (band, answerable abstain, off-topic abstain):",
        "",
    ]
    first = next(iter(feature_sets))
    for held, res in loco[first].items():
        pts = ", ".join(f"({b:.3f}: {a:.2f} / {o:.2f})" for b, a, o in res["curve"])
        lines.append(f"- {held}: {pts}")
    lines += [
        "",
        "The ceiling of these signals (full model): each corpus fitted on itself, in-sample, the"
        " same curve (answerable abstain / off-topic abstain):",
        "",
    ]
    for held, res in loco[first].items():
        pts = ", ".join(f"{a:.2f} / {o:.2f}" for _, a, o in res["ceiling"][1:])
        lines.append(f"- {held}: {pts}")
    return "\n".join(lines)


def _cell(r: dict, kind: str) -> str:
    return f"{r[kind]['abstain']:.3f} ({r[kind]['n']})" if kind in r else "—"


def _right(r: dict, key: str) -> str:
    return f"{r[key][0]:.3f} ({r[key][1]})" if r.get(key) else "—"


def report(data: dict[str, list[Example]]) -> str:
    feature_sets = {"full": FEATURES, "lexical (no vectors)": LEXICAL}
    loco = {label: leave_one_out(data, f) for label, f in feature_sets.items()}
    return format_report(loco, feature_sets)
