"""An experiment: would reading deeper in the search's candidates bring the gold into Claude's
first read on the check set mise (0.855 at the default, the target 0.90)? Gold read (any part)
per candidate depth and token budget on every real-question set, as bench/reads.py counts it.

    python bench/depth.py
"""

from __future__ import annotations

import numpy as np
from harness import QUESTION_SETS, laid_out, table, write_section
from reads import measure

from index.embedders import make_embedder
from router import context

DEPTHS = (40, 80)
BUDGETS = (3500, 5000, 7000)


def main() -> None:
    embedder, rows = make_embedder(), []
    for name in [n for n in QUESTION_SETS if laid_out(n)]:
        for depth in DEPTHS:
            context.DEPTH = depth  # what context.read is given: the fused top `depth`
            got = measure(name, embedder, BUDGETS)["budget"]
            rows.append(
                [name, depth]
                + [f"{np.mean([g[0] for g in got[f'{b:,} tokens']]):.3f}" for b in BUDGETS]
            )
            print(rows[-1], flush=True)
    body = f"""
### Reading deeper: the gold read per candidate depth and budget (an experiment, `bench/depth.py`)

Offline, as the section "reads" counts it (the gold section in any part of the first read). The
read's candidates are the search's fused top {DEPTHS[0]} (the default, router/context.py `DEPTH`)
or top {DEPTHS[1]}; the read reaches as many of them as the budget holds a least taste of.

{table(["set", "candidates", *[f"{b:,} tokens" for b in BUDGETS]], rows)}
"""
    print(body)
    write_section("reads-depth", body)


if __name__ == "__main__":
    main()
