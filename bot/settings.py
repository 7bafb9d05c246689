"""Every setting fieldguide reads, in one place, as a pydantic model.

`Settings.load()` reads the environment, then a `.env` file in the working directory (the
environment wins; an empty value means the default); `Settings(db=...)` made in code takes its
values and the defaults, and reads nothing. Every value is checked by pydantic, whichever way it
was made; what is wrong is said in our words, one line a setting (`SettingsError`), never in
pydantic's. The library code in index/ and router/ never reads settings itself: the CLI and the
Slack app build a Settings and pass the values they need.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from dotenv.parser import parse_stream
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from index.redact import redact

from .prices import parse_prices
from .since import DURATIONS, seconds_of


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
        bad = [p.split("=", 1)[0].split(" ", 1)[0] for p in problems]
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


def rule(check: Any, says: str) -> AfterValidator:
    """A check pydantic runs on a parsed value: `check(value)` true, else the value is refused
    with `says` (what it must be)."""

    def holds(value: Any) -> Any:
        if not check(value):
            raise ValueError(says)
        return value

    return AfterValidator(holds)


def is_duration(v: str) -> bool:
    try:
        seconds = seconds_of(v)
    except ValueError:
        return False
    return seconds == 0 or seconds >= 1


MIN_TOKEN_CHARS = 32  # 128 bits as hex: beyond guessing over the network

HttpUrl = Annotated[
    str,
    rule(
        lambda v: v == "" or re.fullmatch(r"https?://[^\s<>|]+", v, re.I),
        "must be an http:// or https:// URL",
    ),
]
PostgresUrl = Annotated[
    str, rule(lambda v: v == "" or re.match(r"postgres(ql)?://", v), "must be a postgresql:// URL")
]
Duration = Annotated[
    str, rule(is_duration, f"must be a duration of at least 1s, such as {DURATIONS}")
]
Token = Annotated[
    str,
    rule(
        lambda v: v == "" or len(v) >= MIN_TOKEN_CHARS,
        f"must be {MIN_TOKEN_CHARS} characters or more",
    ),
]
SlashCommand = Annotated[
    str, rule(lambda v: re.fullmatch(r"/[a-z0-9_-]{1,31}", v), "must be like /docs-reindex")
]
LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"  # one dot-separated part of a host name
HOST = rf"(?:{LABEL}(?:\.{LABEL})*|\[[0-9a-f:.]+\])"  # a name, an IPv4 address or [IPv6]


def listed(v: str) -> list[str]:
    """A comma-separated setting's entries, trimmed, empty ones left out."""
    return [part.strip() for part in str(v).split(",") if part.strip()]


HostList = Annotated[
    str,
    rule(
        lambda v: all(re.fullmatch(HOST + r"(?::\d{1,5})?", h, re.I) for h in listed(v)),
        "must be comma-separated host names (name, or name:port)",
    ),
]
OriginList = Annotated[
    str,
    rule(
        lambda v: all(
            re.fullmatch(r"https?://" + HOST + r"(?::\d{1,5})?", o, re.I) for o in listed(v)
        ),
        "must be comma-separated origins (https://host, or https://host:port)",
    ),
]


def checked_prices(v: str) -> str:
    parse_prices(v)  # a ValueError saying what is wrong with the table
    return v


Prices = Annotated[str, AfterValidator(checked_prices)]


def setting(
    env: str,
    default: Any,
    help: str,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
) -> Any:
    """A setting read from the environment variable `env`, its default, what it is for (the help
    shown with a bad value) and its range, if it has one."""
    return Field(default, validation_alias=env, description=help, gt=gt, ge=ge, le=le)


class Settings(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,  # Settings(db=...) in code; Settings.load() by the env names
        validate_by_alias=True,
        allow_inf_nan=False,
        str_strip_whitespace=True,
    )

    db: str = setting("FIELDGUIDE_DB", ".fieldguide/index.db", "SQLite index file")
    docs: str = setting(
        "FIELDGUIDE_DOCS",
        "",
        "docs folder that fieldguide index and /docs-reindex index (or set FIELDGUIDE_DOCS_GIT)",
    )
    docs_git: str = setting(
        "FIELDGUIDE_DOCS_GIT",
        "",
        "git repository (URL or path) the docs are pulled from before each index run",
    )
    docs_branch: str = setting(
        "FIELDGUIDE_DOCS_BRANCH", "", "branch of FIELDGUIDE_DOCS_GIT; empty = its default branch"
    )
    docs_git_path: str = setting(
        "FIELDGUIDE_DOCS_GIT_PATH", "", "docs folder inside the repository; empty = all of it"
    )
    docs_git_token: str = setting(
        "FIELDGUIDE_DOCS_GIT_TOKEN", "", "token for an https repository (sent as a header)"
    )
    max_doc_mb: float = setting(
        "FIELDGUIDE_MAX_DOC_MB",
        5.0,
        "largest doc indexed, in MB; a file over it is skipped with its reason (0 < x <= 1,024)",
        gt=0,
        le=1024,
    )
    git_timeout: float = setting(
        "FIELDGUIDE_GIT_TIMEOUT", 120.0, "seconds each git step may take", gt=0, le=3600
    )
    refresh_every: Duration = setting(
        "FIELDGUIDE_REFRESH_EVERY",
        "",
        "serve pulls and reindexes the docs this often (e.g. 15m, 1h); empty = never",
    )
    anthropic_api_key: str = setting("ANTHROPIC_API_KEY", "", "Claude key; empty = offline steps")
    anthropic_base_url: HttpUrl = setting(
        "ANTHROPIC_BASE_URL", "", "Messages API base URL (proxy or stub)"
    )
    classify_model: str = setting("FIELDGUIDE_CLASSIFY_MODEL", "claude-haiku-5-5", "router model")
    condense_model: str = setting(
        "FIELDGUIDE_CONDENSE_MODEL", "claude-haiku-5-5", "follow-up rewriter"
    )
    answer_model: str = setting("FIELDGUIDE_ANSWER_MODEL", "claude-sonnet-5-5", "answer writer")
    check_model: str = setting(
        "FIELDGUIDE_CHECK_MODEL",
        "claude-haiku-5-5",
        "claim checker: is each answer sentence supported by what it cites",
    )
    judge_model: str = setting(
        "FIELDGUIDE_JUDGE_MODEL", "claude-sonnet-5-5", "`eval --answers --judge` grader"
    )
    prices: Prices = setting(
        "FIELDGUIDE_PRICES",
        "",
        "JSON {model: {input, output, cache_write, cache_read}} USD per million tokens for"
        " `audit --stats`; empty = the built-in table",
    )
    voyage_api_key: str = setting("VOYAGE_API_KEY", "", "Voyage key; empty = local embedding model")
    voyage_base_url: HttpUrl = setting("VOYAGE_BASE_URL", "", "Voyage API base URL, including /v1")
    voyage_model: str = setting(
        "FIELDGUIDE_VOYAGE_MODEL",
        "voyage-4",
        "Voyage embedding model (voyage-4-large, voyage-4, voyage-4-lite, ...); reindex after"
        " switching",
    )
    rerank_model: str = setting(
        "FIELDGUIDE_RERANK_MODEL", "rerank-3", "Voyage reranker (with a key); empty = no rerank"
    )
    rerank_depth: int = setting(
        "FIELDGUIDE_RERANK_DEPTH", 40, "fused chunks reranked and read from", ge=1, le=1000
    )
    read_tokens: int = setting(
        "FIELDGUIDE_READ_TOKENS", 3500, "tokens of docs Claude reads a look", ge=200, le=200_000
    )
    second_looks: int = setting(
        "FIELDGUIDE_SECOND_LOOKS", 2, "times Claude may search again (0 = never)", ge=0, le=5
    )
    model_dir: str = setting(
        "FIELDGUIDE_MODEL_DIR", "", "local ONNX model folder (default: inside the venv)"
    )
    timeout: float = setting(
        "FIELDGUIDE_TIMEOUT",
        30.0,
        "seconds before a Claude/Voyage call gives up",
        gt=0,
        le=600,
    )
    max_retries: int = setting(
        "FIELDGUIDE_MAX_RETRIES",
        2,
        "retries of a Claude call on 429 (after its retry-after) and 529/5xx/timeouts (backoff"
        " with jitter), within the question's deadline; of a Voyage call while indexing",
        ge=0,
        le=10,
    )
    query_timeout: float = setting(
        "FIELDGUIDE_QUERY_TIMEOUT",
        2.0,
        "seconds a question waits for Voyage (query embedding, rerank): one try, then keyword"
        " search / the fused order",
        gt=0,
        le=60,
    )
    deadline: float = setting(
        "FIELDGUIDE_DEADLINE",
        45.0,
        "seconds for one question's Claude steps, all together; the answer's stream is cut at it,"
        " less the claim check's reserved time",
        gt=0,
        le=600,
    )
    first_byte_timeout: float = setting(
        "FIELDGUIDE_FIRST_BYTE_TIMEOUT",
        5.0,
        "seconds the answer's stream may wait for its first byte (and between later reads) before"
        " the try fails as a timeout and is retried or falls back",
        gt=0,
        le=120,
    )
    chunk_chars: int = setting(
        "FIELDGUIDE_CHUNK_CHARS", 2000, "largest chunk, in characters", ge=200, le=20_000
    )
    bm25_weight: float = setting(
        "FIELDGUIDE_BM25_WEIGHT", 0.4, "BM25 share of the fused score", ge=0, le=1
    )
    fusion: Literal["hybrid", "rrf"] = setting("FIELDGUIDE_FUSION", "hybrid", "hybrid | rrf")
    docs_base_url: HttpUrl = setting(
        "FIELDGUIDE_DOCS_BASE_URL", "", "link base for docs without a url"
    )
    slack_bot_token: str = setting("SLACK_BOT_TOKEN", "", "xoxb- bot token")
    slack_app_token: str = setting("SLACK_APP_TOKEN", "", "xapp- token for Socket Mode")
    slack_signing_secret: str = setting("SLACK_SIGNING_SECRET", "", "verifies HTTP requests")
    slack_api_base_url: HttpUrl = setting(
        "SLACK_API_BASE_URL", "https://slack.com/api/", "Web API base"
    )
    admins: str = setting(
        "FIELDGUIDE_ADMINS", "", "comma-separated Slack user ids allowed to reindex"
    )
    reindex_command: SlashCommand = setting(
        "FIELDGUIDE_REINDEX_COMMAND", "/docs-reindex", "slash command"
    )
    audit_retention_days: int = setting(
        "FIELDGUIDE_AUDIT_RETENTION_DAYS",
        90,
        "days answers stay in the audit trail; 0 = keep forever",
        ge=0,
        le=36_500,
    )

    answer_workers: int = setting(
        "FIELDGUIDE_ANSWER_WORKERS", 4, "questions answered at the same time", ge=1, le=64
    )
    answer_queue: int = setting(
        "FIELDGUIDE_ANSWER_QUEUE",
        20,
        "questions waiting beyond that; more are turned away at once",
        ge=0,
        le=10_000,
    )
    answer_per_client: int = setting(
        "FIELDGUIDE_ANSWER_PER_CLIENT",
        0,
        "questions one asker (a Slack user, an MCP client) may have answered or waiting at once;"
        " 0 = the workers and half the queue",
        ge=0,
        le=10_000,
    )
    slack_startup_seconds: float = setting(
        "FIELDGUIDE_SLACK_STARTUP_SECONDS",
        60.0,
        "how long start-up retries reaching Slack",
        gt=0,
        le=3600,
    )
    drain_seconds: float = setting(
        "FIELDGUIDE_DRAIN_SECONDS",
        20.0,
        "on SIGTERM or SIGINT, how long `serve` goes on answering what it has acknowledged (new"
        " events refused meanwhile); what is left is answered at the next start",
        gt=0,
        le=3600,
    )
    recover_seconds: float = setting(
        "FIELDGUIDE_RECOVER_SECONDS",
        600.0,
        "how old an acknowledged question left by a stop or a crash may be and still be answered"
        " at the next start; an older one gets an apology in its thread",
        gt=0,
        le=86_400,
    )
    scopes: str = setting(
        "FIELDGUIDE_SCOPES",
        "",
        "YAML file mapping Slack channels to the intents/folders they search; empty = all",
    )
    mcp_scope: str = setting(
        "FIELDGUIDE_MCP_SCOPE",
        "",
        "`fieldguide mcp` sees only this entry of FIELDGUIDE_SCOPES (its key: a channel id, #name"
        " or default); empty = the file's default entry, else everything",
    )
    mcp_token: Token = setting(
        "FIELDGUIDE_MCP_TOKEN",
        "",
        "bearer token every request to `fieldguide mcp --http` must carry (32 characters or more,"
        " e.g. openssl rand -hex 32); empty = --http refuses to start",
    )
    weekly_note: Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun", "off"] = setting(
        "FIELDGUIDE_WEEKLY_NOTE",
        "mon",
        "the weekday (mon … sun, UTC) from which serve sends each docs owner their weekly note (a"
        " DM to a person, a post in an owners' channel; once per owner and week across a"
        " fleet); off = never",
    )
    mcp_allowed_hosts: HostList = setting(
        "FIELDGUIDE_MCP_ALLOWED_HOSTS",
        "",
        "comma-separated Host names `fieldguide mcp --http` answers to besides 127.0.0.1,"
        " localhost and [::1] (a name alone: any port; name:port: that port), e.g. the name a TLS"
        " proxy in front of it keeps",
    )
    mcp_allowed_origins: OriginList = setting(
        "FIELDGUIDE_MCP_ALLOWED_ORIGINS",
        "",
        "comma-separated Origins (scheme://host[:port]) whose browser pages may call `fieldguide"
        " mcp --http`, e.g. https://claude.ai, besides http pages on 127.0.0.1, localhost and"
        " [::1]; a request without an Origin is not from a page",
    )
    doc_owners: Literal["off", "on"] = setting(
        "FIELDGUIDE_DOC_OWNERS",
        "off",
        "on: a doc's front-matter owner gets the hand-offs about that doc (whoever can commit a"
        " doc may then receive them); off: owners come from intents.yaml only",
    )
    health_port: int = setting(
        "FIELDGUIDE_HEALTH_PORT",
        0,
        "port serving /healthz (JSON; 503 when Slack, the index or PostgreSQL is down), in Socket"
        " Mode too; 0 = off",
        ge=0,
        le=65_535,
    )
    health_host: str = setting(
        "FIELDGUIDE_HEALTH_HOST",
        "127.0.0.1",
        "address the health port binds: 127.0.0.1 answers probes from this machine (or"
        " container) only; 0.0.0.0 from anywhere that reaches it (a Kubernetes probe)",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = setting(
        "FIELDGUIDE_LOG_LEVEL",
        "INFO",
        "serve's log level: DEBUG | INFO | WARNING | ERROR",
    )
    log_format: Literal["text", "json"] = setting(
        "FIELDGUIDE_LOG_FORMAT",
        "text",
        "serve's log lines: text | json (one object a line)",
    )
    database_url: PostgresUrl = setting(
        "FIELDGUIDE_DATABASE_URL",
        "",
        "postgresql://… shared by a fleet of replicas; empty = one machine, SQLite only",
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as e:
            raise SettingsError.of([problem(error) for error in e.errors()]) from None

    @classmethod
    def load(
        cls, environ: dict[str, str] | None = None, dotenv: Path | None = Path(".env")
    ) -> Settings:
        """The environment wins over `.env`; an empty value means the default. SettingsError
        names every value that cannot be used: those that are not numbers and those out of range
        alike."""
        given = cls.sources(environ, dotenv)
        problems = [
            f"{name}={given[name]!r}: {why}"
            for name, (kept, why) in GONE.items()
            if given.get(name, "").strip() not in ("", kept)
        ]
        try:
            settings = cls(**{env: given[env] for env in ENV_NAMES if given.get(env, "").strip()})
        except SettingsError as e:  # named with the settings that are no more
            raise SettingsError.of(problems + e.problems) from None
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

    def changed(self, **values: Any) -> Settings:
        """These settings with `values` instead, checked as any others are."""
        return type(self)(**(self.model_dump() | values))

    def at(self, db: str | Path | None) -> Settings:
        """These settings with the index at `db` (a command's --db, an eval set's index); None:
        as they are. The one place a given index file overrides FIELDGUIDE_DB."""
        return self if not db else self.model_copy(update={"db": str(db)})

    def urls(self) -> list[str]:
        """The settings that are URLs (their passwords are never shown: index/redact.py), the
        docs repository's included."""
        names = [n for n in type(self).model_fields if n.endswith("_url") or n == "docs_git"]
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


# Settings that are no more: (the value that still means what is done now, why any other value
# cannot be honoured)
GONE = {
    "FIELDGUIDE_CLAUDE_PATH": (
        "cite",
        "the overlap and sequential paths were removed (bench/RESULTS.md 'claude-paths'): with"
        " Claude, every answer reads the top sections and cites them; unset it",
    ),
}


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
    return [(str(f.validation_alias), f.default, str(f.description)) for f in FIELDS.values()]


FIELDS = Settings.model_fields
ENV_NAMES = [str(f.validation_alias) for f in FIELDS.values()]
FIELD_OF = {str(f.validation_alias): name for name, f in FIELDS.items()} | {n: n for n in FIELDS}
# pydantic's error types that say a value is out of its range or not one of its choices; the rest
# say it is not of the setting's kind at all (not a number, not text)
OUT_OF_RANGE = {"greater_than", "greater_than_equal", "less_than_equal", "literal_error"}
KIND_NAMES: dict[object, str] = {int: "a whole number", float: "a number"}


def problem(error: Any) -> str:
    """One pydantic error as one line in our words: the setting's name, the value (a token's
    hidden, a URL's password redacted) and what it must be, with what the setting is for."""
    key = str(error["loc"][0]) if error["loc"] else ""
    if key not in FIELD_OF:
        return f"{key} is not a setting"
    info = FIELDS[FIELD_OF[key]]
    env, given, must = str(info.validation_alias), error["input"], must_be(info)
    if error["type"] == "value_error":
        must = str(error["ctx"]["error"])
    elif error["type"] not in OUT_OF_RANGE:
        what = KIND_NAMES.get(info.annotation, "text")
        return redact(f"{env}={given!r} is not {what}" + (f": {must}" if must else ""), str(given))
    if info.annotation in KIND_NAMES and isinstance(given, str):
        given = (
            float(given) if info.annotation is float else int(given)
        )  # shown as read: FIELDGUIDE_TIMEOUT=-1.0
    shown = "***" if env.endswith("_TOKEN") else repr(given)  # a secret
    return redact(f"{env}={shown} {must} ({info.description})", str(given))


def must_be(info: FieldInfo) -> str:
    """What a setting's value must be, read from its declared range or choices."""
    bounds = {k: getattr(m, k) for m in info.metadata for k in ("gt", "ge", "le") if hasattr(m, k)}
    if "gt" in bounds:
        return f"must be more than {bounds['gt']:,} and at most {bounds['le']:,}"
    if "ge" in bounds:
        return f"must be between {bounds['ge']:,} and {bounds['le']:,}"
    if get_origin(info.annotation) is Literal:
        return "must be one of " + ", ".join(get_args(info.annotation))
    return ""
