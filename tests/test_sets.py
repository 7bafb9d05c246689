"""The real-question eval sets (bench/sets): their questions are in the repository (their docs are
laid out from each project's repository as its SOURCE.md says), in shared/eval's format."""

import json
from pathlib import Path

import pytest

SETS = sorted(
    p for p in (Path(__file__).resolve().parents[1] / "bench" / "sets").iterdir() if p.is_dir()
)


@pytest.mark.parametrize("set_dir", SETS, ids=[p.name for p in SETS])
def test_a_real_question_set_is_in_the_eval_format_with_its_sources(set_dir):
    assert (set_dir / "SOURCE.md").is_file()
    answerable = [json.loads(line) for line in (set_dir / "questions.jsonl").open()]
    offtopic = [json.loads(line) for line in (set_dir / "offtopic.jsonl").open()]
    ids = [q["id"] for q in answerable + offtopic]
    assert len(ids) == len(set(ids))
    # at least 40 copied from real threads, 15 close off-topic ones
    threads = [q for q in answerable if q["source"].startswith("https://github.com/")]
    assert len(threads) >= 40 and len(offtopic) >= 15
    for q in answerable:
        assert q["question"].strip() and q["answer"].strip() and q["intents"], q["id"]
        assert q["gold"] and all(g["doc"].endswith(".md") for g in q["gold"]), q["id"]
    for q in offtopic:
        assert q["intents"] == [] and q["gold"] == [] and q["source"], q["id"]
