"""`fieldguide eval SET --answers` on every eval set, offline: the three outcomes (answerable
refused / unsure, off-topic given a plain ANSWER), token recall / precision and length before and
after the shipped decision replaced the two-outcome one, written to RESULTS.md (section
answers-eval) and bench/answers-SET.json.

    python bench/answers_eval.py            # run every set whose docs are here
    python bench/answers_eval.py --reuse    # re-read the JSON files only

claude-docs: all 100 questions + its 30 off-topic ones; openshift-4.15: 100 questions sampled with
seed 0 + its 30 off-topic ones; examples: its 30 answerable questions, its own 5 off-topic ones and
examples/offtopic.jsonl (20); the real-question sets (bench/sets, when their docs are laid out as
their SOURCE.md says): all their questions. BEFORE (bench/answers-before.json): the same command on
the code before the change.
"""

from __future__ import annotations

import json
import subprocess
import sys

from harness import QUESTION_SETS, ROOT, SHARED, laid_out, set_dir, table, write_section

RUNS = {
    "claude-docs": [str(SHARED / "claude-docs")],
    "openshift-4.15": [str(SHARED / "openshift-4.15"), "--limit", "100", "--seed", "0"],
    "examples": ["examples"],
} | {name: [str(set_dir(name))] for name in QUESTION_SETS if laid_out(name)}
COLUMNS = [
    "answerable refused",
    "answerable unsure",
    "off-topic ANSWER",
    "off-topic abstain",
    "token recall",
    "token precision",
    "gold cited",
    "median chars",
    "p50 / p95 ms",
]
RATES = (
    "abstain",
    "partial",
    "offtopic_answer",
    "offtopic_abstain",
    "token_recall",
    "token_precision",
    "gold_cited",
)


def row(name: str, when: str, s: dict) -> list:
    def rate(key: str) -> str:
        r = s.get(key)
        if not r or r["value"] is None:
            return "—"
        lo, hi = r["ci95"]
        return f"{r['value']:.3f} ({lo:.2f}–{hi:.2f})"

    return [
        name,
        when,
        *(rate(k) for k in RATES),
        s["median_chars"],
        f"{s['p50_ms']:.0f} / {s['p95_ms']:.0f}",
    ]


def main() -> None:
    before = json.loads((ROOT / "bench" / "answers-before.json").read_text())
    rows = []
    results = {}
    for name, args in RUNS.items():
        out = ROOT / "bench" / f"answers-{name}.json"
        cmd = [sys.executable, "-m", "bot.cli", "eval", *args, "--answers", "--output", str(out)]
        if "--reuse" not in sys.argv or not out.exists():  # --reuse: the outputs already there
            subprocess.run(cmd, cwd=ROOT, check=True, env={"PATH": "/usr/bin:/bin"})
        results[name] = json.loads(out.read_text())
        after = results[name]["summary"]
        rows += [row(name, "before", before[name])] if name in before else []
        rows += [row(name, "after", after)]
    body = f"""## Answers, evaluated (`fieldguide eval SET --answers`)

`python bench/answers_eval.py` — the whole `ask` path offline (local model), scored as
shared/eval/README.md says (token recall / precision against the reference answer, stopwords of
shared/eval). Rates with a seeded bootstrap 95% interval. claude-docs: 100 questions + 30 off-topic;
openshift-4.15: 100 questions sampled with seed 0 + 30 off-topic; examples: 30 questions + 25
off-topic (its own 5 and examples/offtopic.jsonl); fastapi, traefik, duckdb, chezmoi and the check
sets uv and mise: every question (bench/sets). Before: the two-outcome decision (two outcomes
offline, fitted on the three clean sets); after: the shipped one (the question's reading, three
outcomes, bands by cost, fitted on all seven sets). Every set but uv and mise is calibration data
of the shipped decision, so their decision rates are in-sample: the figures that count are the
left-out ones of the section "calibration", and uv's and mise's, whose questions nothing was
fitted on. What this table adds: token recall / precision, gold cited and length, which the
decision does not fit. Full answers: bench/answers-SET.json.

{table(["set", "code", *COLUMNS], rows)}
"""
    write_section("answers-eval", body)


if __name__ == "__main__":
    main()
