"""How far a question travels through the project's code: `FieldGuide.ask` on the example docs,
offline, traced with sys.setprofile (RESULTS.md section question-path).

Counted on the second question (the first loads the index, the model and the word lists):
- project code is every file under bot/, router/, index/ and prompts/ of the checkout run;
- "top N levels": the project frames at most N calls below FieldGuide.ask (calls through library
  code do not count as levels): the modules they are in (distinct), the stays (a call into a
  module other than the caller's), and the returns (their 'return' events);
- "all": the same over every project frame, whatever its depth.

`python bench/question_path.py` (add `--no-write` to print only; `--before DIR` counts another
checkout beside this one, e.g. one made with `git worktree add /tmp/before <commit>`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

QUESTION = "How many times is a failed webhook retried?"
LEVELS = (2, 3)


def count(root: Path) -> dict[str, tuple[int, int, int]]:
    """{"top N levels" | "all": (modules, stays, returns)} of one FieldGuide.ask."""
    sys.path.insert(0, str(root))
    from bot.app import FieldGuide
    from bot.settings import Settings
    from index.embedders import make_embedder
    from index.indexer import index_folder

    project = tuple(str(root / top) + "/" for top in ("bot", "router", "index", "prompts"))
    work = Path(tempfile.mkdtemp(prefix="question-path-"))
    embedder = make_embedder()
    index_folder(str(work / "index.db"), root / "examples" / "docs", embedder)
    settings = Settings.load().at(work / "index.db")
    guide = FieldGuide(settings, embedder=embedder, anthropic=None)
    guide.ask("warm up: load the model and the index")

    calls: list[tuple[int, str, str]] = []  # (depth, module, caller's module) of project calls
    returns: list[int] = []  # depth of each project frame's return
    names: list[tuple[int, str, str]] = []
    depth = {"now": -1}

    def module(frame) -> str | None:
        name = frame.f_code.co_filename
        return name[len(str(root)) + 1 :] if name.startswith(project) else None

    def profile(frame, event, _arg):
        if event not in ("call", "return"):
            return
        here = module(frame)
        if here is None:
            return
        if event == "call":
            depth["now"] += 1
            caller = frame.f_back
            while caller is not None and module(caller) is None:
                caller = caller.f_back
            calls.append((depth["now"], here, (module(caller) or "") if caller else ""))
            names.append((depth["now"], here, frame.f_code.co_name))
        else:
            returns.append(depth["now"])
            depth["now"] -= 1

    ask = guide.ask
    sys.setprofile(profile)
    try:
        ask(QUESTION)
    finally:
        sys.setprofile(None)
    # depth 0 is FieldGuide.ask itself
    if os.environ.get("QUESTION_PATH_SHOW"):
        show = int(os.environ["QUESTION_PATH_SHOW"])
        for d, m, f in names:
            if d <= show:
                print("  " * d + f"{m}:{f}", file=sys.stderr)
    out = {}
    for top in (*LEVELS, None):
        seen = [(m, c) for d, m, c in calls if top is None or d <= top]
        rets = [d for d in returns if top is None or d <= top]
        label = "all" if top is None else f"top {top} levels"
        out[label] = (len({m for m, _ in seen}), sum(m != c for m, c in seen), len(rets))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=Path, help="print count() of this checkout as JSON")
    parser.add_argument("--before", type=Path, help="another checkout, counted beside this one")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.count:
        print(json.dumps(count(args.count.resolve())))
        return
    # only now: harness puts this checkout first on sys.path
    from harness import in_checkout, table, write_section

    here = Path(__file__).resolve().parents[1]
    roots = {"before": args.before, "now": here} if args.before else {"now": here}
    rows = [
        [name, label, *v]
        for name, root in roots.items()
        for label, v in in_checkout(__file__, "--count", root.resolve()).items()
    ]
    for row in rows:
        print(*row, sep="\t")
    if not args.no_write:
        body = (
            "## A question's path (`bench/question_path.py`)\n\n"
            f"`FieldGuide.ask({QUESTION!r})` offline on the example docs, the second question"
            " of a process, traced with sys.setprofile over the project's own frames (files"
            " under bot/, router/, index/ and prompts/). A level is a project call below"
            " FieldGuide.ask (level 0; calls through library code add none): 'top N levels'"
            " counts the frames at most N levels down, 'all' every project frame. Modules"
            " entered: the distinct files those frames run in; stays: the calls that go into"
            " another file than their caller's (FieldGuide.ask's own entry counts one); returns:"
            " the frames' 'return' events. Top 2 levels cannot go below 3 modules and 3 stays:"
            " FieldGuide.ask itself, the pipeline it calls and the audit store it records in.\n\n"
            + table(["checkout", "frames counted", "modules entered", "stays", "returns"], rows)
            + "\n\nbefore: `--before`, a checkout of commit c75d3e9"
            " (`git worktree add /tmp/before c75d3e9`); now: this checkout, whose"
            " `Pipeline.path` runs steps that take what they need and return what they found"
            " (router/pipeline.py).\n"
        )
        write_section("question-path", body)


if __name__ == "__main__":
    main()
