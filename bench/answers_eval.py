"""`fieldguide eval SET --answers` on the dev sets, offline: the answer-level figures before and
after the calibrated decision (issue 24), written to RESULTS.md (section answers-eval) and
bench/answers-SET.json.

    python bench/answers_eval.py

claude-docs: all 100 questions + its 30 off-topic ones; openshift-4.15: 100 questions sampled with
seed 0 + its 30 off-topic ones; examples: its 30 answerable questions, its own 5 off-topic ones and
examples/offtopic.jsonl (20). The BEFORE figures (bench/answers-before.json) were measured with the
same command on the code before the change (commit 30a8556).
"""

from __future__ import annotations

import json
import subprocess
import sys

from harness import ROOT, SHARED, table, write_section

# a worktree under wt/ finds shared/eval two levels up
EVAL = SHARED if SHARED.is_dir() else ROOT.parents[1] / "shared" / "eval"
RUNS = {
    "claude-docs": [str(EVAL / "claude-docs")],
    "openshift-4.15": [
        str(EVAL / "openshift-4.15"),
        "--limit",
        "100",
        "--seed",
        "0",
    ],
    "examples": ["examples"],
}
COLUMNS = [
    "answerable abstain",
    "PARTIAL",
    "off-topic abstain",
    "token recall",
    "token precision",
    "gold cited",
    "median chars",
    "p50 / p95 ms",
]


def row(name: str, when: str, s: dict) -> list:
    def rate(key: str) -> str:
        r = s[key]
        if r["value"] is None:
            return "—"
        lo, hi = r["ci95"]
        return f"{r['value']:.3f} ({lo:.2f}–{hi:.2f})"

    return [
        name,
        when,
        *(
            rate(k)
            for k in (
                "abstain",
                "partial",
                "offtopic_abstain",
                "token_recall",
                "token_precision",
                "gold_cited",
            )
        ),
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
        if "--reuse" not in sys.argv:
            subprocess.run(cmd, cwd=ROOT, check=True, env={"PATH": "/usr/bin:/bin"})
        results[name] = json.loads(out.read_text())
        after = results[name]["summary"]
        rows += [row(name, "before", before[name]), row(name, "after", after)]
    body = f"""## Answers, evaluated (`fieldguide eval SET --answers`)

`python bench/answers_eval.py` — the whole `ask` path offline (local model), scored as
shared/eval/README.md says (token recall / precision against the reference answer, stopwords of
shared/eval). Rates with a seeded bootstrap 95% interval. claude-docs: 100 questions + 30
off-topic; openshift-4.15: 100 questions sampled with seed 0 + 30 off-topic; examples: 30
questions + 25 off-topic (its own 5 and examples/offtopic.jsonl). Before: the rule-based decision
(commit 30a8556); after: the calibrated one (router/decision.json, `fieldguide calibrate`, whose
leave-one-set-out figures are in the section "calibration"). These sets are also the calibration
data, so their figures here are in-sample. Latency: "before" was taken on the 2-core machine
under load from other jobs, "after" with nothing else running (with the test suite running beside
it, the after p50 was 87 / 146 / 61 ms). Full answers: bench/answers-SET.json.

{table(["set", "code", *COLUMNS], rows)}
"""
    write_section("answers-eval", body)


if __name__ == "__main__":
    main()
