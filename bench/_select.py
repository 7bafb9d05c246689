"""Issue 11's search for a better offline quote selection: replay the offline extraction +
compose on the questions bench/_select_capture.py captured, for each unit-scoring variant, scored
as `fieldguide eval --answers` scores answers (token_scores). Writes RESULTS.md section
answer-selection.

    python bench/_select_capture.py && python bench/_select.py [variant ...]
"""

from __future__ import annotations

import math
import pickle
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from _select_capture import CACHE, SETS
from _util import table, write_section

from bot.evaluation.answers import bootstrap, load_stopwords, token_scores
from bot.settings import Settings
from bot.wiring import make_engine
from index.chunker import context_header
from index.embedders import EmbeddingError
from index.search import tokenize
from router import citations, offline
from router.answer import ABSTAIN, Answer


class FakeHit:
    def __init__(self, d: dict):
        self.chunk, self.score, self.row = d["chunk"], d["score"], d["row"]


class CachedEmbedder:
    def __init__(self, real):
        self.real, self.cache = real, {}
        self.name = real.name

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        # by batch: a text's vector depends a little on the batch it is embedded in
        key = tuple(texts)
        if key not in self.cache:
            self.cache[key] = self.real.embed_documents(list(texts))
        return self.cache[key]


@dataclass
class Cfg:
    name: str = "shipped"
    pos: float = 0.0  # position prior: + pos / (1 + unit ordinal in its chunk), on the lex part
    pos_kind: str = "ordinal"  # ordinal | first_block | first | first_prose
    cent: float = 0.0  # lexical centrality weight (on the lex part)
    ecent: float = 0.0  # embedding centrality (unit vec . chunk vec) in the vector part
    focus: float = 0.0  # score penalty for units not of the best chunk, times chunk rank
    ratio: float = offline.RATIO
    max_units: int = offline.MAX_UNITS
    budget: int = offline.BUDGET
    cover_stop: float = 0.0  # stop once chosen units cover this share of question idf (0: off)
    stub_pen: float = 0.0  # penalty for units of "Additional resources"/"Next steps" chunks
    chunk_weight: float = offline.CHUNK_WEIGHT
    embed_k: int = offline.EMBED_CANDIDATES
    extra: dict = field(default_factory=dict)


STUB_HEADINGS = re.compile(
    r"^(additional resources|next steps|see also|related (topics|information|links))$", re.I
)


def chunk_terms(hit, bm25) -> dict[str, float]:
    """idf-weighted term vector of a chunk's text (normalised)."""
    counts = Counter(tokenize(hit.chunk["text"]))
    vec = {}
    for t, c in counts.items():
        i = bm25.vocab.get(t)
        w = float(bm25.idf[i]) if i is not None else 1.0
        vec[t] = max(w, 0.0) * (1 + math.log(c))
    n = math.sqrt(sum(v * v for v in vec.values())) or 1.0
    return {t: v / n for t, v in vec.items()}


def lex_centrality(own: list[str], cvec: dict[str, float], bm25) -> float:
    terms = set(own)
    if not terms:
        return 0.0
    vec = {}
    for t in terms:
        i = bm25.vocab.get(t)
        vec[t] = max(float(bm25.idf[i]) if i is not None else 1.0, 0.0)
    n = math.sqrt(sum(v * v for v in vec.values())) or 1.0
    return sum(v / n * cvec.get(t, 0.0) for t, v in vec.items())


def lexical(cfg: Cfg, units: list, hits, q: list[str], bm25) -> dict[int, float]:
    """Each unit's lexical score (by id(unit)) as shipped, plus the variant's position prior,
    centrality and navigation-section penalty."""
    headers = {
        h.chunk["id"]: tokenize(context_header(h.chunk["title"], h.chunk["heading_path"]))
        for h in hits
    }
    cvecs = {h.chunk["id"]: chunk_terms(h, bm25) for h in hits} if cfg.cent else {}
    ordinal: Counter = Counter()
    first_block: dict[str, int] = {}
    # the chunk opens with prose: its first unit a sentence that is no lead-in
    prose: dict[str, bool] = {}
    for u in units:
        prose.setdefault(
            u.hit.chunk["id"], u.kind == "sentence" and not u.text.rstrip().endswith(":")
        )
    out = {}
    for u in units:
        cid = u.hit.chunk["id"]
        n = ordinal[cid]
        ordinal[cid] += 1
        first_block.setdefault(cid, u.block)
        own = tokenize(u.text)
        lex = 0.6 * bm25.coverage(q, own) + 0.4 * bm25.coverage(q, own + headers[cid])
        prior = {
            "ordinal": 1 / (1 + n),
            "first_block": float(u.block == first_block[cid]),
            "first": float(n == 0),
            "first_prose": float(u.block == first_block[cid] and prose[cid]),
        }
        lex += cfg.pos * prior[cfg.pos_kind]
        if cfg.cent:
            lex += cfg.cent * lex_centrality(own, cvecs[cid], bm25)
        path = u.hit.chunk["heading_path"]
        if cfg.stub_pen and path and STUB_HEADINGS.match(path[-1].strip()):
            lex -= cfg.stub_pen
        out[id(u)] = lex
    return out


def extract(cfg: Cfg, question, query_vec, hits, bm25, embedder, vectors) -> list:
    q = tokenize(question)
    units = [u for h in hits for u in offline.units_of(h)]
    if not units:
        return []
    rank = {h.chunk["id"]: i for i, h in enumerate(hits)}
    lex = lexical(cfg, units, hits, q, bm25)
    cw = cfg.chunk_weight
    for u in units:
        u.score = cw * u.hit.score + (1 - cw) * lex[id(u)] - cfg.focus * rank[u.hit.chunk["id"]]
    units.sort(key=lambda u: -u.score)
    if query_vec is not None:
        top = units[: cfg.embed_k]
        texts = [
            f"{context_header(u.hit.chunk['title'], u.hit.chunk['heading_path'])}\n\n{u.text}"
            for u in top
        ]
        try:
            embs = embedder.embed_documents(texts)
            sims = np.clip(embs @ query_vec, 0, None)
            for u, sim, e in zip(top, sims, embs, strict=True):
                vec_part = float(sim)
                if cfg.ecent and vectors is not None:
                    vec_part += cfg.ecent * float(np.clip(e @ vectors[u.hit.row], 0, None))
                u.score = (
                    cw * u.hit.score
                    + (1 - cw) * (0.4 * lex[id(u)] + 0.6 * vec_part)
                    - cfg.focus * rank[u.hit.chunk["id"]]
                )
            units[: len(top)] = sorted(top, key=lambda u: -u.score)
        except EmbeddingError:
            pass
    return offline._passages(choose(cfg, units, q, bm25))


def lead_in(u, chunk_units: list, steps: int):
    """The lead-in ending in ":" that brings what it introduces: `u` itself, or with `steps` (the
    variant "steps n") one of the n units before it, whose step `u` is; None."""
    if u.text.rstrip().endswith(":"):
        return u
    before = sorted((v for v in chunk_units if v.start < u.start), key=lambda v: -v.start)
    return next((v for v in before[:steps] if v.text.rstrip().endswith(":")), None)


def choose(cfg: Cfg, units: list, q: list[str], bm25) -> list:
    """router/offline.py `_choose` with the variant's knobs (ratio, units, budget, a coverage
    stop), copied rather than parameterised so that the shipped function stays plain."""
    best = units[0].score
    chosen: list = []
    seen: list[str] = []
    chars = 0
    budget = cfg.budget

    def take(u) -> bool:
        nonlocal chars
        key = re.sub(r"[^a-z0-9]", "", u.text.lower())
        if any(key in s or s in key for s in seen):
            return False
        seen.append(key)
        chosen.append(u)
        chars += len(u.text)
        return True

    def covered() -> float:
        terms = [t for u in chosen for t in tokenize(u.text)]
        return bm25.coverage(q, terms)

    by_chunk: dict[str, list] = {}
    for u in units:
        by_chunk.setdefault(u.hit.chunk["id"], []).append(u)
    for u in units:
        full = len(chosen) >= cfg.max_units or chars >= budget
        enough = bool(cfg.cover_stop) and covered() >= cfg.cover_stop
        if chosen and (u.score < cfg.ratio * best or full or enough):
            break
        if chosen and chars + len(u.text) > budget * 1.3:
            continue
        siblings = by_chunk[u.hit.chunk["id"]]
        lead = lead_in(u, siblings, cfg.extra.get("steps", 0))
        if not take(u):
            continue
        if lead:
            take(lead)
        # what a lead-in ending in ":" introduces, or the other rows of a small table
        for v in offline._companions(lead or u, siblings):
            if chars + len(v.text) > budget * 1.5:
                break
            take(v)
    return chosen


def compose_text(question, passages, hits_all) -> str:
    ans = Answer(question, question, ABSTAIN, "", offline=True)
    ans.hits = hits_all
    by_chunk = citations.number_sources(passages, {h["id"]: h for h in hits_all}, "")
    return offline.compose(passages, by_chunk, ans)


def load():
    data = pickle.loads(CACHE.read_bytes())
    settings = Settings.load(environ={}, dotenv=None)
    envs = {}
    embedder = None
    for name, (set_dir, db, _, _) in SETS.items():
        engine = make_engine(settings, str(db))
        loaded = engine.loaded()
        if embedder is None:
            embedder = CachedEmbedder(engine.embedder)
        envs[name] = (loaded.searcher.bm25, loaded.searcher.vectors, load_stopwords(set_dir))
    return data, envs, embedder


def run(cfg: Cfg, data, envs, embedder, check: bool = False) -> dict:
    out = {}
    for name, items in data.items():
        bm25, vectors, stop = envs[name]
        per = []
        lengths, precs, ms = [], [], []
        changed_abstain = 0
        for it in items["answers"] + items["offtopic"]:
            answerable = it in items["answers"] and True
            if it["decision"] == ABSTAIN or it["extract"] is None:
                text, abstain = it["text"], True
            else:
                e = it["extract"]
                hits = [FakeHit(h) for h in e["hits"]]
                t0 = time.perf_counter()
                passages = extract(cfg, e["condensed"], e["vec"], hits, bm25, embedder, vectors)
                ms.append(time.perf_counter() - t0)
                if not passages:
                    changed_abstain += 1
                    text, abstain = "", True
                else:
                    text, abstain = compose_text(it["question"], passages, it["hits_all"]), False
                if check and text != it["text"]:
                    print("MISMATCH", name, it["id"])
            if not answerable:
                continue
            r, p = token_scores(text, it["answer"], stop)
            per.append(0.0 if abstain else r)
            if not abstain:
                precs.append(p)
                lengths.append(len(text))
        out[name] = {
            "recall": float(np.mean(per)),
            "precision": float(np.mean(precs)),
            "chars": int(np.median(lengths)),
            "per": per,
            "ci": bootstrap(per, 0),
            "changed_abstain": changed_abstain,
            "extract_ms": float(np.percentile(ms, 50) * 1000) if ms else 0.0,
        }
    return out


VARIANTS = [
    Cfg(),
    *[Cfg(f"pos-ord {w}", pos=w) for w in (0.05, 0.1, 0.2, 0.3)],
    *[Cfg(f"pos-first {w}", pos=w, pos_kind="first") for w in (0.05, 0.1, 0.2)],
    *[Cfg(f"pos-fblock {w}", pos=w, pos_kind="first_block") for w in (0.05, 0.1, 0.2)],
    *[Cfg(f"pos-fprose {w}", pos=w, pos_kind="first_prose") for w in (0.1, 0.2)],
    *[
        Cfg(f"pos-fprose {w} + cent 0.2", pos=w, pos_kind="first_prose", cent=0.2)
        for w in (0.1, 0.2)
    ],
    *[Cfg(f"cent {w}", cent=w) for w in (0.1, 0.2, 0.4)],
    *[Cfg(f"ecent {w}", ecent=w) for w in (0.2, 0.4, 0.8)],
    *[Cfg(f"focus {w}", focus=w) for w in (0.02, 0.05, 0.1, 0.2)],
    *[Cfg(f"cover {w}", cover_stop=w) for w in (0.8, 0.9, 1.0)],
    *[Cfg(f"stub {w}", stub_pen=w) for w in (0.1, 0.3)],
    *[Cfg(f"steps {n}", extra={"steps": n}) for n in (1, 2, 3)],
]


def main() -> None:
    data, envs, embedder = load()
    base = run(Cfg(), data, envs, embedder, check=True)
    names = sys.argv[1:]
    variants = [v for v in VARIANTS if not names or v.name in names or v.name == "shipped"]
    rows = []
    for cfg in variants:
        res = run(cfg, data, envs, embedder) if cfg.name != "shipped" else base
        cells = []
        for n in data:
            r, b = res[n], base[n]
            better = sum(x > y + 1e-9 for x, y in zip(r["per"], b["per"], strict=True))
            worse = sum(x < y - 1e-9 for x, y in zip(r["per"], b["per"], strict=True))
            scores = f"{r['recall']:.3f} / {r['precision']:.3f}"
            cells.append(f"{scores} · {r['chars']} · +{better} −{worse}")
        rows.append([cfg.name, *cells])
        print(cfg.name, *cells, sep=" | ", flush=True)
    if names:  # a partial run prints only
        return
    body = f"""## Choosing the quoted units: variants tried (`bench/_select.py`)

`python bench/_select_capture.py && python bench/_select.py` — the offline extraction replayed on
what `ask` hands it (the top 3 chunks of each answered question, captured once), each variant
scoring the units differently; token recall / precision (shared/eval/README.md), median
characters, and how many questions' recall rose / fell against the shipped scoring. claude-docs
100 questions, openshift-4.15 100 sampled (seed 0), examples 30. Variants: a position prior
(+w / (1 + the unit's place in its chunk), + w for the chunk's first unit or first block), lexical
centrality (the unit's idf-weighted overlap with its own chunk), embedding centrality (the unit's
cosine to its chunk's vector), focus (−w per rank of the unit's chunk), stopping once the chosen
units cover a share of the question's idf weight, a penalty for navigation sections, and "steps
n": a chosen unit with a lead-in ending in ":" among the n units before it brings that lead-in and
what it introduces, as a chosen lead-in does (the steps of "To add more test cases:"). None raises
recall and precision on claude-docs and recall on openshift together; the position prior that
lifts the examples (written with the answer first) costs openshift, also when it applies only to
a chunk that opens with prose and is combined with centrality, so the scoring is unchanged.

{table(["variant", *data], rows)}
"""
    write_section("answer-selection", body)


if __name__ == "__main__":
    main()
