"""How a place in the docs is named: the section path under a doc's title and the
"Title › Section" label every answer, source list and abstain shows."""

from __future__ import annotations


def section_path(title: str, heading_path: list[str]) -> list[str]:
    """The headings under the doc's title (a first heading that repeats the title is dropped)."""
    parts = list(heading_path)
    if parts and parts[0].strip().lower() == title.strip().lower():
        parts = parts[1:]
    return parts


def label(title: str, heading_path: list[str]) -> str:
    """ "Title › Section › Subsection": how every answer, source list and abstain names a place in
    the docs, the title once."""
    return " › ".join([title, *section_path(title, heading_path)])
