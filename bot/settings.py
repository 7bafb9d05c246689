"""Every setting fieldguide reads, in one place.

Values come from the environment, then from a `.env` file in the working directory (the environment
wins). The library code in index/ and router/ never reads settings itself: the CLI and the Slack app
build a Settings and pass the values they need.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines; blank lines and # comments ignored; surrounding quotes stripped."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def _setting(env: str, default, help: str):
    return field(default=default, metadata={"env": env, "help": help})


@dataclass(frozen=True)
class Settings:
    db: str = _setting("FIELDGUIDE_DB", ".fieldguide/index.db", "SQLite index file")
    docs: str = _setting(
        "FIELDGUIDE_DOCS", "examples/docs", "docs folder that /docs-reindex indexes"
    )
    anthropic_api_key: str = _setting("ANTHROPIC_API_KEY", "", "Claude key; empty = offline steps")
    anthropic_base_url: str = _setting(
        "ANTHROPIC_BASE_URL", "", "Messages API base URL (proxy or stub)"
    )
    classify_model: str = _setting("FIELDGUIDE_CLASSIFY_MODEL", "claude-haiku-4-5", "router model")
    condense_model: str = _setting(
        "FIELDGUIDE_CONDENSE_MODEL", "claude-haiku-4-5", "follow-up rewriter"
    )
    extract_model: str = _setting(
        "FIELDGUIDE_EXTRACT_MODEL", "claude-haiku-4-5", "passage extractor"
    )
    answer_model: str = _setting("FIELDGUIDE_ANSWER_MODEL", "claude-sonnet-4-6", "answer writer")
    voyage_api_key: str = _setting(
        "VOYAGE_API_KEY", "", "Voyage key; empty = local embedding model"
    )
    voyage_base_url: str = _setting("VOYAGE_BASE_URL", "", "Voyage API base URL, including /v1")
    voyage_model: str = _setting("FIELDGUIDE_VOYAGE_MODEL", "voyage-3.5", "Voyage embedding model")
    model_dir: str = _setting(
        "FIELDGUIDE_MODEL_DIR", "", "local ONNX model folder (default: inside the venv)"
    )
    timeout: float = _setting(
        "FIELDGUIDE_TIMEOUT", 30.0, "seconds before a Claude/Voyage call gives up"
    )
    max_retries: int = _setting("FIELDGUIDE_MAX_RETRIES", 2, "SDK retries on 429/529/timeouts")
    chunk_chars: int = _setting("FIELDGUIDE_CHUNK_CHARS", 2000, "largest chunk, in characters")
    bm25_weight: float = _setting("FIELDGUIDE_BM25_WEIGHT", 0.4, "BM25 share of the fused score")
    fusion: str = _setting("FIELDGUIDE_FUSION", "weighted", "weighted | rrf")
    docs_base_url: str = _setting(
        "FIELDGUIDE_DOCS_BASE_URL", "", "link base for docs without a url"
    )
    slack_bot_token: str = _setting("SLACK_BOT_TOKEN", "", "xoxb- bot token")
    slack_app_token: str = _setting("SLACK_APP_TOKEN", "", "xapp- token for Socket Mode")
    slack_signing_secret: str = _setting("SLACK_SIGNING_SECRET", "", "verifies HTTP requests")
    slack_api_base_url: str = _setting(
        "SLACK_API_BASE_URL", "https://slack.com/api/", "Web API base"
    )
    admins: str = _setting(
        "FIELDGUIDE_ADMINS", "", "comma-separated Slack user ids allowed to reindex"
    )
    reindex_command: str = _setting("FIELDGUIDE_REINDEX_COMMAND", "/docs-reindex", "slash command")
    database_url: str = _setting(
        "FIELDGUIDE_DATABASE_URL",
        "",
        "postgresql://… shared by a fleet of replicas; empty = one machine, SQLite only",
    )

    @classmethod
    def load(
        cls, environ: dict[str, str] | None = None, dotenv: Path | None = Path(".env")
    ) -> Settings:
        merged = read_dotenv(dotenv) if dotenv else {}
        merged.update(os.environ if environ is None else environ)
        kwargs = {}
        for f in fields(cls):
            raw = merged.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            assert f.default is not MISSING  # every field is made by _setting, with a default
            try:
                kwargs[f.name] = type(f.default)(raw)
            except ValueError:
                raise SystemExit(
                    f"Setting {f.metadata['env']}={raw!r} is not a valid {type(f.default).__name__}"
                ) from None
        return cls(**kwargs)

    @property
    def admin_ids(self) -> set[str]:
        return {a.strip() for a in self.admins.split(",") if a.strip()}


def describe() -> list[tuple[str, object, str]]:
    """(env name, default, help) for every setting: used to check .env.example and the README."""
    return [(f.metadata["env"], f.default, f.metadata["help"]) for f in fields(Settings)]
