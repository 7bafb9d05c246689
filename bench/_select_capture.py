"""Capture, once, what the offline extraction is handed for each question of the three dev sets
(question, query vector, top-3 hits' chunks and scores, the decision and text `ask` gave), so
bench/_select.py can replay extraction + compose for each scoring variant in seconds.

    python bench/_select_capture.py   # writes .fieldguide/scratch/select-cache*.pkl
"""

from __future__ import annotations

import pickle

from _util import ROOT
from answers_eval import EVAL

from bot.evaluation.answers import sample, split_offtopic
from bot.evaluation.retrieval import load_items
from bot.settings import Settings
from bot.wiring import make_pipeline
from router import offline

SETS = {
    "claude-docs": (EVAL / "claude-docs", ".fieldguide/eval/claude-docs.db", None, None),
    "openshift-4.15": (EVAL / "openshift-4.15", ".fieldguide/eval/openshift-4.15.db", 100, None),
    "examples": (
        ROOT / "examples",
        ".fieldguide/eval/examples-local-all-MiniLM-L6-v2-int8.db",
        None,
        ROOT / "bench" / "offtopic.jsonl",
    ),
}
CACHE = ROOT / ".fieldguide" / "scratch" / "select-cache.pkl"
# every openshift-4.15 question: bench/_learn.py trains on those outside the 100 sampled
ALL_OS = CACHE.with_name("select-cache-os-all.pkl")


def capture(set_dir, db: str, limit, extra_off) -> dict:
    answerable, off = split_offtopic(load_items(set_dir / "questions.jsonl"))
    questions = sample(answerable, limit, 0)
    off_file = extra_off or set_dir / "offtopic.jsonl"
    off += load_items(off_file) if off_file.is_file() else []
    pipeline = make_pipeline(Settings.load(environ={}, dotenv=None), str(ROOT / db))
    pipeline.state = None
    pipeline.answer("warm up: load the model and the index")
    seen: list = []
    real = offline.extract

    def spy(question, query_vec, hits, bm25, embedder):
        seen.append(
            {
                "condensed": question,
                "vec": query_vec,
                "hits": [{"chunk": dict(h.chunk), "score": h.score, "row": h.row} for h in hits],
            }
        )
        return real(question, query_vec, hits, bm25, embedder)

    offline.extract = spy
    out: dict = {"answers": [], "offtopic": []}
    try:
        for kind, items in (("answers", questions), ("offtopic", off)):
            for q in items:
                seen.clear()
                ans = pipeline.answer(q["question"])
                out[kind].append(
                    {
                        "id": q["id"],
                        "question": q["question"],
                        "answer": q.get("answer", ""),
                        "decision": ans.decision,
                        "text": ans.text,
                        "hits_all": ans.hits,
                        "ms": ans.timings_ms,
                        "extract": seen[0] if seen else None,
                    }
                )
    finally:
        offline.extract = real
    return out


def main() -> None:
    data = {name: capture(*args) for name, args in SETS.items()}
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    CACHE.write_bytes(pickle.dumps(data))
    set_dir, db, _, extra = SETS["openshift-4.15"]
    ALL_OS.write_bytes(pickle.dumps(capture(set_dir, db, None, extra)))
    print(f"wrote {CACHE} and {ALL_OS}")


if __name__ == "__main__":
    main()
