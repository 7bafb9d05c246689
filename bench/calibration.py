"""The answer decision fitted and measured leave-one-set-out (issue 24): runs `fieldguide
calibrate` on claude-docs, openshift-4.15 and examples, which writes router/decision.json, and
puts its report in RESULTS.md (section calibration).

    python bench/calibration.py

Takes ~10 min on 2 cores once the three sets are indexed (.fieldguide/eval/, as `fieldguide eval`
builds them).
"""

from __future__ import annotations

import subprocess
import sys

from harness import ROOT, SHARED, write_section

# a worktree under wt/ finds shared/eval two levels up
EVAL = SHARED if SHARED.is_dir() else ROOT.parents[1] / "shared" / "eval"


def main() -> None:
    sets = [str(EVAL / "claude-docs"), str(EVAL / "openshift-4.15"), "examples"]
    cmd = [sys.executable, "-m", "bot.cli", "calibrate", *sets]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    print(out)
    body = f"""## The answer decision, leave one set out (`bench/calibration.py`)

`fieldguide calibrate claude-docs openshift-4.15 examples` — offline, local model. For each set, the
decision is fitted on the two others and measured on it: these are the figures that count. Kinds:
answerable questions (claude-docs 100, openshift-4.15 365, examples 30), close off-topic ones
(30, 30, 25), answerable ones with their gold sections hidden from the search (claude-docs and
examples, whose questions name sections), and 150 headings per set read as questions (as they
are, and with their doc hidden). "right": the top hit is a gold section (openshift: of a gold
intent). The bands come from the training sets' answerable questions (ABSTAIN below their 2%
quantile, PARTIAL below 8%); router/decision.json is then fitted on all three.

{out.strip()}

Pooled over the three left-out sets: answerable abstain 0.028 (14 of 495), off-topic abstain
0.835 (71 of 85). The targets (off-topic >= 0.85 at answerable abstain <= 0.03 on each left-out
set) are met on examples only; the curves above show where each set's own band would have to sit.
Operating point: the band at the training sets' 2% quantile. Measured the same way before the
`missing` signal was weighed by the docs' idf, a band at 1% gave answerable 0.020 / 0.011 / 0.033
and off-topic 0.600 / 0.767 / 1.000 against 0.020 / 0.019 / 0.067 and 0.733 / 0.833 / 1.000 at
2%: 2% is kept, one more answerable question abstained on examples (2 of 30) for 8 of 60 more
close off-topic questions on the two larger sets.

Why not further: the ceiling above. Fitted on claude-docs itself (in-sample, the most these six
signals can separate there), off-topic abstain is 0.80 at answerable abstain 0.03 and reaches 0.87
only at 0.05: the close off-topic questions it answers ("install Claude Code and run it in my
terminal", "Claude's memory tool to keep notes", "generate an image from a text description")
are worded in the docs' own everyday vocabulary, with no word the docs lack, and their nearest
sections are as close as an answerable question's. What tells them apart is whether the section
says the thing asked, which is what Claude's extraction and claim check judge; offline, reaching
0.85 there would take rules for those questions, which is what this decision replaced.

What was measured and not shipped (same protocol, three sets): the share of the question's idf
weight in the top 3 chunks and in the top chunk's headings as signals (left-out answerable abstain
on examples 0.20-0.30: a long question typed as in chat scores low on them); the specificity
1 - zipf/8 of the words the docs lack instead of the hinge below RARE_ZIPF (off-topic 0.53 / 0.50 /
1.00); RARE_ZIPF over 2.5, 3, 3.5, 4, 4.5 (claude-docs off-topic 0.667-0.733, openshift-4.15
0.800-0.833: 4 chosen); the headings as fitting data (claude-docs off-topic 0.733 -> 0.567); a
PARTIAL band between the 2% and 8% quantiles (its answers had the right section on top no less
often than ANSWER's: examples 0.83 vs 0.52, openshift-4.15 0.57 vs 0.75), so there is none; the
meaning a word the docs lack carries, 1 - cos(question, question without the word) with the local
model, as a seventh signal or folded into `rare` (it tells "Rancher" in "install Rancher with Helm"
from "things" in a chat question): left out, because with answerable questions of the two training
sets almost never losing meaning that way its weight is unconstrained and it cost the left-out set
(claude-docs off-topic 0.60-0.67 for 0.70, examples answerable abstain 0.10-0.23 for 0.067).

Whether a single sentence of the top sections says the thing asked, the extractor's own evidence
read before deciding, does not lift the ceiling either: the best unit's cosine (of the 8 units
ranked first by coverage, read with their headings) and the best unit's idf coverage, as signals
beside the six, give left-out answerable / off-topic abstain 0.010/0.700 | 0.022/0.833 |
0.133/1.000 (cosine) and 0.000/0.667 | 0.014/0.800 | 0.133/1.000 (coverage), and claude-docs'
ceiling at answerable 0.03 stays 0.80-0.83. Not shipped.

The two other constants of the signals, chosen the same way (left-out answerable / off-topic
abstain, claude-docs | openshift-4.15 | examples): decide.COMMON_SHARE, the share of chunks above
which a word is the docs' vocabulary and not part of a name, at 0.03: 0.010/0.567 | 0.025/0.833 |
0.067/1.000; 0.1: 0.010/0.700 | 0.030/0.833 | 0.067/1.000; 0.3: 0.040/0.700 | 0.019/0.767 |
0.033/0.960 (0.1 kept). words.ROOT_INSIDE, the shortest stem looked for inside the docs'
identifiers, 4 to 7: identical figures on the three sets (no question of theirs turns on it); 6
is kept so that a short stem ("pay", "run") is not found inside some long identifier by chance.
"""
    write_section("calibration", body)


if __name__ == "__main__":
    main()
