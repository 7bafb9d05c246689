"""Local embedder speed: all-MiniLM-L6-v2 on sentence-transformers/torch against ONNX Runtime
(fp32 and int8), and how close the ONNX vectors are to the torch ones.

    python bench/embedder_speed.py [--onnx-dir DIR] [--db DB ...] [--sample 2000]

Texts are the `search_text` of indexed chunks: a seeded sample from the first --db, all chunks of
the others. The ONNX model is exported into --onnx-dir first if it is not there. Other processes may
share the CPU, so every timing is taken twice and the better one is kept.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from harness import ROOT, eval_path

from index.onnx_model import DEFAULT_DIR, OnnxEmbedder, export  # noqa: E402  (no torch import)


def load_texts(dbs: list[str], sample: int, seed: int) -> tuple[list[str], list[str]]:
    texts, notes = [], []
    for n, db in enumerate(dbs):
        if not Path(db).is_file():
            notes.append(f"{db} missing, skipped")
            continue
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = [r[0] for r in con.execute("SELECT search_text FROM chunks ORDER BY id")]
        con.close()
        if n == 0 and len(rows) > sample:
            rows = random.Random(seed).sample(rows, sample)
        texts += rows
        notes.append(f"{len(rows)} from {db}")
    return texts, notes


def load_seconds(code: str) -> float:
    """A fresh interpreter's time to import, load the model and embed one query (better of two)."""
    snippet = (
        f"import time; t = time.perf_counter(); {code}; e.embed_query('warm up'); "
        "print(time.perf_counter() - t)"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", snippet], cwd=ROOT, capture_output=True, text=True, check=True
        )
        for _ in range(2)
    ]
    return min(float(r.stdout.split()[-1]) for r in runs)


def throughput(embedder, texts: list[str]) -> tuple[float, np.ndarray]:
    """Texts a second over all texts (better of two runs) and the vectors."""
    embedder.embed_documents(texts[:8])  # warm up: load the model, first-call allocations
    best = 0.0
    for _ in range(2):
        t = time.perf_counter()
        vecs = embedder.embed_documents(texts)
        best = max(best, len(texts) / (time.perf_counter() - t))
    return best, vecs


def nearest(vecs: np.ndarray, k: int = 10) -> np.ndarray:
    """Each text as a query: the indices of its k nearest other texts."""
    sims = vecs @ vecs.T
    np.fill_diagonal(sims, -np.inf)
    return np.argsort(-sims, axis=1)[:, :k]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnx-dir", default=str(DEFAULT_DIR))
    ap.add_argument(
        "--db",
        action="append",
        help="chunk databases; the first is sampled (default: the "
        "openshift-4.15 and claude-docs indexes in .fieldguide/eval, as fieldguide eval builds)",
    )
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-fp32", action="store_true", help="skip the fp32 ONNX model")
    args = ap.parse_args()

    t = time.perf_counter()
    export(args.onnx_dir)
    print(f"ONNX model in {args.onnx_dir} (export or check: {time.perf_counter() - t:.1f} s)")
    default = [str(eval_path(s)) for s in ("openshift-4.15", "claude-docs")]
    texts, notes = load_texts(args.db or default, args.sample, args.seed)
    print(
        f"texts: {len(texts)} ({'; '.join(notes)}), "
        f"mean {np.mean([len(x) for x in texts]):.0f} chars"
    )
    print(f"cpus: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.2f}")

    from index.embedders import TorchEmbedder

    onnx = f"from index.onnx_model import OnnxEmbedder; e = OnnxEmbedder({args.onnx_dir!r}"
    runs: list[tuple[str, TorchEmbedder | OnnxEmbedder, str]] = [
        ("torch", TorchEmbedder(), "from index.embedders import TorchEmbedder; e = TorchEmbedder()")
    ]
    if not args.no_fp32:
        runs.append(
            ("onnx fp32", OnnxEmbedder(args.onnx_dir, quantized=False), onnx + ", quantized=False)")
        )
    runs.append(("onnx int8", OnnxEmbedder(args.onnx_dir), onnx + ")"))

    print(f"\n{'embedder':<12}{'name':<32}{'load s':>8}{'texts/s':>9}")
    vecs = {}
    for label, embedder, code in runs:
        load = load_seconds(code)
        rate, vecs[label] = throughput(embedder, texts)
        print(f"{label:<12}{embedder.name:<32}{load:>8.2f}{rate:>9.1f}", flush=True)

    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    ref = vecs["torch"]
    top_ref = nearest(ref)
    for label in [k for k in vecs if k != "torch"]:
        cos = (ref * vecs[label]).sum(axis=1)
        top = nearest(vecs[label])
        overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top_ref, top, strict=True)])
        print(
            f"{label} vs torch: cosine mean {cos.mean():.5f} min {cos.min():.5f}; "
            f"top-10 neighbours in common {overlap:.1%}"
        )


if __name__ == "__main__":
    main()
