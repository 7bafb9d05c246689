"""The answer decision fitted and measured leave-one-corpus-out: runs
`fieldguide calibrate` on every eval set here (claude-docs, openshift-4.15, examples and the
real-question sets of bench/sets whose docs are laid out), which writes router/decision.json, and
puts its report in RESULTS.md (section calibration).

    python bench/calibration.py

Takes ~10 min on 2 cores once the sets are indexed (.fieldguide/eval/, as `fieldguide eval`
builds them).
"""

from __future__ import annotations

import subprocess
import sys

from harness import REAL_SETS, ROOT, laid_out, set_dir, write_section


def main() -> None:
    names = ["claude-docs", "openshift-4.15", "examples", *(n for n in REAL_SETS if laid_out(n))]
    sets = [str(set_dir(n)) for n in names]
    cmd = [sys.executable, "-m", "bot.cli", "calibrate", *sets]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    print(out)
    body = f"""## The answer decision, leave one corpus out (`bench/calibration.py`)

`fieldguide calibrate {" ".join(names)}` — offline, local model. For each corpus, the decision is
fitted on the others and measured on it: these are the figures that count. Kinds: answerable
questions (claude-docs 100, openshift-4.15 365, examples 30, fastapi 57, traefik 64, duckdb 57,
chezmoi 74; the last four copied from their users' GitHub threads, 7 each typed as in Slack),
close off-topic ones (30, 30, 25, 21, 22, 23, 20: on the real sets, declined feature requests in
their users' words), answerable ones with their gold sections hidden from the search, and 150
headings per corpus read as questions (as they are, and with their doc hidden; measured, not
fitted on). "right": the top hit is a gold section (openshift: of a gold intent). Three outcomes:
ANSWER, PARTIAL ("I'm not sure the docs answer this; the closest sections are:" and the quotes),
ABSTAIN; the two band edges are those of least stated cost on the training corpora (each corpus
and kind alike): an off-topic question given a plain ANSWER 1, an answerable one refused 0.5, an
answerable one unsure 0.2, an off-topic one unsure 0.1 (bot/evaluation/calibrate.py, COSTS).
router/decision.json is then fitted on all seven.

{out.strip()}

**What changed.** The lexical signals read what the question asks (router/reading.py):
markdown-it-py parses the question as Slack and GitHub render it, and code spans, fenced and
indented blocks, block quotes, a log or trace, and every word with a character no English word has
inside it (paths, versions, "x.x.x", environment variables, identifiers) are the asker's material,
never a topic the docs lack; of the prose, only the sentences that ask count (the first and each
ending in "?"). A contraction is read whole ("shouldn't"). A word the docs never use is `rare`
when English knows it ("Terraform", "Kafka": a subject the docs don't cover) and `unseen` when
English doesn't either (the asker's project or package name as often as a real subject): the fit
weighs the two apart. Before these, the same signals read the whole question (less its pasted
log and values) with `rare` undivided; left out at the same costs they gave (answerable refused /
unsure, off-topic ANSWER) claude-docs 0.020 / 0.450, 0.000; openshift-4.15 0.019 / 0.427, 0.000;
examples 0.067 / 0.800, 0.000; fastapi 0.035 / 0.772, 0.000; traefik 0.078 / 0.500, 0.136;
duckdb 0.140 / 0.649, 0.087; chezmoi 0.081 / 0.676, 0.050. The reading takes refusals on the
real sets from 0.035-0.140 to 0.035-0.054 and examples' from 2 of 30 to 1; the clean sets pay in
unsure answers (claude-docs 0.45 → 0.75), chezmoi in off-topic ANSWER (0.05 → 0.15).

**Bands per question style.** A one-sentence question and a message of several sentences (the
issue pasted with its context) get their own pair of band edges, each of least cost among training
questions of its style: a message's closeness is read through everything around its question. On
one band pair for both, left out, the clean sets' unsure share was 0.75 (claude-docs), 0.78
(openshift-4.15) and 0.97 (examples), the real sets' the same as now.

**Targets, and why some are out of reach.** Left out, answerable questions refused are 0.018-0.068
(≤ 0.03 on the clean sets; on the real sets ≤ 0.05 except chezmoi, 5 of 74) and off-topic
questions given a plain ANSWER 0-0.136 (≤ 0.10 on the clean sets, ≤ 0.15 on the real ones). Unsure
(answerable → PARTIAL) meets its target on claude-docs (0.07) only: openshift-4.15 0.19, examples
0.73, the real sets 0.50-0.84. The AUC lines above say why: on the real sets the signals tell an
answerable question from a close off-topic one at 0.65-0.79 (closeness alone 0.68-0.78; the clean
sets 0.96-1.00): a declined feature request sits as close to the docs as a how-to question about
the same feature. With one decision for every corpus, the costs choose, and the trade-off table
shows the curve: a dearer PARTIAL first refuses answerable questions (PARTIAL 0.3: openshift 0.16,
examples 0.13) and then answers off-topic ones (0.4: traefik 0.59). The stated costs put the doubt
where it is cheapest: the asker still gets the closest sections quoted and cited, under "I'm not
sure", and token recall rises (section answers-eval). Telling these apart needs a reader, not a
closer vector: with a key, Claude's extraction and claim check do it.

Measured and not shipped: the question's length as a signal, alone or times closeness, instead of
bands per style (traefik's off-topic ANSWER 0.41); the best cosine over the
question's sentences one by one (AUC 0.52-0.71 on the real sets, below closeness of the whole);
closeness measured against the corpus's own headings-as-questions (traefik off-topic ANSWER 0.86);
the cosine as a z-score among all of the corpus's chunks (AUC below the raw cosine on six sets of
seven).

**Language.** lingua reads the question without its names, the docs' words that
are no English word ("duckdb") and the asker's material, with the docs' language as the prior
(DOCS_PRIOR 0.5: as likely as every other language together; a script without spaces counted per
character). On the 1,100 questions of the seven sets: with no prior, 6 English questions were read
as another language ("How can seccomp profiles be applied to a pod?" as Italian, "Is there a
Terraform provider for Tidewater?" as Indonesian); with names out and a prior of 0.5, none, and 9
of 9 foreign questions (German, Czech, Spanish, French, Italian, Dutch, Polish, Chinese) are found;
a prior of 0.9 or 0.99 misses the Italian one.
"""
    write_section("calibration", body)


if __name__ == "__main__":
    main()
