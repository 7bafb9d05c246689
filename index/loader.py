"""Read a docs folder: markdown files with YAML front matter, and an optional intents.yaml."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import frontmatter
import yaml

MARKDOWN_SUFFIXES = {".md", ".markdown"}
DEFAULT_INTENT = "general"
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# python-frontmatter's loader; we keep its raw result to reject non-mappings
_YAML = frontmatter.YAMLHandler()


class DocError(Exception):
    """A file that cannot be indexed; the message is the one-line reason shown to the user."""


@dataclass
class Doc:
    path: str  # posix path relative to the docs root: the doc's id
    title: str
    intent: str
    text: str  # the whole file, decoded
    body_start: int  # offset in `text` where the markdown after the front matter begins
    hash: str
    subcategory: str | None = None
    related_intents: list[str] = field(default_factory=list)
    version: str | None = None
    url: str | None = None


def list_markdown(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.suffix.lower() in MARKDOWN_SUFFIXES
        and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode(data: bytes) -> str:
    if not data.strip():
        raise DocError("empty file")
    if b"\x00" in data[:8192]:
        raise DocError("binary file (contains NUL bytes), not markdown")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DocError(f"not UTF-8 text (invalid byte at offset {e.start})") from None


def _front_matter(text: str) -> tuple[str, int]:
    """(the YAML of a leading front matter block, offset just past its closing line), or ("", 0)."""
    m = re.match(r"---[ \t]*\r?\n", text)
    if not m:
        return ("", 0)
    close = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.M).search(text, m.end())
    return (text[m.end() : close.start()], close.end()) if close else ("", 0)


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    raise DocError(f"front matter 'related_intents' must be a list, got {type(value).__name__}")


def _optional_str(meta: dict, key: str) -> str | None:
    value = meta.get(key)
    return None if value is None or str(value).strip() == "" else str(value).strip()


def first_heading(markdown: str) -> str | None:
    in_fence = None
    for line in markdown.splitlines():
        fence = FENCE.match(line)
        if fence:
            marker = fence.group(1)
            if in_fence is None:
                in_fence = marker
            elif marker[0] == in_fence[0] and len(marker) >= len(in_fence):
                in_fence = None
            continue
        if in_fence is None and (m := HEADING.match(line)) and m.group(2).strip():
            return m.group(2).strip()
    return None


def parse_doc(rel_path: str, data: bytes) -> Doc:
    text = decode(data)
    fm_yaml, end = _front_matter(text)
    meta: dict = {}
    if end:
        try:
            meta = _YAML.load(fm_yaml) or {}
        except yaml.YAMLError as e:
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise DocError(f"malformed front matter: {problem}{where}") from None
        if not isinstance(meta, dict):
            raise DocError("front matter is not a mapping of keys to values")
    body = text[end:]
    if not body.strip():
        raise DocError("no content after the front matter")
    intent = meta.get("intent") or DEFAULT_INTENT
    if not isinstance(intent, str):
        raise DocError(f"front matter 'intent' must be a single name, got {intent!r}")
    title = (
        _optional_str(meta, "title")
        or first_heading(body)
        or Path(rel_path).stem.replace("-", " ").replace("_", " ")
    )
    return Doc(
        path=rel_path,
        title=title,
        intent=intent.strip(),
        text=text,
        body_start=end,
        hash=content_hash(data),
        subcategory=_optional_str(meta, "subcategory"),
        related_intents=_as_list(meta.get("related_intents")),
        version=_optional_str(meta, "version"),
        url=_optional_str(meta, "url"),
    )


@dataclass
class IntentInfo:
    description: str = ""
    examples: list[str] = field(default_factory=list)


def load_intents_yaml(root: Path) -> dict[str, IntentInfo]:
    """`intents.yaml` at the docs root: {intent: {description, examples}}. Missing file = {}."""
    path = root / "intents.yaml"
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise DocError(f"intents.yaml is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise DocError("intents.yaml must map each intent name to {description, examples}")
    out = {}
    for name, info in data.items():
        info = info if isinstance(info, dict) else {"description": str(info or "")}
        out[str(name)] = IntentInfo(
            str(info.get("description") or ""), [str(q) for q in info.get("examples") or []]
        )
    return out
