"""What `fieldguide search` and `ask` print: the question as given, a hit and an answer as JSON,
an answer as text for people."""

from __future__ import annotations

from typing import TYPE_CHECKING

from index.clean import SURROGATES, display
from router.citations import label, updated_ago

if TYPE_CHECKING:
    from router.answer import Answer


def question_of(words: tuple[str, ...]) -> str:
    """The question given as arguments; ValueError when it is not valid text (Python hands over
    bytes that are not UTF-8 as lone surrogates, which no tokenizer or store takes)."""
    question = " ".join(words).strip()
    if bad := SURROGATES.search(question):
        code = ord(bad.group())
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise ValueError(
            f"the question is not valid UTF-8 text ({what}): check the terminal's or the"
            " script's encoding"
        )
    return question


def hit_json(rank: int, h) -> dict:
    c = h.chunk
    return {
        "rank": rank,
        "chunk_id": c["id"],
        "doc": c["doc"],
        "title": c["title"],
        "intent": c["intent"],
        "heading_path": c["heading_path"],
        "bm25": round(h.bm25, 4),
        "vector": round(h.vector, 4),
        "score": round(h.score, 4),
        "text": c["text"],
    }


def answer_json(ans: Answer, show_context: bool = False) -> dict:
    out = ans.to_json()
    if show_context:
        out["context"] = ans.trace.hits
        out["passages"] = [p.__dict__ for p in ans.passages]
    return out


def format_answer(ans: Answer, show_context: bool = False) -> str:
    lines = []
    if show_context:
        lines.append("Retrieved:")
        for i, h in enumerate(ans.trace.hits, 1):
            lines.append(
                f"  {i:>2}. {h['score']:.3f} {display(h['doc'])} ·"
                f" {label(h['title'], h['heading_path'])}"
            )
        lines.append("Passages:")
        lines += [f"  [{p.chunk_id}] {' '.join(p.text.split())[:160]}" for p in ans.passages]
        lines.append("")
    lines += [f"⚠ {ans.caveat}", ""] if ans.caveat else []
    lines += [ans.text, ""]
    if ans.sources:
        lines.append("Sources:")
        for s in ans.sources:
            ago = updated_ago(s.updated)
            lines.append(f"  [{s.n}] {s.label} — {s.url}" + (f" ({ago})" if ago else ""))
            if s.stale:
                lines.append(f"      ⚠ stale: {s.stale}")
    intent = ans.intents[0] if ans.intents else "none"
    stages = " · ".join(f"{k} {v:.0f}" for k, v in ans.trace.timings_ms.items())
    lines.append(f"({ans.decision} · intent {intent} · {stages} ms)")
    lines += [f"Note: {n}" for n in ans.trace.notes]
    if ans.scope is not None:
        lines.append(f"Note: searched only the scope {ans.scope.describe()}")
    return "\n".join(lines)
