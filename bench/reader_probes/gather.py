# ruff: noqa
# mypy: ignore-errors
"""Read every calibration example of the 7 corpora once; pickle Examples plus the top-10 hits' texts."""

import pickle, sys, time
from pathlib import Path
import numpy as np

sys.path.insert(0, "/work/main")
from bot import api
from bot.settings import Settings
from bot.indexing import index_docs
from bot.evaluation import calibrate as fit
from router.engine import Engine
from router import condense, words, decide

SETS = {
    "claude-docs": "/work/shared/eval/claude-docs",
    "openshift-4.15": "/work/shared/eval/openshift-4.15",
    "examples": "/work/main/examples",
    "fastapi": "/work/main/bench/sets/fastapi",
    "traefik": "/work/main/bench/sets/traefik",
    "duckdb": "/work/main/bench/sets/duckdb",
    "chezmoi": "/work/main/bench/sets/chezmoi",
}
names = sys.argv[1:] or list(SETS)
settings = Settings.load() if hasattr(Settings, "load") else api._settings(None)
embedder = api._guide(settings).embedder
for name in names:
    out = Path(f"/tmp/x45/{name}.pkl")
    if out.exists():
        continue
    t = time.time()
    d = Path(SETS[name])
    db = api.eval_index(api.EVAL_WORK, d, embedder)
    index_docs(settings.at(db), d / "docs", embedder, replace=True)
    engine = Engine(db, embedder)
    items = fit.load_set(d)
    ex = fit.corpus_examples(name, items, engine, 0, fit.HEADINGS)
    # the hits again for the question/offtopic/hidden kinds, with texts, for reader experiments
    searcher = engine.loaded().searcher
    extra = []
    for e in ex:
        if e.kind not in ("question", "offtopic"):
            extra.append(None)
            continue
        text, _ = words.correct_typos(condense.plain(e.question), searcher)
        vec, _ = engine.embed_query(text)
        hits = searcher.search(text, vec, k=20)
        extra.append(
            {
                "text": text,
                "vec": vec,
                "hits": [
                    (
                        h.row,
                        float(getattr(h, "score", 0)),
                        h.chunk.get("text", ""),
                        h.chunk.get("heading_path"),
                        h.chunk.get("doc"),
                    )
                    for h in hits
                ],
            }
        )
    pickle.dump({"examples": ex, "extra": extra}, open(out, "wb"))
    print(name, len(ex), f"{time.time() - t:.0f}s", flush=True)
