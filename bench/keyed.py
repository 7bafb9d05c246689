"""Keyed answers measured on real questions, without the API: `fieldguide eval SET --answers` with
a key pointed at the Messages API stand-in in record and replay mode (tests/standins/keyed.py).

    python bench/keyed.py run SET [SET ...]     # a round: replay what is answered, record the rest
    python bench/keyed.py pending [SET ...]     # the requests still without a response
    python bench/keyed.py check [SET ...]       # the responses written so far, checked
    python bench/keyed.py serve SET [--port N]  # the stand-in alone, for `fieldguide eval` itself

Each set's files are under bench/keyed/SET/: requests/<hash>.json (every request body the pipeline
sent), responses/<hash>.json (written by a language model outside the API, reading the request
alone: bench/keyed/README.md), eval.json (the last round's `fieldguide eval --answers --json`),
sample.json (the ids of the questions asked: SAMPLE of the set's answerable and off-topic
questions together, drawn with seed 0, so each kind comes as often as the set has it; the ids
only, so that an answerer reading the folder sees no gold).
A round replays every request that has a response and records the others (they fail with a 400,
so that step runs offline); a set is done when a round records nothing new. Only the answer and
its claim check are recorded: a classification gets the API's 529 overloaded_error at once (not
recorded; the offline router is what routes, as when Claude is overloaded), and the client does
not retry (max_retries 0), so no request waits on a retry's back-off.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from harness import REAL_SETS, ROOT, set_dir, table

from tests.standins.keyed import Keyed, described, pending, problems
from tests.standins.server import StubServer

KEYED = ROOT / "bench" / "keyed"
SAMPLE = 25  # questions a set's rounds ask: what blind answerers can answer in a sitting
RECORDED = ("answer", "check")  # the requests an answer needs; others are refused (overloaded)


def sampled(name: str, folder: Path, into: Path) -> tuple[Path, Path]:
    """The set's questions and off-topic questions of `folder`/sample.json (drawn once and kept),
    written as the two files `fieldguide eval` reads, into `into`."""
    from bot.evaluation.retrieval import load_items

    items = load_items(set_dir(name) / "questions.jsonl")
    off = set_dir(name) / "offtopic.jsonl"
    items += load_items(off) if off.is_file() else []
    keep = folder / "sample.json"
    if not keep.exists():
        drawn = random.Random(0).sample([q["id"] for q in items], min(SAMPLE, len(items)))
        keep.write_text(json.dumps(sorted(drawn), indent=1) + "\n", encoding="utf-8")
    ids = set(json.loads(keep.read_text(encoding="utf-8")))
    files = into / "questions.jsonl", into / "offtopic.jsonl"
    for path, gold in zip(files, (True, False), strict=True):
        chosen = [q for q in items if q["id"] in ids and bool(q["gold"]) == gold]
        path.write_text("".join(json.dumps(q) + "\n" for q in chosen), encoding="utf-8")
    return files


def round_of(name: str) -> dict:
    """One round of a set: `fieldguide eval SET --answers` with a key, against the keyed
    stand-in; its results are written to bench/keyed/SET/eval.json."""
    from bot.api import evaluate
    from bot.settings import Settings

    folder = KEYED / name
    keyed = Keyed(folder, kinds=RECORDED)
    server = StubServer()
    server.route("/v1/messages", keyed)
    try:
        settings = Settings(anthropic_api_key="keyed", anthropic_base_url=server.url, max_retries=0)
        with tempfile.TemporaryDirectory() as tmp:
            questions, offtopic = sampled(name, folder, Path(tmp))
            result = evaluate(
                set_dir(name),
                questions=questions,
                offtopic=offtopic,
                answers=True,
                settings=settings,
            )
    finally:
        server.close()
    (folder / "eval.json").write_text(json.dumps(result, indent=1, ensure_ascii=False))
    return {
        "set": name,
        "replayed": len(keyed.replayed),
        "recorded": len(keyed.recorded),
        "summary": result["summary"],
    }


def listed(names: list[str]) -> list[dict]:
    return [described(p) | {"set": n} for n in names for p in pending(KEYED / n)]


def check(names: list[str]) -> int:
    """Every response written so far against its request: 1 when one is not one the API could
    send (each problem printed), else 0."""
    bad = 0
    for name in names:
        for path in sorted((KEYED / name / "responses").glob("*.json")):
            request = KEYED / name / "requests" / path.name
            if not request.exists():
                print(f"{name}/{path.name}: no request of that name")
                bad += 1
                continue
            try:
                response = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                print(f"{name}/{path.name}: not JSON ({e})")
                bad += 1
                continue
            for p in problems(response, json.loads(request.read_text(encoding="utf-8"))):
                print(f"{name}/{path.name}: {p}")
                bad += 1
    print(f"{bad} problems")
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("run", "pending", "check", "serve"))
    ap.add_argument("sets", nargs="*")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="pending: one JSON object a line")
    args = ap.parse_args()
    names = args.sets or list(REAL_SETS)
    if args.command == "run":
        for name in names:
            r = round_of(name)
            print(
                f"{name}: {r['replayed']} requests replayed,"
                f" {r['recorded']} recorded without a response"
            )
    elif args.command == "pending":
        rows = listed(names)
        if args.json:
            for r in rows:
                print(json.dumps(r))
            return
        print(
            table(
                ["set", "hash", "kind", "model", "bytes", "after a tool", "search results"],
                [
                    [
                        r["set"],
                        r["hash"],
                        r["kind"],
                        r["model"],
                        r["bytes"],
                        r["after_tool"],
                        r["search_results"],
                    ]
                    for r in rows
                ],
            )
        )
        print(f"{len(rows)} requests without a response, {sum(r['bytes'] for r in rows):,} bytes")
    elif args.command == "check":
        sys.exit(check(names))
    elif args.command == "serve":
        [name] = names
        server = StubServer(port=args.port)
        server.route("/v1/messages", Keyed(KEYED / name, kinds=RECORDED))
        print(f"ANTHROPIC_BASE_URL={server.url} ANTHROPIC_API_KEY=keyed", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            server.close()


if __name__ == "__main__":
    main()
