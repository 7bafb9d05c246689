"""A person's answer in a hand-off thread turned into a doc change, a draft for the docs' owners
to review: the nearest doc's section (the first one the answer looked at) with the answer added —
by Claude, from the thread, in the doc's own style and only inside that section (prompts/
draft.md), or offline as a new subsection under it, headed by the question, holding the replies.

With a git docs source (FIELDGUIDE_DOCS_GIT) the change is committed on a new branch
(`fieldguide/draft-…`) of a working copy of its own beside the index (`<index>.drafts`), and
pushed to the docs remote where the token allows; otherwise, or when the push is refused, it is
kept as a patch. Nothing is ever written to the docs' branch itself (`checked_branch`), nor to the
index's working copy; with a docs folder the folder is left as it is and the change is a patch."""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from index.gitsource import GitError, GitSource

from .settings import Settings

log = logging.getLogger(__name__)

BRANCH_PREFIX = "fieldguide/draft-"
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
FENCE = re.compile(r"^\s*(```|~~~)")
MAX_REPLY_CHARS = 4_000  # of the thread's replies, in all
MAX_HEADING_CHARS = 120
AUTHOR = ("fieldguide", "fieldguide@localhost")  # the commits' author: the owner pushes the merge


class DraftError(Exception):
    """No draft could be made; the message is fit to show the owner."""


@dataclass
class Draft:
    doc: str
    section: str
    text: str  # the doc's new markdown
    branch: str = ""
    commit_sha: str = ""
    pushed: bool = False
    patch: str = ""


def headings(text: str) -> list[tuple[int, int, str]]:
    """(offset of the line, level, heading text) of each ATX heading outside fenced code."""
    out, offset, fenced = [], 0, False
    for line in text.splitlines(keepends=True):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := HEADING.match(line.rstrip("\n"))):
            out.append((offset, len(m.group(1)), m.group(2).strip()))
        offset += len(line)
    return out


def section_span(text: str, heading: str) -> tuple[int, int, int]:
    """(start, end, level) of the section headed `heading` (its subsections with it); the whole
    doc (level 1) when no heading matches."""
    found = headings(text)
    for n, (start, level, title) in enumerate(found):
        if title == heading:
            end = next((o for o, lv, _ in found[n + 1 :] if lv <= level), len(text))
            return start, end, level
    return 0, len(text), 1


def offline_section(section: str, level: int, question: str, replies: list[str]) -> str:
    """The section with a new subsection at its end: the question as its heading, the replies."""
    title = " ".join(question.split())
    if len(title) > MAX_HEADING_CHARS:
        title = title[: MAX_HEADING_CHARS - 1].rsplit(" ", 1)[0] + "…"
    body = "\n\n".join(r.strip() for r in replies if r.strip())
    return f"{section.rstrip()}\n\n{'#' * min(level + 1, 6)} {title}\n\n{body}\n\n"


def claude_section(
    client: Any, model: str, section: str, question: str, replies: list[str]
) -> str | None:
    """Claude's section with the answer added (prompts/draft.md); None when Claude fails or
    changes the heading."""
    import anthropic

    from prompts import render
    from router.messages import structured

    thread = "\n\n".join(replies)
    try:
        data, _ = structured(
            client,
            model,
            render("draft"),
            f"<section>\n{section}\n</section>\n\nQuestion: {question}\n\n"
            f"<thread>\n{thread}\n</thread>",
            {
                "type": "object",
                "properties": {"section": {"type": "string"}},
                "required": ["section"],
                "additionalProperties": False,
            },
            4000,
            "draft",
        )
    except (anthropic.APIError, ValueError) as e:
        log.warning("Claude could not draft the change (%s): drafted offline", e)
        return None
    new = data.get("section")
    first = section.split("\n", 1)[0].strip()
    if not isinstance(new, str) or new.split("\n", 1)[0].strip() != first:
        log.warning("Claude's draft changed the section's heading: drafted offline")
        return None
    return new.rstrip() + "\n\n"


def changed_doc(
    text: str,
    heading: str,
    question: str,
    replies: list[str],
    client: Any = None,
    model: str = "",
) -> str:
    """The doc's text with the answer added to the section headed `heading`."""
    start, end, level = section_span(text, heading)
    section = text[start:end]
    new = claude_section(client, model, section, question, replies) if client else None
    if new is None:
        new = offline_section(section, level, question, replies)
    return text[:start] + new + text[end:].lstrip("\n")


def patch_of(doc: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{doc}",
            f"b/{doc}",
        )
    )


def checked_branch(name: str, protected: str) -> str:
    """`name` when it is a drafts branch, never the docs' own branch."""
    if not name.startswith(BRANCH_PREFIX) or name in (protected, "main", "master"):
        raise DraftError(f"refusing to write to branch {name!r}")
    return name


def drafts_copy(settings: Settings) -> GitSource:
    """The drafts' own working copy of FIELDGUIDE_DOCS_GIT, beside the index."""
    db = Path(settings.db)
    return GitSource(
        settings.docs_git,
        settings.docs_branch,
        db.with_name(db.name + ".drafts"),
        settings.docs_git_path,
        settings.docs_git_token,
        settings.git_timeout,
    )


def make_draft(
    settings: Settings,
    row: dict,
    heading: str,
    doc: str,
    replies: list[str],
    client: Any = None,
) -> Draft:
    """The draft of audit row `row`'s question answered by `replies`, in `doc`'s section
    `heading`: on a pushed branch, a branch kept with its patch, or a patch (module docstring)."""
    question = " ".join(row["question"].split())
    replies = [r[:MAX_REPLY_CHARS] for r in replies][:20]
    model = settings.answer_model
    if not settings.docs_git:
        path = Path(settings.docs) / doc
        try:
            before = path.read_text(encoding="utf-8")
        except OSError as e:
            raise DraftError(f"cannot read {doc} ({e.strerror})") from None
        after = changed_doc(before, heading, question, replies, client, model)
        return Draft(doc, heading, after, patch=patch_of(doc, before, after))
    git = drafts_copy(settings)
    try:
        git.pull()
        path = git.root / doc
        before = path.read_text(encoding="utf-8")
        after = changed_doc(before, heading, question, replies, client, model)
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
        branch = checked_branch(f"{BRANCH_PREFIX}{row['id']}-{stamp}", settings.docs_branch)
        git.git("checkout", "-q", "-B", branch, cwd=git.checkout)
        path.write_text(after, encoding="utf-8")
        rel = path.relative_to(git.checkout).as_posix()
        git.git("add", "--", rel, cwd=git.checkout)
        name, email = AUTHOR
        message = (
            f"docs: answer “{question[:60]}” in {doc}\n\n"
            "Drafted by fieldguide from a reply in a Slack hand-off thread."
        )
        git.git(
            "-c", f"user.name={name}", "-c", f"user.email={email}",
            "commit", "-q", "-m", message, cwd=git.checkout,
        )  # fmt: skip
        sha = git.git("rev-parse", "HEAD", cwd=git.checkout).strip()
        patch = git.git("format-patch", "-1", "--stdout", "HEAD", cwd=git.checkout)
    except (GitError, OSError) as e:
        raise DraftError(f"could not make the draft in the docs repository: {e}") from None
    draft = Draft(doc, heading, after, branch, sha, patch=patch)
    try:
        git.git("push", "-q", "--", "origin", f"HEAD:refs/heads/{branch}", cwd=git.checkout)
        draft.pushed = True
    except GitError as e:  # no right to push: the patch is kept for the owner
        log.warning("draft %s not pushed: %s", branch, e)
    return draft
