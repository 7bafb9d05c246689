"""Channel scopes (FIELDGUIDE_SCOPES): which intents and doc folders a Slack channel's questions are
routed and searched in.

    channels:
      C0123ABC: {intents: [billing], folders: [billing/]}
      "#platform": {folders: [api/, webhooks/]}
      default: {intents: [general]}        # DMs and channels not listed; leave out to search all

A channel is named by its id (C…/G…) or its name (#name or name, resolved through
conversations.list once, at start-up). A scope holds the chunks of its intents' docs and of the docs
under its folders. The file is read with index/loader.py's limited safe YAML loader and checked
against the index when loaded: every unknown intent, folder (no doc of the index under it), channel
name and malformed entry is named in one ScopeError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from index.loader import MAX_INTENTS_YAML, DocError, intent_name, load_yaml
from index.store import Reader, doc_intents
from router.engine import Scope

DEFAULT = "default"  # the entry for DMs and channels not listed
CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,20}")
CHANNEL_NAME = re.compile(r"#?[a-z0-9][a-z0-9._-]{0,79}")
MAX_LIST_PAGES = 50  # conversations.list pages read at most (1,000 channels each)


class ScopeError(ValueError):
    """A scopes file that cannot be used; the message names every problem."""


@dataclass
class Scopes:
    by_key: dict[str, Scope]  # as written in the file: channel id, "#name" or "default"
    by_channel: dict[str, Scope] = field(default_factory=dict)  # channel id → scope

    def for_channel(self, channel: str) -> Scope | None:
        """The scope of a question asked in `channel` (an id, or a #name from the CLI): its
        entry, else `default`, else None (everything)."""
        found = self.by_channel.get(channel) or self.by_key.get(channel)
        if found is None and not channel.startswith("#"):
            found = self.by_key.get("#" + channel)
        return found or self.by_key.get(DEFAULT)

    def names(self) -> list[str]:
        return [k for k in self.by_key if k.startswith("#")]

    def resolve(self, client: Any) -> None:
        """Channel names → ids through conversations.list (public and private channels the app
        can see); a ScopeError names the channels not found."""
        names = {k[1:]: s for k, s in self.by_key.items() if k.startswith("#")}
        if not names:
            return
        cursor = None
        for _ in range(MAX_LIST_PAGES):
            resp = client.conversations_list(
                types="public_channel,private_channel",
                exclude_archived=True,
                limit=1000,
                cursor=cursor,
            )
            for ch in resp.get("channels", []):
                if ch.get("name") in names:
                    self.by_channel[ch["id"]] = names[ch["name"]]
            cursor = (resp.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                break
        found = set(self.by_channel.values())
        missing = sorted(f"#{n}" for n, s in names.items() if s not in found)
        if missing:
            raise ScopeError(
                f"scopes: no channel the app can see is named {', '.join(missing)}"
                " (invite the app, or name the channel by its id)"
            )


def _names(value: Any, key: str, where: str, problems: list[str]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        problems.append(f"{where}: '{key}' must be a list of names")
        return []
    return [str(v) for v in value]


def _entry(
    key: str, entry: Any, intents: set[str], docs: list[str], problems: list[str]
) -> Scope | None:
    """One channel's {intents, folders}; its problems appended to `problems`."""
    where = f"channel {key!r}"
    if not isinstance(entry, dict) or set(entry) - {"intents", "folders"}:
        problems.append(f"{where} must be a mapping of intents and/or folders")
        return None
    before = len(problems)
    named: list[str] = []
    for raw in _names(entry.get("intents"), "intents", where, problems):
        try:
            named.append(intent_name(raw, f"{where} intent"))
        except DocError as e:
            problems.append(str(e))
    unknown = [i for i in named if i not in intents]
    if unknown:
        problems.append(f"{where}: no doc of the index has intent {', '.join(unknown)}")
    folders = []
    for folder in _names(entry.get("folders"), "folders", where, problems):
        f = folder.strip().strip("/")
        if not f or f.startswith(".") or ".." in Path(f).parts:
            problems.append(f"{where}: folder {folder!r} must be a path inside the docs")
        elif not any(d.startswith(f + "/") for d in docs):
            problems.append(f"{where}: no doc of the index is under folder {folder!r}")
        else:
            folders.append(f + "/")
    if not named and not folders and len(problems) == before:
        problems.append(f"{where} names no intents and no folders")
    return Scope(key, tuple(dict.fromkeys(named)), tuple(dict.fromkeys(folders)))


def parse_scopes(text: str, intents: set[str], docs: list[str]) -> Scopes:
    """A scopes file's text checked against the index's `intents` and doc paths `docs`."""
    try:
        data = load_yaml(text, "scopes file")
    except DocError as e:
        raise ScopeError(str(e)) from None
    if not isinstance(data, dict) or set(data) - {"channels"}:
        raise ScopeError("scopes file must be a mapping with one key, channels")
    channels = data.get("channels") or {}
    if not isinstance(channels, dict):
        raise ScopeError("scopes file: 'channels' must map channels to {intents, folders}")
    problems: list[str] = []
    by_key: dict[str, Scope] = {}
    for raw_key, entry in channels.items():
        key = str(raw_key).strip()
        where = f"channel {key!r}"
        if key != DEFAULT and not CHANNEL_ID.fullmatch(key):
            if not CHANNEL_NAME.fullmatch(key):
                problems.append(f"{where} is neither a channel id (C…) nor a channel name")
                continue
            key = "#" + key.lstrip("#")
        scope = _entry(key, entry, intents, docs, problems)
        if scope is not None:
            by_key[key] = scope
    if problems:
        raise ScopeError("scopes file: " + "; ".join(problems))
    return Scopes(by_key)


def load_scopes(path: str | Path, intents: set[str], docs: list[str]) -> Scopes:
    path = Path(path)
    try:
        if path.stat().st_size > MAX_INTENTS_YAML:
            raise ScopeError(f"{path} is larger than {MAX_INTENTS_YAML:,} bytes")
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise ScopeError(f"cannot read the scopes file {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ScopeError(f"{path} is not UTF-8 text") from None
    try:
        return parse_scopes(text, intents, docs)
    except ScopeError as e:
        raise ScopeError(f"{path}: {e}") from None


def scopes_for_index(path: str, db: Reader) -> Scopes:
    """The scopes file checked against the index `db` (a connection to it)."""
    docs = doc_intents(db)
    return load_scopes(path, {intent for _, intent in docs}, [p for p, _ in docs])
