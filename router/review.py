"""Claude's written answer reviewed before it stands: its claims checked (router/claims.py), and,
when the check finds sentences the passages they cite do not state, the answer asked for once
more with those sentences named (`compose.repair`, prompts/repair.md). The rewrite is checked as
the first answer was and replaces it only when it is whole, cites what checks out, and the check
finds fewer unsupported sentences in it; otherwise the first answer stands with its caveat. The
rewrite is not streamed: the returned text replaces what was (bot/slack/stream.py). A sentence
the check finds stated by passages it does not cite is then cited where they state it
(`claims.recite`).

The rewrite is asked for only while the question's deadline leaves time for a reply as long as
the first one took and for the check's reserve after it, so an answer never waits past its
deadline for it; an answer the check finds whole is never asked again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import claims, compose
from .context import CHARS_PER_TOKEN, merged
from .messages import add_usage
from .run import Run

if TYPE_CHECKING:
    from .context import Context
    from .corpus import Corpus

WRITTEN = (compose.OK, compose.INCOMPLETE, compose.CUT)  # an answer written, whose claims count


def review(
    written: compose.Written,
    read: Context,
    docs: Corpus,
    run: Run,
    models: dict,
    tokens: int,
    deadline: float,
    first_byte: float | None = None,
) -> tuple[compose.Written, claims.Checked | None]:
    """The answer as it stands after its review (the module doc), and its claim check (None when
    nothing written needs one). `read`: what it was written from; `tokens`: the read's budget,
    for the cited sections read whole; `deadline`: the question's, for the check's reserve;
    `first_byte`: the seconds the rewrite's stream may wait for each read."""
    if written.status not in WRITTEN:
        return written, None
    run.tell("checking")
    checked = check(written, read, docs, run, models.get("check", ""), tokens)
    talk, reserve = written.conversation, claims.reserve(deadline)
    repairable = written.status == compose.OK and checked.unsupported
    if repairable and talk is not None and run.claude.remaining() >= talk.took + reserve:
        until = run.claude.ends - reserve
        written, checked = repaired(
            written, checked, talk, read, docs, run, models, tokens, until, first_byte
        )
    written, note = claims.recite(written, checked)
    run.trace.notes += [note] if note else []
    gaps = [s.text for s in checked.sentences if s.verdict == claims.NOT_COVERED]
    if gaps:  # what the answer says the docs lack, in its words: the owners' gaps read it
        run.trace.route["gaps"] = gaps
    return written, checked


def repaired(
    written: compose.Written,
    checked: claims.Checked,
    talk: compose.Conversation,
    read: Context,
    docs: Corpus,
    run: Run,
    models: dict,
    tokens: int,
    until: float,
    first_byte: float | None,
) -> tuple[compose.Written, claims.Checked]:
    """The answer written again with its unsupported sentences named, and its check, when the
    rewrite stands (the module doc); else the first answer and its check. `until`: where the
    rewrite's stream is cut (on the run's clock), the check's reserve after it."""
    bad = checked.unsupported

    def ask(client) -> compose.Written:
        return compose.repair(client, models["answer"], talk, bad, until, run.claude.clock)

    # what the audit keeps of it: the unsupported sentences before and after, and whether it stood
    rewritten = run.trace.route["rewritten"] = {"unsupported": len(bad), "after": None}
    again, why = run.claude.attempt("repair", ask, first_byte)
    if again is not None:
        add_usage(run.trace.usage, "answer", again.usage)
    if again is None or again.status != compose.OK or not again.cited:
        why = why or (again.status if again and again.status != compose.OK else "nothing cited")
        run.trace.notes.append(f"the answer written again did not stand ({why})")
        rewritten["stood"] = False
        return written, checked
    rechecked = check(again, read, docs, run, models.get("check", ""), tokens)
    now = rechecked.unsupported
    kept = rechecked.ran and len(now) < len(bad)
    rewritten |= {"after": len(now) if rechecked.ran else None, "stood": kept}
    found = f"found {len(now)}" if rechecked.ran else f"did not run ({rechecked.why_not})"
    run.trace.notes.append(
        f"claim check: {len(bad)} unsupported sentence{'s' * (len(bad) != 1)}; the answer was"
        f" written again naming them, and its check {found}"
        + ("" if kept else ": the first answer stands")
    )
    return (again, rechecked) if kept else (written, checked)


def check(
    written: compose.Written, read: Context, docs: Corpus, run: Run, model: str, tokens: int
) -> claims.Checked:
    """The claim check of `written`: its cited sections read whole where they fit in `tokens`,
    every other block sent read for what it states but cites elsewhere, each named by its page's
    title and headings."""
    cited = {c.source for c in written.citations if c.verified}
    whole = cited_sections(read, docs, cited, tokens)
    labels = {s.n: s.label for s in read.sources.values()}
    checked = claims.check(run.claude, model, written, whole, read.citations(), labels)
    if checked.usage:
        add_usage(run.trace.usage, "check", checked.usage)
    return checked


def cited_sections(read: Context, docs: Corpus, cited: set[int], budget: int) -> dict[int, str]:
    """The text of each `cited` source's section as the docs write it (every chunk of it,
    merged), for the sections that fit in an equal share of `budget` tokens: what the claim
    check reads a citation against, the section it names rather than the pieces of it sent."""
    keys = {s.n: k for k, s in read.sources.items() if s.n in cited}
    share = budget * CHARS_PER_TOKEN / max(1, len(keys))
    out = {}
    for n, key in keys.items():
        chunks = docs.section_chunks(read.sections[key]) if key in read.sections else []
        text = merged(chunks) if chunks else ""
        if text and len(text) <= share:
            out[n] = text
    return out
