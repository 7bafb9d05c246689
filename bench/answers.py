"""End to end offline: `fieldguide ask`'s per-stage median ms on the claude-docs questions, and the
abstention rate on them and on 20 off-topic questions (examples/offtopic.jsonl).

    python bench/answers.py
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from harness import ROOT, SHARED, eval_db, table, write_section

from bot.app import FieldGuide
from bot.evaluation.retrieval import load_questions
from bot.settings import Settings
from index.embedders import make_embedder


def main() -> None:
    embedder = make_embedder()
    db = eval_db("claude-docs", embedder)
    pipeline = FieldGuide(Settings(db=str(db)), embedder=embedder).pipeline
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
    body = f"""## Answers, offline

`python bench/answers.py` — the whole `ask` path without keys ({embedder.name}), index and model
warm.

{table(["questions", "n", "ANSWER", "PARTIAL", "ABSTAIN", "abstention rate"], rows)}

Median ms per stage on the claude-docs questions (the extract stage embeds the candidate blocks):

{table(list(stage_rows), [[f"{v:.1f}" for v in stage_rows.values()]])}
"""
    write_section("answers", body)


if __name__ == "__main__":
    main()
