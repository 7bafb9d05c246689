"""End to end offline: `fieldguide ask`'s per-stage median ms on the claude-docs questions, and the
abstention rate on them and on 20 off-topic questions (examples/offtopic.jsonl); then the ask p50
with the reader and without it (router/reader/score.py), one process, question by question in
turn (issue 45).

    python bench/answers.py
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from harness import ROOT, SHARED, eval_db, table, write_section

from bot.evaluation.retrieval import load_questions
from bot.settings import Settings
from bot.wiring import make_pipeline
from index.embedders import make_embedder
from router.reader.score import READ_K


def main() -> None:
    embedder = make_embedder()
    db = eval_db("claude-docs", embedder)
    pipeline = make_pipeline(Settings.load(environ={}, dotenv=None).at(db))
    pipeline.answer("warm up: load the model and the index")
    rows, stage_rows = [], {}
    for name, path in (
        ("claude-docs questions", SHARED / "claude-docs" / "questions.jsonl"),
        ("off-topic questions", ROOT / "examples" / "offtopic.jsonl"),
    ):
        answers = [pipeline.answer(q.question) for q in load_questions(path)]
        decisions = Counter(a.decision for a in answers)
        rows.append(
            [
                name,
                len(answers),
                decisions["ANSWER"],
                decisions["PARTIAL"],
                decisions["ABSTAIN"],
                f"{decisions['ABSTAIN'] / len(answers):.0%}",
            ]
        )
        if name.startswith("claude"):
            for stage in answers[0].trace.timings_ms:
                stage_rows[stage] = float(
                    np.median([a.trace.timings_ms.get(stage, 0.0) for a in answers])
                )
    print(rows, stage_rows)
    questions = [q.question for q in load_questions(SHARED / "claude-docs" / "questions.jsonl")]
    plain = make_pipeline(Settings.load(environ={}, dotenv=None).at(db))
    plain._readers = {}  # no reader runs: the model of today's signals decides
    plain.answer("warm up")
    ms: dict[str, list[float]] = {"with the reader": [], "without": []}
    models: dict[str, Counter] = {k: Counter() for k in ms}
    for q in questions:  # in turn, so that both see the same machine
        for label, p in (("with the reader", pipeline), ("without", plain)):
            a = p.answer(q)
            ms[label].append(a.trace.timings_ms["total"])
            models[label][a.trace.evidence.get("model", "")] += 1
    reader_rows = [
        [
            label,
            len(v),
            f"{np.median(v):.1f}",
            f"{np.percentile(v, 90):.1f}",
            ", ".join(f"{m} {n}" for m, n in models[label].items()),
        ]
        for label, v in ms.items()
    ]
    print(reader_rows)
    body = f"""## Answers, offline

`python bench/answers.py` — the whole `ask` path without keys ({embedder.name}), index and model
warm.

{table(["questions", "n", "ANSWER", "PARTIAL", "ABSTAIN", "abstention rate"], rows)}

Median ms per stage on the claude-docs questions (the extract stage embeds the candidate blocks):

{table(list(stage_rows), [[f"{v:.1f}" for v in stage_rows.values()]])}

Ask with the reader and without it (issue 45): the same long-lived process, each claude-docs
question asked of both in turn; the reader reads at most READ_K = {READ_K} sections per question
(ms of the whole offline `ask`):

{table(["pipeline", "n", "p50 ms", "p90 ms", "decided by"], reader_rows)}
"""
    write_section("answers", body)


if __name__ == "__main__":
    main()
