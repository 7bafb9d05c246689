"""Questions with a typo, offline: each answerable question of the dev sets with two neighbouring
letters swapped inside its longest lowercase word (of 6 letters or more), asked with and without
words.correct_typos. Writes RESULTS.md section typos.

    python bench/typos.py
"""

from __future__ import annotations

import re

import numpy as np
from harness import ROOT, eval_db, table, write_section
from harness import SHARED as EVAL

from bot.evaluation.answers import load_stopwords, sample, split_offtopic, token_scores
from bot.evaluation.retrieval import load_items
from bot.settings import Settings
from bot.wiring import make_pipeline
from index.embedders import make_embedder
from router import reading
from router.answer import ABSTAIN
from router.pipeline import Pipeline
from router.words import TYPO_NOTE

# set folder, questions sampled (None: all), off-topic questions file (None: the set's own)
SETS = {
    "claude-docs": (EVAL / "claude-docs", None, None),
    "openshift-4.15": (EVAL / "openshift-4.15", 100, None),
    "examples": (ROOT / "examples", None, ROOT / "examples" / "offtopic.jsonl"),
}


class NoCorrection(Pipeline):
    """The pipeline as it was before typos were corrected."""

    def typos(self, text, docs, run):
        return reading.read(text)


def with_typo(question: str, kind: str = "swap") -> str | None:
    """The question with a typo in its longest lowercase word: its 2nd and 3rd letters swapped
    ("schedule" -> "scehdule") or its 4th letter dropped ("schdule"); None when it has no such word
    of 6 letters or more."""
    words = [m for m in re.finditer(r"\b[a-z]{6,}\b", question)]
    if not words:
        return None
    m = max(words, key=lambda m: len(m.group()))
    w = m.group()
    typo = w[0] + w[2] + w[1] + w[3:] if kind == "swap" else w[:3] + w[4:]
    return question[: m.start()] + typo + question[m.end() :]


# the share of one-edit typos English counts less often than a word it knows (words.KNOWN_ZIPF)
KNOWN_QUANTILE = 0.995


def fit_known_zipf(question_files) -> tuple[float, int]:
    """words.KNOWN_ZIPF fitted: every one-edit typo (neighbours swapped, a letter dropped) of the
    questions' lowercase words of 3 letters or more that is no word of symspellpy's English
    dictionary, and the KNOWN_QUANTILE quantile of their zipf frequencies; and how many typos."""
    from importlib import resources

    from router.words import zipf

    path = resources.files("symspellpy") / "frequency_dictionary_en_82_765.txt"
    dictionary = {line.split()[0] for line in path.read_text().splitlines() if line.strip()}
    words = {
        w
        for f in question_files
        for q in load_items(f)
        for w in re.findall(r"\b[a-z]{3,}\b", q["question"])
    }
    typos = {w[:i] + w[i + 1] + w[i] + w[i + 2 :] for w in words for i in range(1, len(w) - 1)}
    typos |= {w[:i] + w[i + 1 :] for w in words for i in range(1, len(w))}
    typos = {t for t in typos - words - dictionary if len(t) >= 3}
    return float(np.quantile([zipf(t) for t in typos], KNOWN_QUANTILE)), len(typos)


def offtopic(set_dir, extra) -> list[dict]:
    """The set's off-topic questions (the examples': its own and examples/offtopic.jsonl)."""
    _, off = split_offtopic(load_items(set_dir / "questions.jsonl"))
    return off + load_items(extra or set_dir / "offtopic.jsonl")


def run(pipeline: Pipeline, items: list[dict], stop) -> tuple[float, float, int]:
    abstained, recall, fixed = [], [], 0
    for q in items:
        ans = pipeline.answer(q["question"])
        abstained.append(ans.decision == ABSTAIN)
        recall.append(
            0.0 if ans.decision == ABSTAIN else token_scores(ans.text, q["answer"], stop)[0]
        )
        fixed += any(n.startswith(TYPO_NOTE) for n in ans.trace.notes)
    return float(np.mean(abstained)), float(np.mean(recall)), fixed


def main() -> None:
    from router.words import KNOWN_ZIPF

    files = [d / "questions.jsonl" for d, _, _ in SETS.values()]
    known, n_typos = fit_known_zipf(files)
    print(f"KNOWN_ZIPF fitted {known:.2f} on {n_typos} typos (shipped {KNOWN_ZIPF})", flush=True)
    settings = Settings.load(environ={}, dotenv=None)
    embedder = make_embedder()
    rows = []
    for name, (set_dir, limit, extra) in SETS.items():
        answerable, _ = split_offtopic(load_items(set_dir / "questions.jsonl"))
        items = sample(answerable, limit, 0)
        stop = load_stopwords(set_dir)
        shipped = make_pipeline(settings.at(eval_db(name, embedder)))
        before = NoCorrection(
            shipped.engine, None, shipped.models, shipped.docs_base_url, shipped.deadline
        )
        originals = [q for q in items if with_typo(q["question"])]
        runs = [("as written", shipped, originals)]
        for kind in ("swap", "drop"):
            typod = [q | {"question": with_typo(q["question"], kind)} for q in originals]
            runs += [
                (f"{kind}: not corrected (before)", before, typod),
                (f"{kind}: corrected (after)", shipped, typod),
            ]
        for label, pipeline, questions in runs:
            a, r, n = run(pipeline, questions, stop)
            rows.append([name, label, len(questions), f"{a:.3f}", f"{r:.3f}", n])
            print(*rows[-1], sep=" | ", flush=True)
        # typed in lowercase, a product's name is no longer told from a word by its capital
        off = [
            q | {"question": q["question"].lower(), "answer": ""} for q in offtopic(set_dir, extra)
        ]
        for label, pipeline in (("before", before), ("after", shipped)):
            a, _, n = run(pipeline, off, stop)
            rows.append([name, f"off-topic, lowercased ({label})", len(off), f"{a:.3f}", "—", n])
            print(*rows[-1], sep=" | ", flush=True)
    body = f"""## Questions with a typo (`bench/typos.py`)

`python bench/typos.py` — offline. Each answerable question of the dev sets (claude-docs 100,
openshift-4.15 100 sampled with seed 0, examples 30) that has a lowercase word of 6 letters or
more, with a typo in its longest such word (swap: its 2nd and 3rd letters swapped, "schedule" →
"scehdule"; drop: its 4th letter dropped, "schdule"), asked before and after
`words.correct_typos`: a lowercase word the docs don't know is read, by the noisy channel, as the
likeliest word of the docs or of English (symspellpy) within one edit (two from 8 letters), its
first letter kept. Before, a typo read as a name the docs never mention, and the question was
refused. "corrected": how many answers say
"read … as …". The off-topic questions' decisions as written are unchanged by it (section
answers-eval): their names are capitalised, and a capitalised word is never corrected. Typed in
lowercase, a name can be one edit from a word of the docs ("linkerd" is read as "linked"), which
is what the lowercased off-topic rows measure ("abstain" there is the right response); without
the capital, a name that is an everyday word ("swarm", "flux") is told only by being uncommon
English that the docs never use (its specificity, router/decide.py). A typo in a
path or code word (".dcokercfg", "spec.ipnuts") is left as it is, so those questions still
abstain.

{table(["set", "questions", "n", "abstain", "token recall", "corrected"], rows)}

A word English knows is never read as a typo (`words.KNOWN_ZIPF`, shipped {KNOWN_ZIPF}): of the
{n_typos:,} one-edit typos (neighbours swapped, a letter dropped) of these sets' questions' words
that are no dictionary word, {KNOWN_QUANTILE:.1%} lie below {known:.2f} on wordfreq's zipf scale,
so "git" (3.36) is never "get", while "webhok" (0) is "webhook".
"""
    write_section("typos", body)


if __name__ == "__main__":
    main()
