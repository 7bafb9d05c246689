"""What Claude reads (router/context.py): the share of questions whose gold section is in what the
answer is given, per set and per token budget, against the top 5 chunks it read before; what a
question then costs and when its first word comes, on the Messages API stand-in.

    python bench/reads.py [--sets SET ...] [--budgets 2500,3500,5000] [--before COMMIT]

`--before COMMIT`: the first word's time of that commit's cite path too, measured the same way in
a temporary worktree (default f88711b, the commit before the read by budget).
`--paired RUNS`: only the first word of this tree's read (at its default budget, or at each of
`--budgets`) against that commit's, asked in turn RUNS times (the section "reads-paired").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from harness import (
    CHECK_SETS,
    QUESTION_SETS,
    REAL_SETS,
    ROOT,
    eval_db,
    laid_out,
    set_dir,
    table,
    write_section,
)

from bot.app import FieldGuide
from bot.evaluation.retrieval import load_items, matches
from bot.settings import Settings
from router import context, exact, reading, words
from router.question import checked_question

SETS = (*QUESTION_SETS, "claude-docs", "openshift-4.15", "examples")
BUDGETS = (1500, 2500, 3500, 5000)
GOLD_TARGET = 0.90  # the gold in the first read, on every real-question set (issue 50)
DEPTHS = (5, 10, 20, 40, 80)
COST_QUESTIONS = 8


def searched(engine, docs, question: str):
    """(the question as the pipeline searches it, its vector): bounded, greetings off, typos
    read."""
    text = reading.plain(checked_question(question))
    text, _ = words.correct_typos(reading.read(text), docs.words)
    vec, _ = engine.embed_query(text)
    return text, vec


def gold_in(chunks: list[dict], gold: list[dict]) -> bool:
    return any(matches(c, g) for c in chunks for g in gold)


def measure(name: str, embedder, budgets) -> dict:
    """Per question: gold in the top k chunks; per budget: gold read (in any part, beyond a
    taste), tokens read, the packing's milliseconds."""
    settings = Settings.load(environ={}, dotenv=None).at(eval_db(name, embedder))
    engine = FieldGuide(settings, embedder=embedder).engine
    docs = engine.corpus()
    items = [q for q in load_items(set_dir(name) / "questions.jsonl") if q["gold"]]
    out: dict = {"questions": len(items), "depth": {d: [] for d in DEPTHS}, "budget": {}}
    for q in items:
        text, vec = searched(engine, docs, q["question"])
        hits = docs.router.route(text, vec, k=max(DEPTHS), wait=False).hits
        asked = exact.asked(text, docs)
        for d in DEPTHS:
            out["depth"][d].append(gold_in([h.chunk for h in hits[:d]], q["gold"]))
        top5 = [h.chunk for h in hits[:5]]
        tokens = sum(context.cost(c["text"], "") for c in top5)
        out["budget"].setdefault("top 5 chunks (before)", []).append(
            (gold_in(top5, q["gold"]), gold_in(top5, q["gold"]), tokens, 0.0)
        )
        for b in budgets:
            started = time.perf_counter()
            reads = context.read(hits[: context.DEPTH], docs, text, b, asked)
            ms = (time.perf_counter() - started) * 1000
            deep = [r.chunk for r in reads if r.part != "taste"]
            out["budget"].setdefault(f"{b:,} tokens", []).append(
                (
                    gold_in([r.chunk for r in reads], q["gold"]),
                    gold_in(deep, q["gold"]),
                    sum(r.tokens for r in reads),
                    ms,
                )
            )
    return out


def costs(name: str, embedder, budgets, n: int = COST_QUESTIONS) -> list[list]:
    """Per budget: the first n answerable questions through the pipeline against the Messages API
    stand-in (bench/claude_paths.py `run`: each model's time to first token and speed, prompt
    caching and billing as the API does, no second look): USD per 1,000 questions, first word
    p50."""
    from claude_paths import pct, questions, run

    db = eval_db(name, embedder)
    qs = questions(set_dir(name) / "questions.jsonl", n)
    rows = []
    for b in budgets:
        r = run(db, qs, True, read_tokens=b, second_looks=0)
        rows.append(
            [
                name,
                f"{b:,}",
                r["answers"],
                f"{r['prompt']:,.0f}",
                f"{r['usd'] * 1000:.2f}",
                f"{pct(r['first'], 50):.2f}",
            ]
        )
        print(table(COST_HEADERS, rows[-1:]), flush=True)
    return rows


COST_HEADERS = [
    "set",
    "read tokens",
    "answers",
    "prompt tokens",
    "USD per 1,000",
    "first word p50 s",
]

MEASURE = """
import json, sys
sys.path[:0] = [{root!r} + "/bench", {root!r}]
from claude_paths import pct, questions, run
from harness import eval_db, set_dir
from index.embedders import make_embedder
db = eval_db({name!r}, make_embedder())
r = run(db, questions(set_dir({name!r}) / "questions.jsonl", {n}), {how})
print(json.dumps([r["answers"], r["prompt"], r["usd"], r["first"]]))
"""
CITE = '"cite", True'  # a commit before the read by budget: its cite path
READ = "True, second_looks=0"  # this tree: the read at its default budget


def measured(root: Path, name: str, how: str, n: int = COST_QUESTIONS) -> list:
    """[answers, prompt tokens, USD, each answer's first word in seconds] of `name`'s first n
    answerable questions on the stand-in, in a process of its own in the tree at `root`."""
    code = MEASURE.format(root=str(root), name=name, n=n, how=how)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def held(root: Path, names: list[str]) -> list[str]:
    """The sets among `names` that the tree at `root` has (a real set added since is not there)."""
    return [n for n in names if n not in QUESTION_SETS or (root / "bench" / "sets" / n).is_dir()]


@contextmanager
def worktree(commit: str, names: list[str]) -> Iterator[Path]:
    """`commit` checked out in a temporary worktree, with the sets' docs and indexes of this
    one."""
    root = Path("/tmp") / f"reads-before-{commit}"
    if not root.exists():
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(root), commit], cwd=ROOT, check=True
        )
    for name in names:  # the docs are laid out here only, the sets indexed here already
        link = root / "bench" / "sets" / name / "docs"
        if name in QUESTION_SETS and link.parent.is_dir() and not link.exists():
            link.symlink_to((set_dir(name) / "docs").resolve())
    # the real sets' indexes are shared; examples/docs is the worktree's own, indexed there
    (root / ".fieldguide" / "eval").mkdir(parents=True, exist_ok=True)
    for index in (ROOT / ".fieldguide" / "eval").glob("*"):
        link = root / ".fieldguide" / "eval" / index.name
        if not index.name.startswith("examples-") and not link.exists():
            link.symlink_to(index)
    try:
        yield root
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(root)], cwd=ROOT, check=False)


def before(commit: str, names: list[str]) -> list[list]:
    """The same measure of `commit`'s cite path (its top 5 chunks), in a temporary worktree."""
    from claude_paths import pct

    rows = []
    with worktree(commit, names) as root:
        for name in held(root, names):
            answers, prompt, usd, first = measured(root, name, CITE)
            rows.append(
                [
                    name,
                    f"top 5 chunks ({commit})",
                    answers,
                    f"{prompt:,.0f}",
                    f"{usd * 1000:.2f}",
                    f"{pct(first, 50):.2f}",
                ]
            )
            print(table(COST_HEADERS, rows[-1:]), flush=True)
    return rows


def paired(commit: str, names: list[str], reps: int, budgets: list[int]) -> None:
    """The first word of this tree's read at each of `budgets` against `commit`'s, each set's
    questions asked in turn by one and the other, `reps` times: the section "reads-paired"."""
    firsts: dict[tuple[str, object], list[list[float]]] = {}
    arms = [("before", CITE)] + [(b, f"{READ}, read_tokens={b}") for b in budgets]
    with worktree(commit, names) as root:
        names = held(root, names)
        for _ in range(reps):
            for name in names:
                for arm, how in arms:
                    tree = root if arm == "before" else ROOT
                    firsts.setdefault((name, arm), []).append(measured(tree, name, how)[3])
    rows = []
    for name in names:
        b = firsts[(name, "before")]
        for budget in budgets:
            n = firsts[(name, budget)]
            # each question's median over the runs, then the median of now - before
            per = [
                float(np.median([r[i] for r in n]) - np.median([r[i] for r in b]))
                for i in range(min(len(b[0]), len(n[0])))
            ]
            rows.append(
                [name, f"{budget:,}", reps, f"{np.median(sum(b, [])):.3f}"]
                + [f"{np.median(sum(n, [])):.3f}", f"{np.median(per) * 1000:+.0f}"]
                + [f"{sum(d > 0 for d in per)} of {len(per)}"]
            )
    body = PAIRED.format(commit=commit, n=COST_QUESTIONS, reps=reps) + table(
        ["set", "read tokens", "runs each", f"first word p50 s, {commit}"]
        + ["first word p50 s, now", "now − before, ms (median a question)", "questions later"],
        rows,
    )
    print(body)
    write_section("reads-paired", body)


PAIRED = """### The first word, read by budget against the top 5 chunks, paired (`bench/reads.py`)

`python bench/reads.py --paired {reps} --budgets B,...`. The first {n} answerable questions of
each set on the Messages API stand-in (as the section above: bench/claude_paths.py `run`, no
second look), asked by commit {commit}'s cite path (its top 5 chunks) and by this tree's read at
each budget in turn, each run a process of its own, {reps} runs each: the p50 over every answer,
and each question's median over its runs, now less before. The stand-in plays a model's time to
first token whatever the prompt's length (the section above).

"""


def main() -> None:
    from index.embedders import make_embedder

    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", nargs="*", default=list(SETS))
    default = ",".join(map(str, BUDGETS))
    ap.add_argument("--budgets", help=f"default {default}; with --paired, the default read's")
    ap.add_argument("--cost-sets", nargs="*", default=["examples", *QUESTION_SETS])
    ap.add_argument("--before", default="f88711b")
    ap.add_argument("--paired", type=int, metavar="RUNS", help="only the paired first word")
    args = ap.parse_args()
    if args.paired:
        budgets = [int(b) for b in (args.budgets or str(context.READ_TOKENS)).split(",")]
        paired(args.before, [n for n in args.cost_sets if laid_out(n)], args.paired, budgets)
        return
    args.budgets = args.budgets or default
    budgets = [int(b) for b in args.budgets.split(",")]
    embedder = make_embedder()
    rows, depth_rows = [], []
    for name in [n for n in args.sets if laid_out(n)]:
        m = measure(name, embedder, budgets)
        if not m["questions"]:  # a set without questions whose gold is a section
            continue
        for label, got in m["budget"].items():
            rows.append(
                [
                    name,
                    m["questions"],
                    label,
                    f"{np.mean([g[0] for g in got]):.3f}",
                    f"{np.mean([g[1] for g in got]):.3f}",
                    f"{np.mean([g[2] for g in got]):,.0f}",
                    f"{np.percentile([g[3] for g in got], 50):.0f}"
                    if any(g[3] for g in got)
                    else "—",
                ]
            )
        depth_rows.append([name] + [f"{np.mean(m['depth'][d]):.3f}" for d in DEPTHS])
        print(table(READ_HEADERS, rows[-len(m["budget"]) :]), flush=True)
    cost_sets = [n for n in args.cost_sets if laid_out(n)]
    cost_rows = before(args.before, cost_sets) if args.before else []
    for name in cost_sets:
        cost_rows += costs(name, embedder, budgets)
    if not cost_sets:
        return
    body = SECTION.format(
        budgets=args.budgets,
        depth=context.DEPTH,
        default=context.READ_TOKENS,
        fitted=", ".join(REAL_SETS),
        target=f"{GOLD_TARGET:.2f}",
        checks=" and ".join(CHECK_SETS),
        checked=", ".join(
            f"{r[0]} {r[3]} ({'met' if float(r[3]) >= GOLD_TARGET else 'missed'})"
            for r in rows
            if r[0] in CHECK_SETS and r[2] == f"{context.READ_TOKENS:,} tokens"
        ),
        n=COST_QUESTIONS,
        before=args.before,
        reads=table(READ_HEADERS, rows),
        depths=table(["set", *[f"top {d} chunks" for d in DEPTHS]], depth_rows),
        costs=table(COST_HEADERS, sorted(cost_rows, key=lambda r: r[0])),
    )
    print(body)
    write_section("reads", body)


READ_HEADERS = [
    "set",
    "questions",
    "what Claude reads",
    "gold read",
    "gold read beyond a taste",
    "tokens read",
    "packing ms p50",
]
SECTION = """
`python bench/reads.py --budgets {budgets}`. Offline (local int8 model, the offline router, no
reranker). What Claude's answer reads of the docs (router/context.py): its candidates (the fused
top {depth} chunks) packed to a token budget, a taste of each section first (its pieces that
write the asked identifiers or hold most of the question's weight, in an equal share of what the
budget leaves once each section's title is counted), then, in rank order, the best sections'
chunks and whole sections where they fit; against the top 5 chunks it read before. Gold read: the
share of answerable questions with a gold section in what is read (any part of it; beyond a
taste: its chunks or the whole section). Tokens as the stand-in bills them (~3.5 characters a
token of the search_result blocks' JSON).

{reads}

Where the gold section is in the search's order (the depth the read reaches is the ceiling of
gold read):

{depths}

What a question costs and when its first word comes, with each read (`FIELDGUIDE_READ_TOKENS`),
on the Messages API stand-in (bench/claude_paths.py `run`: the first {n} answerable questions of
each set, the default models, each model's time to first token and speed, prompt caching and
billing as the API does, priced at bot/settings.py's list prices; no second look); the first row
of each set is commit {before}'s cite path (its top 5 chunks), measured the same way in a
temporary worktree. The stand-in plays a model's time to first token whatever the prompt's
length: a longer read's prefill on the API (published measures: 0.04-0.24 ms an input token, so
+2,000 tokens ≈ +0.1-0.5 s) is not in these times.

{costs}

The default is {default:,} tokens (`FIELDGUIDE_READ_TOKENS`): the smallest budget whose gold read
is at least {target} on every real set it was chosen on ({fitted}), at most $10 a 1,000 questions;
{checks} check the choice (no budget, weight or prompt was chosen on their questions): gold read
at the default, {checked}.
"""


if __name__ == "__main__":
    main()
