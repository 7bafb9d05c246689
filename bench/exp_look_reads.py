"""Where a look's cited sections sit in what it read (experiment, not shipped): from the keyed
round's eval.json files, each section an answer cites that a look read first, as the tokens the
look read up to and including it in rank order; how many fall within each smaller budget.

    python bench/exp_look_reads.py
"""

from __future__ import annotations

import json

from harness import REAL_SETS, ROOT

BUDGETS = (1000, 1500, 2000, 2500)


def places(name: str) -> tuple[list[int], list[int]]:
    """(each cited section's tokens read up to it, each look's tokens read) of a set's round."""
    keyed = json.loads((ROOT / "bench" / "keyed" / name / "eval.json").read_text(encoding="utf-8"))
    out, reads = [], []
    for a in keyed["answers"] + keyed["offtopic"]:
        first = {(r["doc"], r["section"]) for r in a["read"]}
        cited = {(s["doc"], s["section"]) for s in a["sources"]}
        for look in a["looks"]:
            reads.append(sum(r["tokens"] for r in look["read"]))
            upto = 0
            for r in look["read"]:
                upto += r["tokens"]
                own = (r["doc"], r["section"])
                named = any(
                    d == r["doc"] and (r["section"] == s or r["section"].endswith(" › " + s))
                    for d, s in cited
                )
                if named and own not in first:
                    out.append(upto)
    return out, reads


def main() -> None:
    every, reads = [], []
    for name in REAL_SETS:
        found, looked = places(name)
        every += found
        reads += looked
        print(name, len(found), [sum(t <= b for t in found) for b in BUDGETS])
    print("all", len(every), [sum(t <= b for t in every) for b in BUDGETS])
    print("looks", len(reads), "tokens read a look", round(sum(reads) / max(1, len(reads))))


if __name__ == "__main__":
    main()
