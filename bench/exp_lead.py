"""Experiment: the sections of the top N chunks read as chunks before any taste."""

# ruff: noqa: E402, N812
# usage: python bench/exp_lead.py N SET [SET ...]
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]
import reads as R

from router import context as C
from router.citations import paragraphs

LEAD = int(sys.argv[1])


def pack2(hits, docs, budget, terms, names=None):
    groups = C.grouped(hits[: C.reach(hits, budget)])
    top = hits[:LEAD] if LEAD > 1 else hits[:1]
    lead = list(dict.fromkeys(h.section for h in top))
    packer = C.Packer(budget)
    for s in lead:
        keep = sum(C.least(mine[0]) for t, mine in groups.items() if t not in lead)
        mine = [h for h in top if h.section == s] if LEAD > 1 else groups[s]
        packer.deep(s, mine, docs, keep, whole=False)
    later = [h for h in hits if h.section not in lead]
    rest = C.grouped(later[: C.reach(later, packer.left)])
    lengths = [len(p) for h in hits for p in paragraphs(h.chunk["text"])]
    cap = int(np.median(lengths) / C.CHARS_PER_TOKEN) + C.BLOCK_TOKENS if lengths else budget
    sections = list(rest)
    wraps = [C.packaging(rest[s][:1]) + C.BLOCK_TOKENS for s in sections]
    for n, section in enumerate(sections):
        wrap = sum(wraps[n:])
        candidates = sum(len(rest[s]) for s in sections[n:])
        share = min(cap, (packer.left - wrap) // max(1, candidates))
        mine = rest[section]
        lead_c = mine[0].chunk
        taste = C.excerpt(
            [h.chunk for h in mine], terms, names or [], docs.searcher.bm25, share * len(mine)
        )
        if share > 0 and paragraphs(taste):
            read = C.Read(
                lead_c["id"], lead_c, taste, mine[0].score, "taste", [lead_c["id"]], section
            )
            packer.offer(section, read)
    order = [*lead, *sections]
    for section in order:
        if section in packer.reads:
            packer.deep(section, groups.get(section) or rest[section], docs, 0)
    return [packer.reads[s] for s in order if s in packer.reads]


C.pack = pack2

from index.embedders import make_embedder

emb = make_embedder()
for name in sys.argv[2:]:
    m = R.measure(name, emb, [2500, 3500])
    for k, v in m["budget"].items():
        a = np.array([(x[0], x[1], x[2]) for x in v], dtype=float)
        print(
            f"LEAD={LEAD} {name:9s} {k:24s} read {a[:, 0].mean():.3f}"
            f" beyond {a[:, 1].mean():.3f} tokens {a[:, 2].mean():.0f}",
            flush=True,
        )
