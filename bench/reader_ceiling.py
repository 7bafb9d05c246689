"""How far a strong reader could go on the top 5 sections: the grades a language model gave, blind
to the labels, to each real question of a set and the 5 sections the project's search returns for
it (bench/reader-ceiling/SET.jsonl: id, grade 0-4, request, why), scored against the set's labels
(questions.jsonl: answerable; offtopic.jsonl: close off-topic).

    python bench/reader_ceiling.py [SET ...]      # default: every set with grades

It writes the section reader-ceiling of bench/RESULTS.md.

Grades: 4 a section clearly answers it, 3 mostly, 2 related material without the specific thing
asked, 1 same topic but not what was asked, 0 unrelated; `request`: the grader read the question as
a feature request or a bug report rather than a how-to. How the grades were made: bench/RESULTS.md,
section "The reader, leave one corpus out", third session.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness import write_section

from bot.evaluation.calibrate import ranking_auc
from bot.evaluation.retrieval import load_items

HERE = Path(__file__).resolve().parent
GRADES = HERE / "reader-ceiling"


def ids(path: Path) -> set[str]:
    return {q["id"] for q in load_items(path)}


def report(name: str) -> str:
    grades = [json.loads(x) for x in (GRADES / f"{name}.jsonl").read_text().splitlines() if x]
    answerable = ids(HERE / "sets" / name / "questions.jsonl")
    offtopic = ids(HERE / "sets" / name / "offtopic.jsonl")
    pos = [g["grade"] for g in grades if g["id"] in answerable]
    neg = [g["grade"] for g in grades if g["id"] in offtopic]
    req_pos = [-int(g["request"]) for g in grades if g["id"] in answerable]
    req_neg = [-int(g["request"]) for g in grades if g["id"] in offtopic]

    def share(grades: list[int], at: int) -> float:
        return sum(g >= at for g in grades) / len(grades)

    cells = "".join(f" {share(pos, t):.2f} / {share(neg, t):.2f} |" for t in (4, 3, 2))
    aucs = f"{ranking_auc(pos, neg):.3f} | {ranking_auc(req_pos, req_neg):.3f}"
    return f"| {name} | {len(pos)} / {len(neg)} | {aucs} |" + cells


def main(argv: list[str]) -> None:
    names = argv or sorted(p.stem for p in GRADES.glob("*.jsonl"))
    head = ["set", "answerable / off-topic", "AUC of the grade", "AUC of 'not a request'"]
    head += ["answered / off-topic answered at grade 4", "at 3", "at 2"]
    rows = "\n".join(report(name) for name in names)
    body = f"""## How far a reader could go on the top 5 sections (`bench/reader_ceiling.py`)

`python bench/reader_ceiling.py` — a language model's grades (bench/reader-ceiling/SET.jsonl), blind
to the labels, of each real question with the 5 sections the project's search returns for it, scored
against the set's labels. How they were made and what they say: section "reader", third session.

| {" | ".join(head)} |
|{"---|" * len(head)}
{rows}
"""
    print(body)
    write_section("reader-ceiling", body)


if __name__ == "__main__":
    main(sys.argv[1:])
