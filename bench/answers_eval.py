"""`fieldguide eval SET --answers` on the dev sets, offline: the answer-level figures before and
after issue 11, written to RESULTS.md (section answers-eval) and bench/answers-SET.json.

    python bench/answers_eval.py

claude-docs: all 100 questions + its 30 off-topic ones; openshift-4.15: 100 questions sampled with
seed 0 + its 30 off-topic ones; examples: its 30 answerable questions, its own 5 off-topic ones and
bench/offtopic.jsonl (20). The BEFORE figures (bench/answers-before.json) were measured with the
same command on the code before the change (commit 51591ac).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
from harness import ROOT, SHARED, table, write_section

from router.decide import (
    FULL_COVERAGE,
    FULL_SIMILARITY,
    HEADING_COVERAGE,
    TOPIC_SHARE,
    TOPIC_SIMILARITY,
)

# a worktree under wt/ finds shared/eval two levels up
EVAL = SHARED if SHARED.is_dir() else ROOT.parents[1] / "shared" / "eval"
RUNS = {
    "claude-docs": [str(EVAL / "claude-docs"), "--db", ".fieldguide/eval/claude-docs.db"],
    "openshift-4.15": [
        str(EVAL / "openshift-4.15"),
        "--db",
        ".fieldguide/eval/openshift-4.15.db",
        "--limit",
        "100",
        "--seed",
        "0",
    ],
    "examples": ["examples", "--offtopic", "bench/offtopic.jsonl"],
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


def _abstains(items: list[dict], s: float, c: float, w: float) -> float:
    """The share of items the closeness rule (+ unknown names, + the subject check, the heading
    and full-coverage exceptions as shipped) abstains on, from their evidence."""
    out = []
    for a in items:
        e = a["evidence"]
        sim, cov = e.get("similarity") or 0.0, e.get("coverage") or 0.0
        subject = e.get("topic_share", 0.0) >= TOPIC_SHARE and sim < TOPIC_SIMILARITY
        spared = e.get("heading_coverage", 0.0) >= HEADING_COVERAGE or (
            cov >= FULL_COVERAGE and sim >= FULL_SIMILARITY
        )
        close = not spared and (sim < s or (cov < c and sim < w))
        out.append(bool(e.get("unknown_terms")) or subject or close)
    return float(np.mean(out)) if out else 0.0


def leave_one_set_out(results: dict[str, dict]) -> list[list]:
    """Tune the three closeness thresholds on two sets (answerable abstain <= 0.035 on each,
    most off-topic abstained), report them on the third: how far tuning them would carry."""
    grid = list(
        itertools.product(
            np.arange(0.30, 0.50, 0.01), np.arange(0.10, 0.60, 0.025), np.arange(0.40, 0.66, 0.02)
        )
    )
    rows = []
    for held in [*results, None]:
        train = [n for n in results if n != held]
        best = None
        for s, c, w in grid:
            rates = [
                (
                    _abstains(results[n]["answers"], s, c, w),
                    _abstains(results[n]["offtopic"], s, c, w),
                )
                for n in train
            ]
            if all(a <= 0.035 for a, _ in rates):
                score = float(np.mean([o for _, o in rates])) - 0.001 * (s + c + w)
                if best is None or score > best[0]:
                    best = (score, s, c, w)
        # no thresholds meet the bound on both (the names check alone exceeds it): the shipped ones
        _, s, c, w = best or (0.0, 0.36, 0.2, 0.45)
        for n in [held] if held else list(results):
            rows.append(
                [
                    f"{held or 'none (all three)'}",
                    f"{s:.2f} / {c:.3f} / {w:.2f}",
                    n,
                    f"{_abstains(results[n]['answers'], s, c, w):.3f}",
                    f"{_abstains(results[n]['offtopic'], s, c, w):.3f}",
                ]
            )
    return rows


def _subject_abstains(items: list[dict], share: float, sim: float) -> float:
    """The share of items abstained on with the subject check at (share, sim): the other reasons
    as recorded, plus a topic share >= `share` with a cosine < `sim`."""
    out = []
    for a in items:
        e = a["evidence"]
        other = a["decision"] == "ABSTAIN" and not e.get("topic_gaps")
        loose = (e.get("similarity") or 0.0) < sim
        out.append(other or (e.get("topic_share", 0.0) >= share and loose))
    return float(np.mean(out)) if out else 0.0


def leave_one_set_out_subject(results: dict[str, dict]) -> list[list]:
    """The subject check's two thresholds (decide.TOPIC_SHARE, TOPIC_SIMILARITY) tuned on two sets
    (answerable abstain <= 0.035 on each, most off-topic abstained; ties: the higher share, then
    the lower cosine), reported on the third."""
    grid = list(itertools.product(np.arange(0.15, 0.41, 0.05), np.arange(0.50, 0.71, 0.05)))
    rows = []
    for held in [*results, None]:
        train = [n for n in results if n != held]
        best = None
        for share, sim in grid:
            rates = [
                (
                    _subject_abstains(results[n]["answers"], share, sim),
                    _subject_abstains(results[n]["offtopic"], share, sim),
                )
                for n in train
            ]
            if all(a <= 0.035 for a, _ in rates):
                key = (round(float(np.mean([o for _, o in rates])), 6), share, -sim)
                if best is None or key > best[0]:
                    best = (key, share, sim)
        _, share, sim = best or (None, 0.25, 0.6)
        for n in [held] if held else list(results):
            rows.append(
                [
                    f"{held or 'none (all three)'}",
                    f"{share:.2f} / {sim:.2f}",
                    n,
                    f"{_subject_abstains(results[n]['answers'], share, sim):.3f}",
                    f"{_subject_abstains(results[n]['offtopic'], share, sim):.3f}",
                ]
            )
    return rows


def main() -> None:
    before = json.loads((ROOT / "bench" / "answers-before.json").read_text())
    rows = []
    results = {}
    for name, args in RUNS.items():
        out = ROOT / "bench" / f"answers-{name}.json"
        cmd = [sys.executable, "-m", "bot.cli", "eval", *args, "--answers", "--json", str(out)]
        if "--reuse" not in sys.argv:
            subprocess.run(cmd, cwd=ROOT, check=True, env={"PATH": "/usr/bin:/bin"})
        results[name] = json.loads(out.read_text())
        after = results[name]["summary"]
        rows += [row(name, "before", before[name]), row(name, "after", after)]
    loso = leave_one_set_out(results)
    loso_subject = leave_one_set_out_subject(results)
    body = f"""## Answers, evaluated (`fieldguide eval SET --answers`)

`python bench/answers_eval.py` — the whole `ask` path offline (local model), scored as
shared/eval/README.md says (token recall / precision against the reference answer, stopwords of
shared/eval). Rates with a seeded bootstrap 95% interval. claude-docs: 100 questions + 30
off-topic; openshift-4.15: 100 questions sampled with seed 0 + 30 off-topic; examples: 30
questions + 25 off-topic (its own 5 and bench/offtopic.jsonl). Before: the code before issue 11.
Latency is on a shared 2-core machine under load from other jobs (see the answers section for a
quiet run). Full answers: bench/answers-SET.json.

{table(["set", "code", *COLUMNS], rows)}

The closeness thresholds (cosine < S abstains; idf coverage < C with cosine < W abstains) were
kept as calibrated before (0.36 / 0.2 / 0.45); the names check is what moved off-topic abstention
(its second round: a word neither in the docs nor everyday English, such as "ztunnel", "doctl",
"rerank", and a version beside its name, "Claude Opus 4", took claude-docs from 0.633 to 0.767 and
openshift from 0.800 to 0.867; it cost one openshift question, "'buckethost'", a word the docs
write apart, "bucket host", until decide.spelt_apart read such a word as the docs write it).
The subject check (decide.topic_gaps, below) took claude-docs from 0.767 to 0.900 and openshift
from 0.867 to 0.933, at one claude-docs answerable question ("... to influence Claude's
response?").
Two exceptions to the closeness abstention are for short questions, which these sets hardly have:
a top section whose headings carry >= 80% of the question's idf weight goes ahead ("What models
are available?" under "List available models", cosine 0.31, abstained before), and a question all
of whose words are in the top 3 chunks is PARTIAL down to a cosine of 0.30 ("what is idempotency
key", 0.34). On these sets they move one answerable openshift question ("... Domain mapping
option ...", cosine 0.35) out of abstention and no off-topic question.
Leave one set out: the thresholds tuned on the two other sets (answerable abstain <= 0.035 on each,
off-topic abstain as high as possible), reported on the held-out set, from the evidence recorded in
the JSONs above (the language check left out; the names and subject checks and the two exceptions
as shipped, the subject check unknown, so not counted, where the shipped closeness thresholds
abstained first). Tuning them buys little and does not carry over:

{
        table(
            [
                "held out",
                "S / C / W tuned on the others",
                "reported on",
                "answerable abstain",
                "off-topic abstain",
            ],
            loso,
        )
    }

The subject check (decide.topic_gaps: a loose match whose top 3 chunks lack a word the docs seldom
use, carrying >= 25% of the question's idf weight, abstains; shipped at share 0.25, cosine < 0.6)
left one set out the same way, from the topic share recorded for each question (the closeness
thresholds as shipped). Its thresholds sit at an edge: tuned without openshift, a lower share is
chosen that costs openshift answerable questions on everyday words the docs seldom use.

{
        table(
            [
                "held out",
                "share / cosine tuned on the others",
                "reported on",
                "answerable abstain",
                "off-topic abstain",
            ],
            loso_subject,
        )
    }
"""
    write_section("answers-eval", body)


if __name__ == "__main__":
    main()
