"""Who owns each doc and what it watches, read beside the docs by every index run: the docs
repository's CODEOWNERS (GitHub's rules, by the `codeowners` library: the last pattern that
matches a path names its owners), the person who last changed each doc in git, and when each
path a doc `watches` last changed. Docs in no git working copy have none of these."""

from __future__ import annotations

import logging
from pathlib import Path

from .gitsource import last_commits, path_changed, repository_top

log = logging.getLogger(__name__)

# where GitHub looks for CODEOWNERS, in its order; it ignores a file over 3 MB
CODEOWNERS_PLACES = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
MAX_CODEOWNERS_BYTES = 3 * 1024 * 1024
MAX_WATCHED = 500  # distinct watched paths read per run (each is one `git log`)


def codeowners_text(top: Path) -> str:
    """The repository's CODEOWNERS (the first GitHub would read), or ""."""
    for place in CODEOWNERS_PLACES:
        path = top / place
        try:
            if path.is_file() and path.stat().st_size <= MAX_CODEOWNERS_BYTES:
                return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return ""


def code_owners(text: str, paths: dict[str, str]) -> dict[str, str]:
    """doc → its owners in CODEOWNERS `text` (space-separated, as written: `@alice @org/docs`),
    for `paths` (doc → its path from the repository's top); docs no rule gives an owner are left
    out. A line the library cannot read is skipped, as GitHub skips a line of invalid syntax."""
    from codeowners import CodeOwners

    kept = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            CodeOwners(line)
        except ValueError as e:
            log.warning("CODEOWNERS line %d skipped: %s", n, e)
            continue
        kept.append(line)
    if not any(line.strip() for line in kept):
        return {}
    rules = CodeOwners("\n".join(kept))
    out = {}
    for doc, path in paths.items():
        if names := " ".join(name for _, name in rules.of(path)):
            out[doc] = names
    return out


def doc_facts(root: Path, watches: dict[str, list[str]]) -> dict[str, dict]:
    """For each doc under `root` (its path → the paths it watches): {"codeowner", "author",
    "watched" ({watched path: its last change, UTC ISO 8601})}, each None when not known."""
    facts: dict[str, dict] = {
        doc: {"codeowner": None, "author": None, "watched": None} for doc in watches
    }
    top = repository_top(root)
    if top is None:
        return facts
    try:
        prefix = root.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        return facts
    prefix = "" if prefix == "." else prefix + "/"
    for doc, owner in code_owners(codeowners_text(top), {d: prefix + d for d in watches}).items():
        facts[doc]["codeowner"] = owner
    for doc, author in last_commits(root, list(watches), "%an <%ae>").items():
        facts[doc]["author"] = author
    changed: dict[str, str | None] = {}
    for path in list(dict.fromkeys(p for ps in watches.values() for p in ps))[:MAX_WATCHED]:
        changed[path] = path_changed(top, path)
    for doc, paths in watches.items():
        if paths:
            facts[doc]["watched"] = {p: changed.get(p) for p in paths}
    return facts
