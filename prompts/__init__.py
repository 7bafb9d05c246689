"""Prompts live here as markdown files, one per step; `$name` placeholders are filled by `render`.
A prompt's hash goes into the audit log, so an answer can be traced to the exact prompt text."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from string import Template

HERE = Path(__file__).parent


@cache
def load(name: str) -> str:
    return (HERE / f"{name}.md").read_text(encoding="utf-8")


def render(name: str, **values) -> str:
    return Template(load(name)).substitute(values)


def prompt_hash(name: str) -> str:
    return hashlib.sha256(load(name).encode()).hexdigest()[:12]
