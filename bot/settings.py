"""Every setting fieldguide reads, in one place.

Values come from the environment, then from a `.env` file in the working directory (the environment
wins). The library code in index/ and router/ never reads settings itself: the CLI and the Slack app
build a Settings and pass the values they need.
"""

from __future__ import annotations

import io
import math
import os
import re
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dotenv.parser import parse_stream

from index.redact import redact


class SettingsError(ValueError):
    """Settings that cannot be used; the message names each bad one and what it must be, and
    `problems` holds one line per bad setting."""

    def __init__(
        self, message: str, problems: list[str] | None = None, bad: list[str] | None = None
    ):
        super().__init__(message)
        self.problems = problems or [message]
        self.bad = bad or []  # the bad settings' names, when known

    @classmethod
    def of(cls, problems: list[str]) -> SettingsError:
        bad = [p.split("=", 1)[0] for p in problems]
        return cls("bad settings: " + "; ".join(problems), problems, bad)


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines read by python-dotenv: `export` allowed, values in single or double quotes,
    `# comment` lines and inline ` # comments` after unquoted values, a UTF-8 BOM ignored. No
    ${VAR} expansion: a secret is taken as written."""
    if not path.is_file():
        return {}
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SettingsError(
            f"{path} is not UTF-8 text (invalid byte at offset {e.start}): save it as UTF-8"
        ) from None
    except OSError as e:
        raise SettingsError(f"cannot read {path}: {e.strerror}") from None
    values: dict[str, str] = {}
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            # the line is not shown: it may hold a secret
            raise SettingsError(
                f"{path} line {binding.original.line} is not KEY=value"
                " (quote a value that holds spaces or starts with #)"
            )
        if binding.key is not None and binding.value is not None:
            values[binding.key] = binding.value
    return values


Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class Range:
    """A numeric setting's allowed range: a Check whose rule is also said when a value is not a
    number at all ("FIELDGUIDE_BM25_WEIGHT='abc' is not a number: must be between 0 and 1")."""

    holds: Callable[[float], bool]
    rule: str

    def __call__(self, v: Any) -> str | None:
        return None if self.holds(v) else self.rule


def between(lo: float, hi: float) -> Check:
    return Range(lambda v: lo <= v <= hi, f"must be between {lo:,} and {hi:,}")


def positive_at_most(hi: float) -> Check:
    return Range(lambda v: 0 < v <= hi, f"must be more than 0 and at most {hi:,}")


def one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def http_url(v: Any) -> str | None:
    ok = v == "" or re.fullmatch(r"https?://[^\s<>|]+", str(v), re.I)
    return None if ok else "must be an http:// or https:// URL"


def postgres_url(v: Any) -> str | None:
    ok = v == "" or re.match(r"postgres(ql)?://", str(v))
    return None if ok else "must be a postgresql:// URL"


DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)", re.I)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds_of(v: str) -> float:
    """`15m` → 900.0 (s, m, h, d; "" → 0); ValueError for anything else."""
    if not v.strip():
        return 0.0
    m = DURATION.fullmatch(v.strip())
    if not m:
        raise ValueError(v)
    return float(m.group(1)) * UNIT_SECONDS[m.group(2).lower()]


def duration(v: Any) -> str | None:
    try:
        seconds = seconds_of(str(v))
    except ValueError:
        return "must be a duration such as 30s, 15m, 1h or 1d"
    return None if seconds == 0 or seconds >= 1 else "must be at least 1s"


MIN_TOKEN_CHARS = 32  # 128 bits as hex: beyond guessing over the network


def token_length(v: Any) -> str | None:
    ok = v == "" or len(str(v)) >= MIN_TOKEN_CHARS
    return None if ok else f"must be {MIN_TOKEN_CHARS} characters or more"


LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"  # one dot-separated part of a host name
HOST = rf"(?:{LABEL}(?:\.{LABEL})*|\[[0-9a-f:.]+\])"  # a name, an IPv4 address or [IPv6]


def listed(v: str) -> list[str]:
    """A comma-separated setting's entries, trimmed, empty ones left out."""
    return [part.strip() for part in str(v).split(",") if part.strip()]


def host_list(v: Any) -> str | None:
    bad = [h for h in listed(v) if not re.fullmatch(HOST + r"(?::\d{1,5})?", h, re.I)]
    return f"{bad[0]!r} is no host name (name or name:port)" if bad else None


def origin_list(v: Any) -> str | None:
    bad = [
        o for o in listed(v) if not re.fullmatch(r"https?://" + HOST + r"(?::\d{1,5})?", o, re.I)
    ]
    return f"{bad[0]!r} is no origin (https://host or https://host:port)" if bad else None


def slash_command(v: Any) -> str | None:
    return None if re.fullmatch(r"/[a-z0-9_-]{1,31}", str(v)) else "must be like /docs-reindex"


# USD per million tokens: the English pricing page (platform.claude.com/docs/en/about-claude/
# pricing, "Model pricing", 2026-11; translated pages and model pages lag it: Sonnet 5.5's cache
# read was cut from $0.20 to $0.10 on 2026-10-07). A cache write is the 5-minute one. A model id
# matches the longest key it starts with (claude-haiku-4-5-20251001 → claude-haiku-4-5).
# FIELDGUIDE_PRICES replaces the table. Haiku 5.5's prices are those of prompts up to 100,000
# tokens (a question's are ~2-6 K).
DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "claude-haiku-5-5": {"input": 0.10, "output": 0.50, "cache_write": 0.125, "cache_read": 0.01},
    "claude-sonnet-5-5": {"input": 2.0, "output": 10.0, "cache_write": 2.50, "cache_read": 0.10},
    "claude-sonnet-5": {"input": 2.0, "output": 10.0, "cache_write": 2.50, "cache_read": 0.20},
    "claude-opus-5-5": {"input": 4.0, "output": 20.0, "cache_write": 5.0, "cache_read": 0.20},
    "claude-opus-5": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-fable-5-1": {"input": 10.0, "output": 50.0, "cache_write": 12.5, "cache_read": 0.25},
    "claude-fable-5": {"input": 10.0, "output": 50.0, "cache_write": 12.5, "cache_read": 1.0},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.10},
    "claude-sonnet-4": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30},
    "claude-opus-4-8": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-opus-4-7": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-opus-4-6": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-opus-4-5": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
    "claude-opus-4-1": {"input": 15.0, "output": 75.0, "cache_write": 18.75, "cache_read": 1.50},
}
PRICE_KEYS = ("input", "output", "cache_write", "cache_read")


def parse_prices(raw: str) -> dict[str, dict[str, float]]:
    """FIELDGUIDE_PRICES as a table (the built-in one when empty); ValueError saying what is
    wrong."""
    if not raw.strip():
        return DEFAULT_PRICES
    import json

    try:
        table = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"is not JSON ({e.msg})") from None
    if not isinstance(table, dict) or not table:
        raise ValueError("must be a JSON object of models")
    for model, p in table.items():
        if not isinstance(p, dict) or set(p) != set(PRICE_KEYS):
            raise ValueError(f"{model}: give exactly {', '.join(PRICE_KEYS)}")
        bad = [k for k in PRICE_KEYS if not isinstance(p[k], (int, float)) or p[k] < 0]
        if bad:
            raise ValueError(f"{model}: {', '.join(bad)} must be numbers ≥ 0")
    return {m: {k: float(v) for k, v in p.items()} for m, p in table.items()}


def price_table(v: Any) -> str | None:
    try:
        parse_prices(str(v))
    except ValueError as e:
        return str(e)
    return None


def _setting(env: str, default, help: str, check: Check | None = None):
    return field(default=default, metadata={"env": env, "help": help, "check": check})


def _parse(raw: str, kind: type) -> object:
    """`raw` as a value of `kind`; ValueError with the reason when it is not one."""
    raw = raw.strip()
    if kind is int:
        return int(raw)
    if kind is float:
        value = float(raw)
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        return value
    return raw


@dataclass(frozen=True)
class Settings:
    db: str = _setting("FIELDGUIDE_DB", ".fieldguide/index.db", "SQLite index file")
    docs: str = _setting(
        "FIELDGUIDE_DOCS",
        "",
        "docs folder that fieldguide index and /docs-reindex index (or set FIELDGUIDE_DOCS_GIT)",
    )
    docs_git: str = _setting(
        "FIELDGUIDE_DOCS_GIT",
        "",
        "git repository (URL or path) the docs are pulled from before each index run",
    )
    docs_branch: str = _setting(
        "FIELDGUIDE_DOCS_BRANCH", "", "branch of FIELDGUIDE_DOCS_GIT; empty = its default branch"
    )
    docs_git_path: str = _setting(
        "FIELDGUIDE_DOCS_GIT_PATH", "", "docs folder inside the repository; empty = all of it"
    )
    docs_git_token: str = _setting(
        "FIELDGUIDE_DOCS_GIT_TOKEN", "", "token for an https repository (sent as a header)"
    )
    max_doc_mb: float = _setting(
        "FIELDGUIDE_MAX_DOC_MB",
        5.0,
        "largest doc indexed, in MB; a file over it is skipped with its reason (0 < x <= 1,024)",
        positive_at_most(1024),
    )
    git_timeout: float = _setting(
        "FIELDGUIDE_GIT_TIMEOUT", 120.0, "seconds each git step may take", positive_at_most(3600)
    )
    refresh_every: str = _setting(
        "FIELDGUIDE_REFRESH_EVERY",
        "",
        "serve pulls and reindexes the docs this often (e.g. 15m, 1h); empty = never",
        duration,
    )
    anthropic_api_key: str = _setting("ANTHROPIC_API_KEY", "", "Claude key; empty = offline steps")
    anthropic_base_url: str = _setting(
        "ANTHROPIC_BASE_URL", "", "Messages API base URL (proxy or stub)", http_url
    )
    classify_model: str = _setting("FIELDGUIDE_CLASSIFY_MODEL", "claude-haiku-5-5", "router model")
    condense_model: str = _setting(
        "FIELDGUIDE_CONDENSE_MODEL", "claude-haiku-5-5", "follow-up rewriter"
    )
    extract_model: str = _setting(
        "FIELDGUIDE_EXTRACT_MODEL",
        "claude-haiku-5-5",
        "passage extractor (the `sequential` and `overlap` paths)",
    )
    answer_model: str = _setting("FIELDGUIDE_ANSWER_MODEL", "claude-sonnet-5-5", "answer writer")
    check_model: str = _setting(
        "FIELDGUIDE_CHECK_MODEL",
        "claude-haiku-5-5",
        "claim checker: is each answer sentence supported by what it cites",
    )
    judge_model: str = _setting(
        "FIELDGUIDE_JUDGE_MODEL", "claude-sonnet-5-5", "`eval --answers --judge` grader"
    )
    claude_path: str = _setting(
        "FIELDGUIDE_CLAUDE_PATH",
        "cite",
        "with Claude: cite (the answer's citations extract) | overlap | sequential"
        " (classify → extract → answer)",
        one_of("cite", "overlap", "sequential"),
    )
    prices: str = _setting(
        "FIELDGUIDE_PRICES",
        "",
        "JSON {model: {input, output, cache_write, cache_read}} USD per million tokens for"
        " `audit --stats`; empty = the built-in table",
        price_table,
    )
    voyage_api_key: str = _setting(
        "VOYAGE_API_KEY", "", "Voyage key; empty = local embedding model"
    )
    voyage_base_url: str = _setting(
        "VOYAGE_BASE_URL", "", "Voyage API base URL, including /v1", http_url
    )
    voyage_model: str = _setting(
        "FIELDGUIDE_VOYAGE_MODEL",
        "voyage-4",
        "Voyage embedding model (voyage-4-large, voyage-4, voyage-4-lite, ...); reindex after"
        " switching",
    )
    rerank_model: str = _setting(
        "FIELDGUIDE_RERANK_MODEL", "rerank-3", "Voyage reranker (with a key); empty = no rerank"
    )
    rerank_depth: int = _setting(
        "FIELDGUIDE_RERANK_DEPTH",
        40,
        "how many fused chunks the reranker reorders",
        between(1, 1000),
    )
    model_dir: str = _setting(
        "FIELDGUIDE_MODEL_DIR", "", "local ONNX model folder (default: inside the venv)"
    )
    timeout: float = _setting(
        "FIELDGUIDE_TIMEOUT",
        30.0,
        "seconds before a Claude/Voyage call gives up",
        positive_at_most(600),
    )
    max_retries: int = _setting(
        "FIELDGUIDE_MAX_RETRIES",
        2,
        "retries of a Claude call on 429 (after its retry-after) and 529/5xx/timeouts (backoff"
        " with jitter), within the question's deadline; of a Voyage call while indexing",
        between(0, 10),
    )
    query_timeout: float = _setting(
        "FIELDGUIDE_QUERY_TIMEOUT",
        2.0,
        "seconds a question waits for Voyage (query embedding, rerank): one try, then keyword"
        " search / the fused order",
        positive_at_most(60),
    )
    deadline: float = _setting(
        "FIELDGUIDE_DEADLINE",
        45.0,
        "seconds for one question's Claude steps, all together; the answer's stream is cut at it,"
        " less the claim check's reserved time",
        positive_at_most(600),
    )
    first_byte_timeout: float = _setting(
        "FIELDGUIDE_FIRST_BYTE_TIMEOUT",
        5.0,
        "seconds the answer's stream may wait for its first byte (and between later reads) before"
        " the try fails as a timeout and is retried or falls back",
        positive_at_most(120),
    )
    chunk_chars: int = _setting(
        "FIELDGUIDE_CHUNK_CHARS", 2000, "largest chunk, in characters", between(200, 20_000)
    )
    bm25_weight: float = _setting(
        "FIELDGUIDE_BM25_WEIGHT", 0.4, "BM25 share of the fused score", between(0, 1)
    )
    fusion: str = _setting(
        "FIELDGUIDE_FUSION", "weighted", "weighted | rrf", one_of("weighted", "rrf")
    )
    docs_base_url: str = _setting(
        "FIELDGUIDE_DOCS_BASE_URL", "", "link base for docs without a url", http_url
    )
    slack_bot_token: str = _setting("SLACK_BOT_TOKEN", "", "xoxb- bot token")
    slack_app_token: str = _setting("SLACK_APP_TOKEN", "", "xapp- token for Socket Mode")
    slack_signing_secret: str = _setting("SLACK_SIGNING_SECRET", "", "verifies HTTP requests")
    slack_api_base_url: str = _setting(
        "SLACK_API_BASE_URL", "https://slack.com/api/", "Web API base", http_url
    )
    admins: str = _setting(
        "FIELDGUIDE_ADMINS", "", "comma-separated Slack user ids allowed to reindex"
    )
    reindex_command: str = _setting(
        "FIELDGUIDE_REINDEX_COMMAND", "/docs-reindex", "slash command", slash_command
    )
    audit_retention_days: int = _setting(
        "FIELDGUIDE_AUDIT_RETENTION_DAYS",
        90,
        "days answers stay in the audit trail; 0 = keep forever",
        between(0, 36_500),
    )

    answer_workers: int = _setting(
        "FIELDGUIDE_ANSWER_WORKERS", 4, "questions answered at the same time", between(1, 64)
    )
    answer_queue: int = _setting(
        "FIELDGUIDE_ANSWER_QUEUE",
        20,
        "questions waiting beyond that; more are turned away at once",
        between(0, 10_000),
    )
    answer_per_client: int = _setting(
        "FIELDGUIDE_ANSWER_PER_CLIENT",
        0,
        "questions one asker (a Slack user, an MCP client) may have answered or waiting at once;"
        " 0 = the workers and half the queue",
        between(0, 10_000),
    )
    slack_startup_seconds: float = _setting(
        "FIELDGUIDE_SLACK_STARTUP_SECONDS",
        60.0,
        "how long start-up retries reaching Slack",
        positive_at_most(3600),
    )
    scopes: str = _setting(
        "FIELDGUIDE_SCOPES",
        "",
        "YAML file mapping Slack channels to the intents/folders they search; empty = all",
    )
    mcp_scope: str = _setting(
        "FIELDGUIDE_MCP_SCOPE",
        "",
        "`fieldguide mcp` sees only this entry of FIELDGUIDE_SCOPES (its key: a channel id, #name"
        " or default); empty = the file's default entry, else everything",
    )
    mcp_token: str = _setting(
        "FIELDGUIDE_MCP_TOKEN",
        "",
        "bearer token every request to `fieldguide mcp --http` must carry (32 characters or more,"
        " e.g. openssl rand -hex 32); empty = --http refuses to start",
        token_length,
    )
    mcp_allowed_hosts: str = _setting(
        "FIELDGUIDE_MCP_ALLOWED_HOSTS",
        "",
        "comma-separated Host names `fieldguide mcp --http` answers to besides 127.0.0.1,"
        " localhost and [::1] (a name alone: any port; name:port: that port), e.g. the name a TLS"
        " proxy in front of it keeps",
        host_list,
    )
    mcp_allowed_origins: str = _setting(
        "FIELDGUIDE_MCP_ALLOWED_ORIGINS",
        "",
        "comma-separated Origins (scheme://host[:port]) whose browser pages may call `fieldguide"
        " mcp --http`, e.g. https://claude.ai, besides http pages on 127.0.0.1, localhost and"
        " [::1]; a request without an Origin is not from a page",
        origin_list,
    )
    doc_owners: str = _setting(
        "FIELDGUIDE_DOC_OWNERS",
        "off",
        "on: a doc's front-matter owner gets the hand-offs about that doc (whoever can commit a"
        " doc may then receive them); off: owners come from intents.yaml only",
        one_of("off", "on"),
    )
    health_port: int = _setting(
        "FIELDGUIDE_HEALTH_PORT",
        0,
        "port serving /healthz (JSON; 503 when Slack, the index or PostgreSQL is down), in Socket"
        " Mode too; 0 = off",
        between(0, 65_535),
    )
    health_host: str = _setting(
        "FIELDGUIDE_HEALTH_HOST",
        "127.0.0.1",
        "address the health port binds: 127.0.0.1 answers probes from this machine (or"
        " container) only; 0.0.0.0 from anywhere that reaches it (a Kubernetes probe)",
    )
    log_level: str = _setting(
        "FIELDGUIDE_LOG_LEVEL",
        "INFO",
        "serve's log level: DEBUG | INFO | WARNING | ERROR",
        one_of("DEBUG", "INFO", "WARNING", "ERROR"),
    )
    log_format: str = _setting(
        "FIELDGUIDE_LOG_FORMAT",
        "text",
        "serve's log lines: text | json (one object a line)",
        one_of("text", "json"),
    )
    database_url: str = _setting(
        "FIELDGUIDE_DATABASE_URL",
        "",
        "postgresql://… shared by a fleet of replicas; empty = one machine, SQLite only",
        postgres_url,
    )

    def __post_init__(self) -> None:
        """Every value checked here, whichever way the Settings was made; all problems at once."""
        problems = []
        for f in fields(self):
            value, check = getattr(self, f.name), f.metadata["check"]
            assert f.default is not MISSING  # every field is made by _setting, with a default
            kind = type(f.default)
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)  # Settings(timeout=5) means 5.0
                object.__setattr__(self, f.name, value)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                what = {int: "a whole number", float: "a number"}.get(kind, "text")
                problems.append(redact(f"{f.metadata['env']}={value!r} must be {what}", str(value)))
            elif isinstance(value, float) and not math.isfinite(value):
                problems.append(f"{f.metadata['env']}={value!r} must be a finite number")
            elif check and (why := check(value)):
                shown = "***" if f.metadata["env"].endswith("_TOKEN") else repr(value)  # a secret
                problem = f"{f.metadata['env']}={shown} {why} ({f.metadata['help']})"
                problems.append(redact(problem, str(value)))  # a URL's password is not shown
        if problems:
            raise SettingsError.of(problems)

    @classmethod
    def load(
        cls, environ: dict[str, str] | None = None, dotenv: Path | None = Path(".env")
    ) -> Settings:
        """The environment wins over `.env`; an empty value means the default. SettingsError
        names every value that cannot be used: those that are not numbers and those out of range
        alike."""
        merged = cls.sources(environ, dotenv)
        kwargs: dict[str, object] = {}
        problems = []
        for f in fields(cls):
            raw = merged.get(f.metadata["env"])
            if raw is None or raw.strip() == "":
                continue
            kind = type(f.default)
            try:
                kwargs[f.name] = _parse(raw, kind)
            except ValueError:
                what = "a whole number" if kind is int else "a number" if kind is float else kind
                check = f.metadata["check"]
                rule = f": {check.rule}" if isinstance(check, Range) else ""
                problems.append(redact(f"{f.metadata['env']}={raw!r} is not {what}{rule}", raw))
        try:
            settings = cls(**kwargs)  # type: ignore[arg-type]
        except SettingsError as e:  # the parsed values' checks: named with the unparsable ones
            problems += e.problems
        if problems:
            raise SettingsError.of(problems)
        return settings

    @staticmethod
    def sources(
        environ: dict[str, str] | None = None, dotenv: Path | None = Path(".env")
    ) -> dict[str, str]:
        """Every value as given: `.env`'s, then the environment's over them."""
        merged = read_dotenv(dotenv) if dotenv else {}
        merged.update(os.environ if environ is None else environ)
        return merged

    def at(self, db: str | Path | None) -> Settings:
        """These settings with the index at `db` (a command's --db, an eval set's index); None:
        as they are. The one place a given index file overrides FIELDGUIDE_DB."""
        return self if not db else replace(self, db=str(db))

    def urls(self) -> list[str]:
        """The settings that are URLs (their passwords are never shown: index/redact.py), the
        docs repository's included."""
        names = [f.name for f in fields(self) if f.name.endswith("_url") or f.name == "docs_git"]
        return [str(getattr(self, n)) for n in names]

    def slack_token_problems(self, http: bool = False) -> list[str]:
        """What is wrong with the Slack credentials `serve` needs (Socket Mode, or HTTP with
        `http`), read from their shape alone, before anything waits on the network: each token
        missing or not of its kind (a bot token starts xoxb-, an app-level token xapp-)."""
        problems = []
        wanted = [("SLACK_BOT_TOKEN", self.slack_bot_token, "xoxb-")]
        if http:
            wanted.append(("SLACK_SIGNING_SECRET", self.slack_signing_secret, ""))
        else:
            wanted.append(("SLACK_APP_TOKEN", self.slack_app_token, "xapp-"))
        for name, value, prefix in wanted:
            if not value:
                problems.append(f"{name} is not set")
            elif not value.startswith(prefix):
                problems.append(f"{name} is not {SLACK_TOKEN_KINDS[prefix]}{_which(value)}")
        return problems

    @property
    def refresh_seconds(self) -> float:
        """FIELDGUIDE_REFRESH_EVERY in seconds; 0 = no scheduled refresh."""
        return seconds_of(self.refresh_every)

    @property
    def max_doc_bytes(self) -> int:
        return int(self.max_doc_mb * 1024 * 1024)

    @property
    def honour_doc_owners(self) -> bool:
        return self.doc_owners == "on"

    @property
    def admin_ids(self) -> set[str]:
        return {a.strip() for a in self.admins.split(",") if a.strip()}


# what each Slack token prefix is, and where a Slack app shows it
SLACK_TOKEN_KINDS = {
    "xoxb-": "a bot token (xoxb-…: OAuth & Permissions → Bot User OAuth Token)",
    "xapp-": "an app-level token (xapp-…: Basic Information → App-Level Tokens, with"
    " connections:write)",
    "xoxp-": "a user token",
}


def _which(token: str) -> str:
    """What a token of the wrong kind is, when its prefix says (never more of it than that)."""
    for prefix, kind in SLACK_TOKEN_KINDS.items():
        if token.startswith(prefix):
            return f"; this one is {kind.split(' (')[0]}"
    return ""


def describe() -> list[tuple[str, object, str]]:
    """(env name, default, help) for every setting: used to check .env.example and the
    configuration table (docs/configuration.md)."""
    return [(f.metadata["env"], f.default, f.metadata["help"]) for f in fields(Settings)]
