"""Read a docs folder: markdown files with YAML front matter, and an optional intents.yaml.

The folder is walked for `*.md` / `*.markdown` with hidden files and folders left out, each doc
once at its real path, symbolic links resolved and followed only inside it (`walk_docs`); a file
is decoded as UTF-8 (a BOM allowed), its front matter split off by python-frontmatter's YAML
handler and read, like intents.yaml, by PyYAML's safe loader under limits (aliases, nesting,
expansion, size), then checked field by field. A file that
cannot be used is a `DocError` with a one-line reason; an optional field that breaks its rule is
left out with a warning. The rules, field by field: docs/cli.md."""

from __future__ import annotations

import hashlib
import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler

from .markdown import capped, first_heading

MARKDOWN_SUFFIXES = {".md", ".markdown"}
DEFAULT_INTENT = "general"
# Limits of the front matter and intents.yaml schema (parse_doc, load_intents_yaml)
INTENT = re.compile(r"[a-z0-9_-]{1,64}")
URL = re.compile(r"https?://[^\s<>|\"`{}\\^]+", re.I)
# a docs owner: a Slack user (U…/W…), user group (S…) or channel (C…/G… or #name) — Slack's ids
# hold a digit, so a capitalised name ("SAM") is a name —, or a plain name (a person or team as
# they are known: "Alice Ng", "@docs-team", "alice@example.com"); Slack's own mention forms
# (<@U…>, <!subteam^S…>, <#C…|name>) are read as the id they hold
OWNER = re.compile(r"[UWSCG](?=[A-Z]*[0-9])[A-Z0-9]{2,20}|#[a-z0-9][a-z0-9._-]{0,79}")
SLACK_MENTION = re.compile(r"<(?:@|!subteam\^|#)([A-Z0-9]+)(?:\|[^>]*)?>")
OWNER_NAME = re.compile(r"(?=[^#<]).*[^\W\d_].*")  # a name: has a letter; not a channel or markup
NAME_CHARS = re.compile(r"[\w .@'’()+/-]+")
MAX_OWNER_NAME = 100
# freshness: how often a doc is to be reviewed, and the paths of the same repository it describes
MIN_REVIEW_DAYS = 1
MAX_WATCHES = 20
MAX_WATCH_CHARS = 300
MAX_TITLE = 200
MAX_FIELD = 100  # subcategory, version
MAX_URL = 2048
MAX_RELATED = 20
MAX_DESCRIPTION = 2000
MAX_EXAMPLES = 50
MAX_EXAMPLE = 500
MAX_FRONT_MATTER = 256 * 1024  # characters of YAML before the body
# A doc over this size is skipped unread (FIELDGUIDE_MAX_DOC_MB): the largest doc of the eval sets
# is 278 KB (openshift-4.15's release notes), so 5 MB is ~18x any real page, and at the measured
# ~135 chunks/s a doc at the cap (~2,600 chunks) embeds in ~20 s; a 50 MB file took an index run
# past 600 s and 970 MB.
MAX_DOC_BYTES = 5 * 1024 * 1024
MAX_INTENTS_YAML = 1024 * 1024


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
    owner: str | None = None
    reviewed: str | None = None  # the date someone last checked it (ISO 8601)
    review_every: str | None = None  # how often it is to be checked: a duration ("90d")
    watches: list[str] = field(default_factory=list)  # repository paths it describes
    # optional front-matter fields left out (the doc indexed all the same): one line each
    warnings: list[str] = field(default_factory=list)


@dataclass
class Walk:
    files: list[Path]  # under the root, each at its real path (a link's target, once)
    skipped: list[dict]  # {"path", "reason"}: links not followed


def _link_target(link: Path, base: Path) -> tuple[Path | None, str]:
    """(the resolved target, "") of a symbolic link that may be followed, else (None, why not)."""
    try:
        target = link.resolve(strict=True)
    except FileNotFoundError:
        return None, "symbolic link to nothing (its target does not exist)"
    except (OSError, RuntimeError):
        return None, "symbolic link loop"
    if not target.is_relative_to(base):
        return None, "symbolic link to a file outside the docs folder: not followed"
    if any(part.startswith(".") for part in target.relative_to(base).parts):
        return None, "symbolic link to a hidden file or folder: not followed"
    return target, ""


def walk_docs(root: Path) -> Walk:
    """The markdown files under `root`, hidden files and folders left out, each once, at its real
    path. A symbolic link is resolved once and judged by where it lands: inside `root` (and not
    hidden), its target is a doc at the target's own path, whatever the link is named or where
    it sits, in any walk order; outside, dangling or looping, it is skipped and named (links
    whose name is not markdown are left out silently). A link to `../.env` named `notes.md` never
    puts the bot's secrets into the index, and a link to a folder adds nothing the walk does not
    reach: the folder is walked where it is. So a doc has one path, the one a channel's scope
    folder judges it by (a link inside `billing/` to `internal/` gives billing nothing)."""
    base = root.resolve()
    found: set[Path] = set()  # real paths
    skipped: list[dict] = []

    def walk(folder: Path) -> None:
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith("."):
                continue
            is_markdown = entry.suffix.lower() in MARKDOWN_SUFFIXES
            if entry.is_symlink():
                target, why = _link_target(entry, base)
                if target is None:
                    if is_markdown or entry.is_dir():
                        rel = entry.relative_to(root).as_posix()
                        skipped.append({"path": rel, "reason": why})
                elif is_markdown and target.is_file():  # a folder's docs are found where it is
                    found.add(target)
            elif entry.is_dir():
                walk(entry)
            elif is_markdown and entry.is_file():  # not a FIFO or a device: reading would block
                found.add(entry.resolve())

    walk(root)
    return Walk(sorted(root / p.relative_to(base) for p in found), skipped)


def list_markdown(root: Path) -> list[Path]:
    return walk_docs(root).files


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


class _FrontMatter(YAMLHandler):
    """python-frontmatter's YAML handler with our limits: its boundary is a line of exactly
    `---` (a YAML document may also end with `...`), and the YAML is loaded by `load_yaml` (the
    safe loader with the limits below), never by the library's default loader."""

    FM_BOUNDARY = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.M)

    def detect(self, text: str) -> bool:
        return text.startswith("---") and super().detect(text)

    def load(self, fm: str, **kwargs: object) -> Any:
        return load_yaml(fm, "front matter")


FRONT_MATTER = _FrontMatter()


def _front_matter(text: str) -> tuple[str, int]:
    """(the YAML of a leading front matter block, offset just past its closing line), or ("", 0):
    split by python-frontmatter, keeping the offset (its `parse` strips the text, and chunks
    point into the file)."""
    if not FRONT_MATTER.detect(text):
        return ("", 0)
    try:
        fm, body = FRONT_MATTER.split(text)
    except ValueError:  # no closing line: not front matter
        return ("", 0)
    return fm, len(text) - len(body)


class LimitedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with limits: a handful of aliases, bounded nesting (the composer
    recurses: a 100,000-deep list is a RecursionError), and what the YAML reads as bounded by
    the text it came from (`expanded_size`): 38 aliases over 20 levels of anchors double a list
    20 times over, a 200 KB file read as gigabytes once anything walks or prints the result."""

    MAX_ALIASES = 50
    MAX_DEPTH = 20

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > self.MAX_ALIASES:
                raise DocError(f"more than {self.MAX_ALIASES} YAML aliases (*name): not accepted")
        self._depth += 1
        try:
            if self._depth > self.MAX_DEPTH:
                raise DocError(f"YAML nested deeper than {self.MAX_DEPTH} levels: not accepted")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# Aliases exist to say a thing once and use it a few times: what a YAML text reads as (its nodes
# and characters, each alias counted as what it stands for) may be a few times the text, never
# more. The floor lets a small file share one anchor widely.
EXPANSION = 4
EXPANSION_FLOOR = 64 * 1024


def expanded_size(node: yaml.Node, limit: int) -> int:
    """The nodes plus scalar characters that `node` stands for with every alias expanded,
    counted without expanding anything (each node's size computed once); stops past `limit`."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()  # being counted: met again inside itself, it is endless

    def size(n: yaml.Node) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        if id(n) in open_:
            return limit + 1
        open_.add(id(n))
        if isinstance(n, yaml.ScalarNode):
            total = 1 + len(n.value)
        elif isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(c) for c in n.value)
        else:
            total = 1 + sum(size(k) + size(v) for k, v in n.value)
        sizes[id(n)] = min(total, limit + 1)
        open_.discard(id(n))
        return sizes[id(n)]

    return size(node)


def load_yaml(text: str, what: str) -> object:
    """Parse YAML with the limits above; a one-line DocError naming `what` when it is bad."""
    loader = LimitedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        limit = max(EXPANSION * len(text), EXPANSION_FLOOR)
        if expanded_size(node, limit) > limit:
            raise DocError(
                f"{what} reads as over {EXPANSION} times its own size through YAML aliases"
                " (*name): not accepted"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise DocError(f"malformed {what}: {problem}{where}") from None
    finally:
        loader.dispose()


# a value shown in a message: cut while it is formatted (reprlib), never formatted whole first
SHOWN = reprlib.Repr()
SHOWN.maxlevel, SHOWN.maxstring, SHOWN.maxother, SHOWN.maxlist, SHOWN.maxdict = 2, 60, 60, 4, 4


def shown(value: object) -> str:
    return SHOWN.repr(value)


def _kind(value) -> str:
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _scalar(meta: dict, key: str, limit: int) -> str | None:
    """A short single-line text field: numbers and dates are read as text (`version: 2`)."""
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, list | dict):
        raise DocError(f"front matter '{key}' must be text, got {_kind(value)}")
    text = " ".join(str(value).split())
    if len(text) > limit:
        raise DocError(f"front matter '{key}' is {len(text):,} characters (at most {limit})")
    return text or None


def intent_name(value: object, where: str) -> str:
    """An intent as stored: a slug of at most 64 characters of a-z, 0-9, '_' and '-'. Case and
    surrounding spaces are normalised (`API` → `api`); anything else is rejected with `where`
    named, so a typo never becomes a bucket of its own."""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise DocError(f"{where} must be a single name, got {_kind(value)}")
    name = str(value).strip().lower()
    if INTENT.fullmatch(name):
        return name
    shown = name if len(name) <= 40 else f"{name[:40]}… ({len(name):,} characters)"
    hint = re.sub(r"[^a-z0-9_-]+", "-", name).strip("-")[:64]
    suggestion = f"; e.g. {hint!r}" if hint and len(name) <= 64 else ""
    raise DocError(
        f"{where} {shown!r} is not a valid intent name: use at most 64 characters of a-z, 0-9,"
        f" '_' and '-'{suggestion}"
    )


def _related(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # "api, billing" is accepted too
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list):
        raise DocError(f"front matter 'related_intents' must be a list, got {_kind(value)}")
    if len(value) > MAX_RELATED:
        raise DocError(f"front matter 'related_intents' has {len(value)} names (at most 20)")
    names = [intent_name(v, "front matter 'related_intents' entry") for v in value]
    return list(dict.fromkeys(names))


def _url(meta: dict) -> str | None:
    url = _scalar(meta, "url", MAX_URL)
    if url is not None and (" " in url or not URL.fullmatch(url) or not url.isprintable()):
        shown = url if len(url) <= 60 else url[:60] + "…"
        raise DocError(
            f"front matter 'url' {shown!r} is not an http(s) link (no spaces, invisible characters"
            " or <>| allowed)"
        )
    return url


def owner_id(value: object, where: str) -> str | None:
    """A docs owner as stored: a Slack user, user-group or channel id, a #channel-name, or a
    plain name (who to ask, though Slack cannot reach them: `is_slack_owner`)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise DocError(f"{where} must be a Slack id, #channel or a name, got {_kind(value)}")
    text = " ".join(value.split())
    text = m.group(1) if (m := SLACK_MENTION.fullmatch(text)) else text
    if OWNER.fullmatch(text):
        return text
    shown = text if len(text) <= 40 else text[:40] + "…"
    if (
        OWNER_NAME.fullmatch(text)
        and NAME_CHARS.fullmatch(text)
        and len(text) <= MAX_OWNER_NAME
        and not OWNER.fullmatch(text.upper())  # "u0alice": a Slack id mistyped, not a name
    ):
        return text
    raise DocError(
        f"{where} {shown!r} is not an owner: a Slack user (U…), user group (S…) or channel"
        f" (C… or #name), or a name of at most {MAX_OWNER_NAME} letters, digits, spaces and"
        " .@'()+/-"
    )


def is_slack_owner(owner: str) -> bool:
    """Whether Slack can reach `owner` (an id or #channel), rather than it being a plain name."""
    return bool(OWNER.fullmatch(owner))


def _reviewed(value: object) -> str | None:
    """`reviewed`: a date (YAML reads 2026-03-01 as one), not in the future."""
    import datetime as dt

    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, str):
        try:
            value = dt.date.fromisoformat(value.strip())
        except ValueError:
            value = None
    if not isinstance(value, dt.date):
        raise DocError("front matter 'reviewed' must be a date such as 2026-03-01")
    if value > dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1):
        raise DocError(f"front matter 'reviewed' {value.isoformat()} is in the future")
    return value.isoformat()


def _review_every(value: object) -> str | None:
    """`review_every`: a duration of at least a day ("90d", "12w")."""
    from .durations import DURATIONS, seconds_of

    if value is None or value == "":
        return None
    text = " ".join(str(value).split()) if isinstance(value, str | int | float) else None
    try:
        seconds = seconds_of(text) if text and len(text) <= 20 else -1.0
    except ValueError:
        seconds = -1.0
    if seconds < MIN_REVIEW_DAYS * 86400:
        shown = text if text and len(text) <= 20 else _kind(value)
        raise DocError(
            f"front matter 'review_every' {shown!r} is not a duration of a day or more"
            f" (such as {DURATIONS})"
        )
    return text


def _watches(value: object) -> list[str]:
    """`watches`: paths in the docs' repository (from its top folder) whose change makes the
    doc stale; a path or a list of them."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise DocError(
            f"front matter 'watches' must be a path or a list of them, got {_kind(value)}"
        )
    if len(value) > MAX_WATCHES:
        raise DocError(f"front matter 'watches' has {len(value)} paths (at most {MAX_WATCHES})")
    out = []
    for v in value:
        path = v.strip().strip("/") if isinstance(v, str) else ""
        parts = path.split("/")
        if (
            not path
            or len(path) > MAX_WATCH_CHARS
            or path.startswith(("-", "~", ":"))
            or any(p in ("", ".", "..") for p in parts)
            or "\\" in path
            or any(ord(c) < 32 for c in path)
        ):
            raise DocError(
                f"front matter 'watches' entry {shown(v)} is not a path inside the repository"
                " (relative to its top folder, no '..', at most 300 characters)"
            )
        out.append(path)
    return list(dict.fromkeys(out))


def parse_doc(rel_path: str, data: bytes) -> Doc:
    text = decode(data)
    fm_yaml, end = _front_matter(text)
    meta: dict = {}
    if end:
        if len(fm_yaml) > MAX_FRONT_MATTER:
            raise DocError(f"front matter is {len(fm_yaml):,} characters (at most 262,144)")
        loaded = FRONT_MATTER.load(fm_yaml) or {}
        if not isinstance(loaded, dict):
            raise DocError("front matter is not a mapping of keys to values")
        meta = loaded
    body = text[end:]
    if not body.strip():
        raise DocError("no content after the front matter")
    intent = meta.get("intent")
    warnings: list[str] = []

    def optional(read, *args):
        """An optional field's value, or None with a warning: one bad link, owner or label
        leaves the field out, never the doc's content."""
        try:
            return read(*args)
        except DocError as e:
            warnings.append(f"{e}: the field is left out")
            return None

    heading = first_heading(body)
    title = (
        optional(_scalar, meta, "title", MAX_TITLE)
        or (heading and capped(heading, MAX_TITLE))
        or Path(rel_path).stem.replace("-", " ").replace("_", " ")[:MAX_TITLE]
    )
    return Doc(
        path=rel_path,
        title=title,
        intent=DEFAULT_INTENT
        if intent is None or intent == ""
        else intent_name(intent, "front matter 'intent'"),
        text=text,
        body_start=end,
        hash=content_hash(data),
        subcategory=optional(_scalar, meta, "subcategory", MAX_FIELD),
        related_intents=optional(_related, meta.get("related_intents")) or [],
        version=optional(_scalar, meta, "version", MAX_FIELD),
        url=optional(_url, meta),
        owner=optional(owner_id, meta.get("owner"), "front matter 'owner'"),
        reviewed=optional(_reviewed, meta.get("reviewed")),
        review_every=optional(_review_every, meta.get("review_every")),
        watches=optional(_watches, meta.get("watches")) or [],
        warnings=warnings,
    )


@dataclass
class IntentInfo:
    description: str = ""
    examples: list[str] = field(default_factory=list)
    owner: str | None = None


def _intent_info(name: str, info) -> IntentInfo:
    """One entry of intents.yaml: a description, or {description, examples}."""
    if info is None or isinstance(info, str):
        info = {"description": info}
    if not isinstance(info, dict):
        raise DocError(
            f"intents.yaml: '{name}' must be a description or {{description, examples, owner}}"
        )
    description = info.get("description") or ""
    if not isinstance(description, str):
        raise DocError(f"intents.yaml: '{name}' description must be text, got {_kind(description)}")
    if len(description) > MAX_DESCRIPTION:
        raise DocError(
            f"intents.yaml: '{name}' description is {len(description):,} characters"
            f" (at most {MAX_DESCRIPTION:,})"
        )
    examples = info.get("examples") or []
    if not isinstance(examples, list):
        raise DocError(
            f"intents.yaml: '{name}' examples must be a list of questions, got {_kind(examples)}"
        )
    if len(examples) > MAX_EXAMPLES:
        raise DocError(f"intents.yaml: '{name}' has {len(examples)} examples (at most 50)")
    for q in examples:
        if not isinstance(q, str) or not q.strip():
            raise DocError(
                f"intents.yaml: '{name}' examples must be questions (text), got {shown(q)}"
            )
        if len(q) > MAX_EXAMPLE:
            raise DocError(
                f"intents.yaml: an example of '{name}' is {len(q):,} characters (at most 500)"
            )
    return IntentInfo(
        " ".join(description.split()),
        [" ".join(q.split()) for q in examples],
        owner_id(info.get("owner"), f"intents.yaml: '{name}' owner"),
    )


def load_intents_yaml(root: Path) -> dict[str, IntentInfo]:
    """`intents.yaml` at the docs root: {intent: {description, examples}}, checked against the
    same limits as front matter. Missing file = {}. A symbolic link is read only when its target
    is inside the docs folder."""
    path = root / "intents.yaml"
    if not path.is_file():
        return {}
    if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
        raise DocError(
            "intents.yaml is a symbolic link to a file outside the docs folder: not read"
        )
    data = path.read_bytes()
    if len(data) > MAX_INTENTS_YAML:
        raise DocError(f"intents.yaml is {len(data):,} bytes (at most 1 MB)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DocError(
            f"intents.yaml is not UTF-8 text (invalid byte at offset {e.start})"
        ) from None
    parsed = load_yaml(text, "intents.yaml") or {}
    if not isinstance(parsed, dict):
        raise DocError("intents.yaml must map each intent name to {description, examples}")
    out: dict[str, IntentInfo] = {}
    for key, info in parsed.items():
        name = intent_name(key, "intents.yaml: intent")
        out[name] = _intent_info(name, info)
    return out
