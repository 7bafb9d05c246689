"""Evaluate a reader model on the eval corpora (none of which it was trained on).

For each corpus whose docs are present: its answerable questions (questions.jsonl) and close
off-topic ones (offtopic.jsonl) are searched with the project's own hybrid search
(FieldGuide.search, the corpus indexed once with the offline embedder). Reported:

- AUC, answerable against off-topic, of the reader's best logit over the top 5 sections, and of the
  best cosine over the same sections for reference;
- hit@1 of a gold section among the answerable questions' top 5: in search order, and reranked
  by the reader; and how often a gold section is in the top 5 / top 20 at all.

    python -m router.reader.evaluate [--model DIR] [--sets examples,fastapi,...] [--search-only]

The search results are cached (.fieldguide/reader-eval/<set>.json), so a second model is scored
without searching again. Needs onnxruntime and tokenizers only (no torch).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from index.chunker import context_header  # noqa: E402

HERE = Path(__file__).resolve().parent
SETS = ("examples", "claude-docs", "openshift-4.15", "fastapi", "traefik", "duckdb", "chezmoi")
CACHE = ROOT / ".fieldguide" / "reader-eval"
TOP_READ, TOP_SEARCH = 5, 20
# reranked by the reader for hit@1: the top 5 it reads (more costs too much on 2 shared cores)
TOP_RERANK = 5
MAX_QUESTION_TOKENS, MAX_TOKENS = 64, 256


def set_dir(name: str) -> Path:
    """The set's folder; a real-question set's docs are laid out by hand, in this checkout or
    in the main one beside it."""
    from bench.harness import set_dir as bench_dir

    d = bench_dir(name)
    if not (d / "docs").is_dir():
        main = Path("/work/main") / d.relative_to(ROOT) if d.is_relative_to(ROOT) else d
        if (main / "docs").is_dir():
            return main
    return d


def _items(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def search_set(name: str) -> dict:
    """Index the set once and search every question; the top 20 hits with what the reader needs."""
    from bot.app import FieldGuide
    from bot.evaluation.retrieval import matches
    from bot.settings import Settings
    from index.embedders import make_embedder
    from index.indexer import index_folder

    cache = CACHE / f"{name}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    d = set_dir(name)
    embedder = make_embedder()
    db = ROOT / ".fieldguide" / "eval" / f"{d.resolve().name}-{embedder.name.replace(':', '-')}.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    index_folder(db, d / "docs", embedder)
    print(f"{name}: indexed in {time.time() - t0:.0f}s", file=sys.stderr)
    guide = FieldGuide.open(Settings.load(environ={}, dotenv=None), db, embedder=embedder)
    out: dict = {"set": name, "questions": []}
    for kind, file in (("answerable", "questions.jsonl"), ("offtopic", "offtopic.jsonl")):
        for q in _items(d / file):
            hits = guide.search(q["question"], k=TOP_SEARCH).hits
            rows = []
            for h in hits:
                c = h.chunk
                rows.append(
                    {
                        "text": f"{context_header(c['title'], c['heading_path'])}\n\n{c['text']}",
                        "vector": float(h.vector),
                        "gold": any(matches(c, g) for g in q.get("gold") or []),
                    }
                )
            out["questions"].append(
                {"id": q["id"], "question": q["question"], "kind": kind, "hits": rows}
            )
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(out))
    return out


class Reader:
    """The exported reader on onnxruntime: logits for (question, section text) pairs."""

    def __init__(self, model_dir: Path, threads: int = 2):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(model_dir / "reader-int8.onnx"), opts, providers=["CPUExecutionProvider"]
        )
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(max_length=MAX_TOKENS, strategy="only_second")
        self.qtok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.qtok.no_truncation()
        self.qtok.no_padding()

    def _cut(self, question: str) -> str:
        e = self.qtok.encode(question, add_special_tokens=False)
        if len(e.ids) <= MAX_QUESTION_TOKENS:
            return question
        return question[: e.offsets[MAX_QUESTION_TOKENS - 1][1]]

    def scores(self, question: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.float32)
        q = self._cut(question)
        # cut long sections first: the tokenizer truncates only after tokenising the whole text
        encs = self.tok.encode_batch([(q, t[: MAX_TOKENS * 8]) for t in texts])
        n = max(len(e.ids) for e in encs)
        ids, mask, types = (np.zeros((len(encs), n), dtype=np.int64) for _ in range(3))
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = e.attention_mask
            types[i, : len(e.ids)] = e.type_ids
        out = self.session.run(
            ["logits"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )[0]
        return out[:, 0]


def auc(pos: list[float], neg: list[float]) -> float:
    """P(a random positive scores above a random negative), ties counted half."""
    if not pos or not neg:
        return float("nan")
    p, n = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


def evaluate(data: dict, reader: Reader | None, per_question: list | None = None) -> dict:
    """The set's figures; per question (set, kind, best logit, best cosine) appended to
    per_question when given."""
    rows: dict[str, list] = {"r_ans": [], "r_off": [], "c_ans": [], "c_off": []}
    hit_search = hit_reader = in5 = in20 = with_gold = 0
    for q in data["questions"]:
        hits = q["hits"]
        k = TOP_RERANK if q["kind"] == "answerable" else TOP_READ
        logits = reader.scores(q["question"], [h["text"] for h in hits[:k]]) if reader else None
        side = "ans" if q["kind"] == "answerable" else "off"
        rows[f"c_{side}"].append(max((h["vector"] for h in hits[:TOP_READ]), default=0.0))
        if logits is not None:
            rows[f"r_{side}"].append(float(logits[:TOP_READ].max()) if len(logits) else -99.0)
        if per_question is not None:
            per_question.append(
                {
                    "set": data["set"],
                    "kind": q["kind"],
                    "logit": rows[f"r_{side}"][-1] if logits is not None else None,
                    "cosine": rows[f"c_{side}"][-1],
                }
            )
        gold = [h["gold"] for h in hits]
        if q["kind"] == "answerable" and any(gold):
            with_gold += 1
            in20 += 1
            in5 += any(gold[:TOP_READ])
            hit_search += gold[0]
            if logits is not None:
                hit_reader += gold[int(np.argmax(logits))]
    n_ans = sum(q["kind"] == "answerable" for q in data["questions"])
    return {
        "set": data["set"],
        "answerable": n_ans,
        "offtopic": len(data["questions"]) - n_ans,
        "auc_reader": auc(rows["r_ans"], rows["r_off"]),
        "auc_cosine": auc(rows["c_ans"], rows["c_off"]),
        "gold_in_top5": in5 / max(n_ans, 1),
        "gold_in_top20": in20 / max(n_ans, 1),
        "hit1_search": hit_search / max(n_ans, 1),
        "hit1_reader": hit_reader / max(n_ans, 1),
        "mean_logit_ans": float(np.mean(rows["r_ans"])) if rows["r_ans"] else float("nan"),
        "mean_logit_off": float(np.mean(rows["r_off"])) if rows["r_off"] else float("nan"),
    }


def table(results: list[dict]) -> str:
    head = (
        "| corpus | answerable | off-topic | AUC reader | AUC cosine | hit@1 search | hit@1 reader"
        " | gold in top 5 | gold in top 20 |\n|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in results:
        lines.append(
            f"| {r['set']} | {r['answerable']} | {r['offtopic']} | {r['auc_reader']:.3f} |"
            f" {r['auc_cosine']:.3f} | {r['hit1_search']:.2f} | {r['hit1_reader']:.2f} |"
            f" {r['gold_in_top5']:.2f} | {r['gold_in_top20']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default=str(HERE), help="folder with reader-int8.onnx")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--search-only", action="store_true", help="index and search, cache, stop")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--rows", help="write each question's best logit and cosine here (jsonl)")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = [s for s in args.sets.split(",") if s]
    present = [s for s in names if (set_dir(s) / "docs").is_dir()]
    missing = sorted(set(names) - set(present))
    if missing:
        print(f"no docs for: {', '.join(missing)}", file=sys.stderr)
    reader = None if args.search_only else Reader(Path(args.model), args.threads)
    results = []
    per_question: list = []
    for name in present:
        data = search_set(name)
        if args.search_only:
            print(f"{name}: {len(data['questions'])} questions searched", file=sys.stderr)
            continue
        t0 = time.time()
        results.append(evaluate(data, reader, per_question))
        print(f"{name}: scored in {time.time() - t0:.0f}s", file=sys.stderr)
    if results:
        print(table(results))
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
        if args.rows:
            Path(args.rows).write_text("".join(json.dumps(r) + "\n" for r in per_question))


if __name__ == "__main__":
    main()
