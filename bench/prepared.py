"""An experiment, not kept in the tree (its figures stay in RESULTS.md, section "reads-prepared"):
would preparing what the read tastes ahead of the question (each chunk's paragraphs as shown, its
pieces and their words: what index-time preparation could store) bring the first word back to
f88711b's? Each set's first answerable questions on the Messages API stand-in, in a process of
their own per arm, asked twice: the second pass is timed, so every arm's process is warm alike
(SQLite's pages, the models), and in the "prepared" arm every piece the read cuts, shows and
tokenizes was computed in the first pass (memoized: the ceiling of any preparation ahead).

    python bench/prepared.py [--sets SET ...] [--questions N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
from harness import CHECK_SETS, REAL_SETS, ROOT, laid_out, table, write_section
from reads import held, worktree

BEFORE = "f88711b"
STEPS = ("load", "condense", "typos", "embed", "route_retrieve", "decide", "extract")

PASS = """
import functools, json, sys, time
sys.path[:0] = [{root!r} + "/bench", {root!r}]
if {prepared!r}:
    import index.search as S
    import router.citations as CI
    import router.context as C
    C.shown = functools.lru_cache(None)(C.shown)
    _paras = functools.lru_cache(None)(lambda t: tuple(CI.paragraphs(t)))
    C.paragraphs = lambda t: list(_paras(t))
    C.tokenize = functools.lru_cache(None)(S.tokenize)
    _split = C.split
    _one = functools.lru_cache(None)(lambda para, share: tuple(_split([para], share)))
    C.split = lambda paras, share: [x for p in paras for x in _one(p, share)]
from claude_paths import MODEL_TIMING, REPLY, FakeClaude, StubServer, questions
from harness import eval_db, set_dir
from index.embedders import make_embedder
from bot.app import FieldGuide
from bot.settings import Settings
qs = questions(set_dir({name!r}) / "questions.jsonl", {n})
server = StubServer()
server.route("/v1/messages", FakeClaude(answer=REPLY, timing=MODEL_TIMING, cache=True))
settings = Settings(db=str(eval_db({name!r}, make_embedder())), anthropic_api_key="bench",
                    anthropic_base_url=server.url, **{overrides})
p = FieldGuide(settings).pipeline
p.engine.warm()
for q in qs:
    p.answer(q)
rows = []
for q in qs:
    seen = []
    started = time.monotonic()
    a = p.answer(q, on_text=lambda d: seen or seen.append(time.monotonic()))
    t = a.trace.timings_ms
    pre = sum(t.get(k, 0) for k in {steps!r})
    rows.append(None if not seen else [(seen[0] - started) * 1000, pre, t.get("extract", 0)])
server.close()
print(json.dumps(rows))
"""


def timed(root, name: str, n: int, prepared: bool, overrides: str) -> list:
    """Per question of the second pass: [first word ms, ms before the request, extract ms]."""
    code = PASS.format(
        root=str(root), name=name, n=n, prepared=prepared, overrides=overrides, steps=STEPS
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", nargs="*", default=["examples", *REAL_SETS, *CHECK_SETS])
    ap.add_argument("--questions", type=int, default=8)
    args = ap.parse_args()
    names = [n for n in args.sets if laid_out(n)]
    now = "dict(read_tokens=3500, second_looks=0)"
    rows = []
    with worktree(BEFORE, names) as root:
        for name in held(root, names):
            before = timed(root, name, args.questions, False, "{}")
            arms = {
                "now": timed(ROOT, name, args.questions, False, now),
                "prepared": timed(ROOT, name, args.questions, True, now),
            }
            for arm, got in arms.items():
                pairs = [(a, b) for a, b in zip(got, before, strict=True) if a and b]
                d_first = [a[0] - b[0] for a, b in pairs]
                d_pre = [a[1] - b[1] for a, b in pairs]
                rows.append(
                    [name, arm, len(pairs)]
                    + [f"{np.median([b[1] for _, b in pairs]):.1f}"]
                    + [f"{np.median([a[1] for a, _ in pairs]):.1f}"]
                    + [f"{np.median([a[2] for a, _ in pairs]):.1f}"]
                    + [f"{np.median(d_pre):+.1f}", f"{np.median(d_first):+.1f}"]
                )
                print(table(HEADERS, rows[-1:]), flush=True)
    body = TEXT.format(before=BEFORE, n=args.questions) + table(HEADERS, rows)
    print(body)
    write_section("reads-prepared", body)


HEADERS = [
    "set",
    "arm",
    "questions",
    f"ms before the request, {BEFORE}",
    "ms before the request, arm",
    "of which the read (extract)",
    "arm − before, ms before the request (median a question)",
    "arm − before, first word ms (median a question)",
]

TEXT = """### Tastes prepared ahead, and the first word (an experiment, `bench/prepared.py`)

Not kept in the tree: its code is in the commit that wrote this section. The first {n} answerable
questions of each set on the Messages API stand-in (bench/claude_paths.py's stand-in and model
timings), each arm a process of its own that asks them twice and is timed on the second pass:
{before}'s cite path (its top 5 chunks), this tree's read at 3,500 tokens (now), and the same
with every piece the read cuts, shows and tokenizes computed in the first pass (prepared: the
ceiling of storing them at index time). Ms before the request: the question's steps before
Claude is asked (load, condense, typos, embed, route and retrieve, decide, the read).

"""

if __name__ == "__main__":
    main()
