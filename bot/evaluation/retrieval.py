"""`fieldguide eval`: retrieval and routing measured on a set of docs with questions and gold
answers, scored as docs/quality.md ("Eval sets: the format") says."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bot.evaluation import ALL_MODES
from index.search import Hit
from router.answer import squash


@dataclass
class Question:
    id: str
    question: str
    intents: list[str]
    gold: list[dict]


def load_items(path: str | Path) -> list[dict]:
    """The question objects of a shared/eval .jsonl file, as dicts (the reference `answer` kept);
    a line that is not one is a ValueError naming the file and line."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
            out.append(
                {
                    "id": str(q["id"]),
                    "question": str(q["question"]),
                    "intents": list(q.get("intents") or []),
                    "gold": list(q.get("gold") or []),
                    "answer": str(q.get("answer") or ""),
                }
            )
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not a question object ({e})") from None
    return out


def load_questions(path: str | Path) -> list[Question]:
    return [Question(q["id"], q["question"], q["intents"], q["gold"]) for q in load_items(path)]


def matches(chunk: dict, gold: dict) -> bool:
    if chunk["doc"] != gold["doc"]:
        return False
    return gold.get("section") is None or squash(gold["section"]) in {
        squash(h) for h in chunk["heading_path"]
    }


def score_question(hits: list[Hit], q: Question) -> dict:
    """Retrieval metrics for one question (None where the question has no gold sections)."""
    chunks = [h.chunk for h in hits]
    out: dict[str, bool | float | None] = {
        "intent_hit@1": bool(chunks) and chunks[0]["intent"] in q.intents
    }
    if not q.gold:
        return out | {"hit@1": None, "hit@5": None, "mrr@10": None, "recall@3": None}
    first = next((i for i, c in enumerate(chunks[:10]) if any(matches(c, g) for g in q.gold)), None)
    out["hit@1"] = first == 0
    out["hit@5"] = first is not None and first < 5
    out["mrr@10"] = 0.0 if first is None else 1.0 / (first + 1)
    out["recall@3"] = sum(any(matches(c, g) for c in chunks[:3]) for g in q.gold) / len(q.gold)
    return out


def summarise(rows: list[dict]) -> dict:
    def mean(key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return round(float(np.mean(vals)), 3) if vals else None

    ms = [r["ms"] for r in rows]
    return {
        "intent_accuracy": mean("intent_accuracy"),
        "intent_hit@1": mean("intent_hit@1"),
        "hit@1": mean("hit@1"),
        "hit@5": mean("hit@5"),
        "mrr@10": mean("mrr@10"),
        "recall@3": mean("recall@3"),
        "p50_ms": round(float(np.percentile(ms, 50)), 2) if ms else None,
        "p95_ms": round(float(np.percentile(ms, 95)), 2) if ms else None,
    }


def run_eval(
    questions: list[Question],
    searcher,
    embed_query,
    modes=ALL_MODES,
    router=None,
    k: int = 10,
    bm25_weight: float = 0.4,
    progress=None,
) -> dict:
    """Score each mode. `router(question, query_vec, rerank=...)` returns a RouteDecision (routed
    and reranked modes);
    `embed_query` is timed apart from retrieval, as the issue asks."""
    vecs, embed_ms = [], []
    for q in questions:
        t = time.perf_counter()
        vecs.append(embed_query(q.question))
        embed_ms.append((time.perf_counter() - t) * 1000)
    result: dict[str, Any] = {
        "questions": len(questions),
        "with_gold": sum(bool(q.gold) for q in questions),
        "embed_ms_p50": round(float(np.percentile(embed_ms, 50)), 2),
        "modes": {},
    }
    details: dict[str, list] = {}
    for mode in modes:
        rows = []
        for q, vec in zip(questions, vecs, strict=True):
            t = time.perf_counter()
            decision = None
            if mode in ("routed", "reranked"):
                decision = router(q.question, vec, rerank=mode == "reranked")
                hits = decision.hits
            elif mode == "oracle":
                hits = searcher.search(
                    q.question, vec, intents=q.intents, k=k, bm25_weight=bm25_weight
                )
            else:
                hits = searcher.search(q.question, vec, k=k, mode=mode, bm25_weight=bm25_weight)
            row = score_question(hits, q) | {"ms": (time.perf_counter() - t) * 1000, "id": q.id}
            if decision is not None:
                row["routed_intent"] = decision.intents[0] if decision.intents else None
                row["intent_accuracy"] = row["routed_intent"] in q.intents
                row["widened"] = decision.widened
            rows.append(row)
            if progress:
                progress(1)
        result["modes"][mode] = summarise(rows)
        details[mode] = rows
    if "routed" in details:
        result["routing"] = _routing_report(questions, details["routed"])
    result["paired"] = [
        paired_difference(details[a], details[b], a, b)
        for a, b in PAIRS
        if a in details and b in details
    ]
    return result


# (mode, baseline) pairs whose per-question difference is reported with an interval
PAIRS = (("routed", "hybrid"), ("reranked", "routed"))
BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED = 2000, 0


def paired_difference(rows: list[dict], base: list[dict], mode: str, baseline: str) -> dict:
    """Mean per-question difference mode − baseline, with a seeded percentile bootstrap 95%
    interval (questions resampled with replacement, the same draw for both modes). The metric is
    MRR@10 when the set has gold sections, else intent hit@1 (a set with gold books only)."""
    metric = "mrr@10" if any(r.get("mrr@10") is not None for r in rows) else "intent_hit@1"
    diffs = np.array(
        [
            float(a[metric]) - float(b[metric])
            for a, b in zip(rows, base, strict=True)
            if a.get(metric) is not None and b.get(metric) is not None
        ]
    )
    if not diffs.size:
        return {"mode": mode, "baseline": baseline, "metric": metric, "questions": 0}
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = diffs[rng.integers(0, diffs.size, (BOOTSTRAP_SAMPLES, diffs.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {
        "mode": mode,
        "baseline": baseline,
        "metric": metric,
        "questions": int(diffs.size),
        "difference": round(float(diffs.mean()), 4),
        "ci95": [round(float(lo), 4), round(float(hi), 4)],
        "better": int((diffs > 0).sum()),
        "worse": int((diffs < 0).sum()),
    }


def _routing_report(questions: list[Question], rows: list[dict]) -> dict:
    per_intent: dict[str, list[bool]] = {}
    confusions: Counter = Counter()
    for q, r in zip(questions, rows, strict=True):
        for intent in q.intents[:1]:
            per_intent.setdefault(intent, []).append(r["intent_accuracy"])
        if not r["intent_accuracy"] and q.intents:
            confusions[(q.intents[0], r["routed_intent"])] += 1
    return {
        "per_intent": {
            i: {"questions": len(v), "accuracy": round(sum(v) / len(v), 3)}
            for i, v in sorted(per_intent.items())
        },
        "confusions": [
            {"gold": g, "routed": p, "count": n} for (g, p), n in confusions.most_common(10)
        ],
        "widened": sum(bool(r.get("widened")) for r in rows),
    }


def format_table(result: dict) -> str:
    cols = [
        "intent_accuracy",
        "intent_hit@1",
        "hit@1",
        "hit@5",
        "mrr@10",
        "recall@3",
        "p50_ms",
        "p95_ms",
    ]
    heads = [
        "mode",
        "intent acc",
        "intent hit@1",
        "hit@1",
        "hit@5",
        "MRR@10",
        "recall@3",
        "p50 ms",
        "p95 ms",
    ]
    lines = [
        f"{result.get('set', '')}: {result['questions']} questions"
        f" ({result['with_gold']} with gold sections); "
        f"query embedding p50 {result['embed_ms_p50']} ms (not in the retrieval times)",
        "",
    ]
    lines.append("| " + " | ".join(heads) + " |")
    lines.append("|" + "---|" * len(heads))
    for mode, m in result["modes"].items():
        cells = [
            "—" if m[c] is None else (f"{m[c]:.3f}" if "ms" not in c else f"{m[c]:.1f}")
            for c in cols
        ]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    for p in result.get("paired", []):
        if p["questions"]:
            lo, hi = p["ci95"]
            lines.append(
                f"\n{p['mode']} − {p['baseline']} ({p['metric']}, {p['questions']} questions):"
                f" {p['difference']:+.3f}, bootstrap 95% interval [{lo:+.3f}, {hi:+.3f}];"
                f" better on {p['better']}, worse on {p['worse']}"
            )
    routing = result.get("routing")
    if routing:
        lines += [
            "",
            f"Routing: widened on {routing['widened']} of {result['questions']} questions.",
            "Per intent (routed):",
        ]
        for intent, v in routing["per_intent"].items():
            lines.append(f"  {intent:<40} {v['accuracy']:.3f}  ({v['questions']} questions)")
        if routing["confusions"]:
            lines.append("Most common confusions (gold → routed):")
            for c in routing["confusions"]:
                lines.append(f"  {c['gold']} → {c['routed']}: {c['count']}")
    return "\n".join(lines)
