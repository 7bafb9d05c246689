"""Startup: time and peak memory to open the index and answer the first question offline, in a fresh
process, at 26k chunks (openshift-4.15) and 200k chunks (the same, repeated with random vectors).

    python bench/startup.py
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
from _util import ROOT, WORK, eval_db, table, write_section

from index.embedders import make_embedder

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
sys.path.insert(0, %(root)r)
from bot.settings import Settings
from bot.wiring import make_pipeline
t1 = time.perf_counter()
p = make_pipeline(Settings.load(environ={}), %(db)r)
p.state = None
p.engine.embedder.embed_query("load the model")
t2 = time.perf_counter()
p.engine.loaded()
t3 = time.perf_counter()
ans = p.answer("How do I add a certificate authority to the cluster proxy?")
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "model_s": t2 - t1, "open_index_s": t3 - t2,
                  "first_answer_s": t4 - t3, "decision": ans.decision,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_200k(src, dst, target=200_000) -> None:
    """Copy the index and add varied copies of its chunks (random unit vectors) up to `target`
    chunks."""
    if dst.exists():
        return
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    rng = np.random.default_rng(11)
    (model,) = con.execute("SELECT value FROM meta WHERE key = 'embed_model'").fetchone()
    docs = con.execute("SELECT * FROM docs").fetchall()
    chunks = con.execute(
        'SELECT id, doc, ord, heading_path, text, search_text, start, "end" FROM chunks'
    ).fetchall()
    n, copy = len(chunks), 1
    while n < target:
        take = chunks[: target - n]
        con.executemany(
            "INSERT INTO docs VALUES (?,?,?,?,?,?,?,?,?)",
            [(f"copy{copy}/{d[0]}", *d[1:]) for d in docs],
        )
        vecs = rng.standard_normal((len(take), 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rows, embs = [], []
        for (cid, doc, ord_, path, text, st, s, e), v in zip(take, vecs, strict=True):
            h = f"copy{copy}-{cid}"
            rows.append(
                (
                    f"{cid}-{copy}",
                    f"copy{copy}/{doc}",
                    ord_,
                    path,
                    text,
                    st + f" copy{copy}",
                    h,
                    s,
                    e,
                )
            )
            embs.append((h, model, v.tobytes()))
        con.executemany(
            "INSERT INTO chunks"
            ' (id, doc, ord, heading_path, text, search_text, text_hash, start, "end")'
            " VALUES (?,?,?,?,?,?,?,?,?)",
            rows,
        )
        con.executemany("INSERT INTO embeddings VALUES (?,?,?)", embs)
        n += len(take)
        copy += 1
    con.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    con.commit()
    con.close()


def run(db) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD % {"root": str(ROOT), "db": str(db)}],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    embedder = make_embedder()
    db26 = eval_db("openshift-4.15", embedder)
    db200 = WORK / "openshift-x200k.db"
    make_200k(db26, db200)
    rows = []
    for label, db in (("26k", db26), ("200k", db200)):
        # the first run builds and caches the BM25 postings; measure the second, as a restarted bot
        # sees it
        run(db)
        r = run(db)
        print(label, r)
        rows.append(
            [
                label,
                r["import_s"],
                r["model_s"],
                r["open_index_s"],
                r["first_answer_s"],
                r["open_index_s"] + r["first_answer_s"],
                f"{r['peak_rss_mb']:.0f}",
            ]
        )
    headers = [
        "index",
        "imports s",
        "model load s",
        "open index s",
        "first answer s",
        "index + first answer s",
        "peak RSS MB",
    ]
    startup_table = table(headers, rows)
    body = f"""## Startup

`python bench/startup.py` — a fresh process opens the index and answers one question offline
({embedder.name}). Seconds; "index + first answer" is the figure the target is about (model load
apart).

{startup_table}
"""
    write_section("startup", body)


if __name__ == "__main__":
    main()
