"""`fieldguide eval SET --answers`: the whole `ask` path scored at the answer level, by the rules of
docs/quality.md ("Eval sets: the format"): abstain / PARTIAL rates on answerable questions,
token recall and precision against the reference answer, share of answers citing a gold doc,
abstain rate on off-topic questions, median answer length and latency, each rate with a seeded
bootstrap 95% interval."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from router.answer import ABSTAIN, ANSWER, PARTIAL, Answer

WORD = re.compile(r"[a-z0-9]+")
# the eval set's stopword list (shared/eval/stopwords.txt); a copy ships with the package so the
# figures can be computed on a set that doesn't carry one
SHIPPED_STOPWORDS = Path(__file__).with_name("eval_stopwords.txt")
BOOTSTRAP_ROUNDS = 1000


def load_stopwords(set_dir: str | Path | None = None) -> frozenset[str]:
    """The set's own stopwords.txt (beside the set, as in shared/eval/), else the shipped copy."""
    path = SHIPPED_STOPWORDS
    if set_dir is not None:
        for candidate in (Path(set_dir) / "stopwords.txt", Path(set_dir).parent / "stopwords.txt"):
            if candidate.is_file():
                path = candidate
                break
    return frozenset(w.strip().lower() for w in path.read_text().split() if w.strip())


def content_words(text: str, stopwords: frozenset[str]) -> list[str]:
    """Lowercase [a-z0-9]+ tokens longer than 2 characters, stopwords left out (repeats kept)."""
    return [t for t in WORD.findall(text.lower()) if len(t) > 2 and t not in stopwords]


def token_scores(text: str, reference: str, stopwords: frozenset[str]) -> tuple[float, float]:
    """(recall, precision): the share of the reference's content-word tokens that occur in the
    answer, and the share of the answer's that occur in the reference (token by token, as the
    README's baseline figures were computed)."""
    ans, ref = content_words(text, stopwords), content_words(reference, stopwords)
    in_ans, in_ref = set(ans), set(ref)
    recall = sum(t in in_ans for t in ref) / len(ref) if ref else 0.0
    precision = sum(t in in_ref for t in ans) / len(ans) if ans else 0.0
    return recall, precision


def split_offtopic(items: list[dict]) -> tuple[list[dict], list[dict]]:
    """(answerable, off-topic): a question with no intents and no reference answer is off-topic
    (examples/questions.jsonl keeps its off-topic questions beside the others)."""
    off = [q for q in items if not q["intents"] and not q["gold"] and not q["answer"]]
    return [q for q in items if q not in off], off


def sample(items: list[dict], limit: int | None, seed: int) -> list[dict]:
    """`limit` items drawn without replacement with a fixed seed (all of them when None), in
    file order."""
    if limit is None or limit >= len(items):
        return items
    keep = set(random.Random(seed).sample(range(len(items)), limit))
    return [q for i, q in enumerate(items) if i in keep]


def bootstrap(values: list[float], seed: int, rounds: int = BOOTSTRAP_ROUNDS) -> list[float]:
    """95% percentile bootstrap interval of the mean."""
    if not values:
        return [0.0, 0.0]
    a = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = a[rng.integers(0, a.size, size=(rounds, a.size))].mean(axis=1)
    return [round(float(np.percentile(means, 2.5)), 3), round(float(np.percentile(means, 97.5)), 3)]


def _item(q: dict, ans: Answer) -> dict:
    return {
        "id": q["id"],
        "question": q["question"],
        "decision": ans.decision,
        "text": ans.text,
        "sources": [{"doc": s.doc, "section": s.section, "url": s.url} for s in ans.sources],
        "citations": [
            {"source": c.source, "cited_text": c.cited_text, "verified": c.verified}
            for c in ans.citations
        ],
        "timings_ms": ans.trace.timings_ms,
        "evidence": ans.trace.evidence,
        # what Claude read (its first read, each second look), for bench/keyed.py
        "read": ans.trace.route.get("read", []),
        "looks": ans.trace.route.get("looks", []),
        "asked_to_look": ans.trace.route.get("asked_to_look", False),
        "rewritten": ans.trace.route.get("rewritten"),  # router/review.py, for bench/keyed.py
        "usage": ans.trace.usage,  # what each Claude step was billed, for bench/keyed.py
        "offline": ans.trace.offline,
        "caveat": ans.caveat,
        "notes": ans.trace.notes,  # a fallback, the claim check's findings, a re-citation
    }


def run_answers(
    ask: Callable[[str], Answer],
    questions: list[dict],
    offtopic: list[dict],
    stopwords: frozenset[str],
    seed: int = 0,
    progress: Callable[[int], object] | None = None,
    judge: Callable[[str, str, Answer], dict] | None = None,
) -> dict:
    """Ask every question through `ask` and score the answers; with `judge` (bot/evaluation/
    judge.py), each answer to a question with a reference answer is graded too (an abstention
    is not asked about: it is incorrect and has nothing to be faithful to)."""
    answers, off = [], []
    for q in questions:
        ans = ask(q["question"])
        item = _item(q, ans)
        recall, precision = token_scores(ans.text, q["answer"], stopwords)
        abstained = ans.decision == ABSTAIN
        item["recall"] = 0.0 if abstained else round(recall, 3)
        item["precision"] = None if abstained else round(precision, 3)
        if judge is not None and q["answer"]:
            item["judge"] = (
                {"faithfulness": None, "correctness": 0.0, "grades": ["abstained"]}
                if abstained
                else judge(q["question"], q["answer"], ans)
            )
        if q["gold"]:
            gold_docs = {g["doc"] for g in q["gold"]}
            item["gold_cited"] = any(s.doc in gold_docs for s in ans.sources) and not abstained
        answers.append(item)
        if progress:
            progress(1)
    for q in offtopic:
        off.append(_item(q, ask(q["question"])))
        if progress:
            progress(1)
    return {"summary": summarise(answers, off, seed), "answers": answers, "offtopic": off}


def _rate(values: list[float], seed: int) -> dict:
    return {
        "value": round(float(np.mean(values)), 3) if values else None,
        "ci95": bootstrap(values, seed),
        "n": len(values),
    }


def summarise(answers: list[dict], offtopic: list[dict], seed: int = 0) -> dict:
    answered = [a for a in answers if a["decision"] != ABSTAIN]
    ms = [a["timings_ms"].get("total", 0.0) for a in answers + offtopic]
    with_ref = [a for a in answers if a.get("recall") is not None]
    out = {
        "questions": len(answers),
        "offtopic_questions": len(offtopic),
        "abstain": _rate([float(a["decision"] == ABSTAIN) for a in answers], seed),
        "partial": _rate([float(a["decision"] == PARTIAL) for a in answers], seed),
        "token_recall": _rate([a["recall"] for a in with_ref], seed),
        "token_precision": _rate([a["precision"] for a in answered], seed),
        "gold_cited": _rate([float(a["gold_cited"]) for a in answers if "gold_cited" in a], seed),
        "offtopic_abstain": _rate([float(a["decision"] == ABSTAIN) for a in offtopic], seed),
        "offtopic_partial": _rate([float(a["decision"] == PARTIAL) for a in offtopic], seed),
        "offtopic_answer": _rate([float(a["decision"] == ANSWER) for a in offtopic], seed),
        "median_chars": int(np.median([len(a["text"]) for a in answered])) if answered else None,
        "p50_ms": round(float(np.percentile(ms, 50)), 1) if ms else None,
        "p95_ms": round(float(np.percentile(ms, 95)), 1) if ms else None,
    }
    judged = [a["judge"] for a in answers if "judge" in a]
    if judged:
        graded = [j for j in judged if "error" not in j]
        faithful = [j["faithfulness"] for j in graded if j["faithfulness"] is not None]
        out["judge_faithfulness"] = _rate(faithful, seed)
        out["judge_correctness"] = _rate([j["correctness"] for j in graded], seed)
        out["judge_failed"] = len(judged) - len(graded)
    return out


RATES = (
    ("abstain", "answerable refused (ABSTAIN)"),
    ("partial", "answerable unsure (PARTIAL)"),
    ("offtopic_answer", "off-topic given a plain ANSWER"),
    ("offtopic_partial", "off-topic PARTIAL"),
    ("offtopic_abstain", "off-topic abstain"),
    ("token_recall", "token recall"),
    ("token_precision", "token precision"),
    ("gold_cited", "gold cited"),
)


def format_summary(name: str, s: dict) -> str:
    """A plain table of the summary, one line a figure."""
    lines = [
        f"{name}: {s['questions']} answerable questions, {s['offtopic_questions']} off-topic",
        "",
        "| figure | value | 95% CI | n |",
        "|---|---|---|---|",
    ]
    judged = (
        ("judge_faithfulness", "judged faithfulness"),
        ("judge_correctness", "judged correctness"),
    )
    for key, label in RATES + (judged if "judge_correctness" in s else ()):
        r = s[key]
        if r["value"] is None:
            lines.append(f"| {label} | — | — | 0 |")
        else:
            lo, hi = r["ci95"]
            lines.append(f"| {label} | {r['value']:.3f} | {lo:.3f}–{hi:.3f} | {r['n']} |")
    if s.get("judge_failed"):
        lines.append(f"| answers the judge could not grade | {s['judge_failed']} | | |")
    lines.append(f"| median answer chars | {s['median_chars']} | | |")
    lines.append(f"| p50 / p95 ms | {s['p50_ms']} / {s['p95_ms']} | | |")
    return "\n".join(lines)
