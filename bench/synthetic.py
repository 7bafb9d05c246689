"""Synthetic large indexes for the startup bench: the openshift-4.15 index (26k chunks) repeated
with varied text (each copy drops a different 10% of every chunk's words and adds a copy tag, as
bench/retrieval.py does) and random unit vectors, up to a target number of chunks.

    python bench/synthetic.py SOURCE.db DEST.db TARGET
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np


def vary(text: str, keep: np.ndarray, tag: str) -> str:
    words = text.split(" ")
    return " ".join(w for w, k in zip(words, keep[: len(words)], strict=False) if k) + f" {tag}"


def make_synthetic(src: Path, dst: Path, target: int) -> Path:
    """Copy the index at `src` to `dst` and add varied copies of its chunks up to `target` chunks
    (built once: an existing `dst` is kept)."""
    if dst.exists():
        return dst
    tmp = dst.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    shutil.copy(src, tmp)
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    rng = np.random.default_rng(11)
    (model,) = con.execute("SELECT value FROM meta WHERE key = 'embed_model'").fetchone()
    docs = con.execute("SELECT * FROM docs").fetchall()
    chunks = con.execute(
        'SELECT id, doc, ord, heading_path, text, search_text, start, "end" FROM chunks'
    ).fetchall()
    n, copy = len(chunks), 1
    while n < target:
        take = chunks[: target - n]
        tag = f"copy{copy}"
        con.executemany(
            "INSERT INTO docs VALUES (?,?,?,?,?,?,?,?,?)", [(f"{tag}/{d[0]}", *d[1:]) for d in docs]
        )
        vecs = rng.standard_normal((len(take), 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        keep = rng.random((len(take), 4096)) > 0.1
        rows, embs = [], []
        for j, ((cid, doc, ord_, path, text, st, s, e), v) in enumerate(
            zip(take, vecs, strict=True)
        ):
            h = f"{tag}-{cid}"
            header, _, _ = st.partition("\n\n")
            body = vary(text, keep[j], tag)
            rows.append(
                (f"{cid}.c{copy}", f"{tag}/{doc}", ord_, path, body, f"{header}\n\n{body}", h, s, e)
            )
            embs.append((h, model, v.tobytes()))
        con.executemany(
            "INSERT INTO chunks"
            ' (id, doc, ord, heading_path, text, search_text, text_hash, start, "end")'
            " VALUES (?,?,?,?,?,?,?,?,?)",
            rows,
        )
        con.executemany("INSERT INTO embeddings VALUES (?,?,?)", embs)
        con.commit()
        n += len(take)
        copy += 1
        print(f"{dst.name}: {n:,} chunks", flush=True)
    con.execute("DELETE FROM bm25_cache")
    con.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    con.commit()
    con.close()
    tmp.rename(dst)
    return dst


if __name__ == "__main__":
    make_synthetic(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
