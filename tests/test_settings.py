import pytest

from bot.cli import main
from bot.settings import Settings, SettingsError


def load(tmp_path, dotenv: bytes | str, environ: dict | None = None) -> Settings:
    path = tmp_path / ".env"
    path.write_bytes(dotenv if isinstance(dotenv, bytes) else dotenv.encode())
    return Settings.load(environ=environ or {}, dotenv=path)


def test_dotenv_quoting_and_comments(tmp_path):
    s = load(
        tmp_path,
        "# a comment\n"
        "SLACK_BOT_TOKEN=xoxb-123 # the bot token\n"  # an inline comment is not part of it
        "SLACK_SIGNING_SECRET='abc # def'\n"  # quoted: kept whole
        'ANTHROPIC_API_KEY="sk-ant-x"\n'
        "export FIELDGUIDE_BM25_WEIGHT=0.3\n"
        "VOYAGE_API_KEY=pa-${HOME}\n"  # no expansion: a secret is taken as written
        "FIELDGUIDE_ADMINS=U1#U2\n"  # no space before #: part of the value
        "FIELDGUIDE_DB=\n",  # empty: the default
    )
    assert s.slack_bot_token == "xoxb-123" and s.slack_signing_secret == "abc # def"
    assert s.anthropic_api_key == "sk-ant-x" and s.bm25_weight == 0.3
    assert s.voyage_api_key == "pa-${HOME}" and s.admins == "U1#U2"
    assert s.db == ".fieldguide/index.db"


def test_dotenv_with_a_bom_keeps_its_first_key(tmp_path):
    s = load(tmp_path, "\ufeffSLACK_BOT_TOKEN=xoxb-1\nSLACK_APP_TOKEN=xapp-1\n".encode())
    assert (s.slack_bot_token, s.slack_app_token) == ("xoxb-1", "xapp-1")


def test_the_environment_wins_over_dotenv(tmp_path):
    s = load(tmp_path, "FIELDGUIDE_DB='x.db'\n", environ={"FIELDGUIDE_DB": "from-env.db"})
    assert s.db == "from-env.db"


@pytest.mark.parametrize(
    "dotenv, message",
    [
        (b"SLACK_BOT_TOKEN=caf\xe9\n", "is not UTF-8 text (invalid byte at offset 19)"),
        (b"FIELDGUIDE_DB=x\nthis line is wrong\n", "line 2 is not KEY=value"),
    ],
)
def test_unreadable_dotenv_is_a_clear_error(tmp_path, monkeypatch, capsys, dotenv, message):
    (tmp_path / ".env").write_bytes(dotenv)
    monkeypatch.chdir(tmp_path)
    assert main(["intents"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "wrong" not in err


@pytest.mark.parametrize(
    "env, value, message",
    [
        ("FIELDGUIDE_CHUNK_CHARS", "0", "must be between 200 and 20,000"),
        ("FIELDGUIDE_CHUNK_CHARS", "1e9", "is not a whole number"),
        ("FIELDGUIDE_TIMEOUT", "-5", "must be more than 0 and at most 600"),
        ("FIELDGUIDE_TIMEOUT", "nan", "is not a number"),
        ("FIELDGUIDE_TIMEOUT", "inf", "is not a number"),
        ("FIELDGUIDE_BM25_WEIGHT", "1.5", "must be between 0 and 1"),
        ("FIELDGUIDE_BM25_WEIGHT", "abc", "is not a number: must be between 0 and 1"),
        ("FIELDGUIDE_CHUNK_CHARS", "many", "is not a whole number: must be between 200 and 20,000"),
        ("FIELDGUIDE_MAX_RETRIES", "two", "is not a whole number"),
        ("FIELDGUIDE_FUSION", "max", "must be one of weighted, rrf"),
        ("ANTHROPIC_BASE_URL", "localhost:8080", "must be an http:// or https:// URL"),
        ("FIELDGUIDE_REINDEX_COMMAND", "docs reindex", "must be like /docs-reindex"),
        ("FIELDGUIDE_AUDIT_RETENTION_DAYS", "-1", "must be between 0 and 36,500"),
        ("FIELDGUIDE_REFRESH_EVERY", "soon", "must be a duration of at least 1s, such as 30s"),
        ("FIELDGUIDE_MCP_TOKEN", "short", "must be 32 characters or more"),
        ("FIELDGUIDE_DATABASE_URL", "mysql://db", "must be a postgresql:// URL"),
        ("FIELDGUIDE_PRICES", "{", "is not JSON"),
        ("FIELDGUIDE_CLAUDE_PATH", "overlap", "the overlap and sequential paths were removed"),
        ("FIELDGUIDE_CLAUDE_PATH", "sequential", "unset it"),
    ],
)
def test_bad_settings_are_named(env, value, message):
    with pytest.raises(SettingsError) as e:
        Settings.load(environ={env: value}, dotenv=None)
    assert f"{env}=" in str(e.value) and message in str(e.value)
    assert e.value.bad == [env] and len(e.value.problems) == 1
    assert "pydantic" not in str(e.value) and "Input should" not in str(e.value)


def test_a_bad_token_is_named_and_never_shown():
    with pytest.raises(SettingsError) as e:
        Settings.load(environ={"FIELDGUIDE_MCP_TOKEN": "s3cr3t"}, dotenv=None)
    assert "FIELDGUIDE_MCP_TOKEN=***" in str(e.value) and "s3cr3t" not in str(e.value)


def test_an_empty_value_in_the_environment_means_the_default_even_over_dotenv(tmp_path):
    s = load(tmp_path, "FIELDGUIDE_DB=x.db\n", environ={"FIELDGUIDE_DB": " "})
    assert s.db == ".fieldguide/index.db"


def test_durations_are_read_once_for_settings_and_since():
    from bot.since import seconds_of

    assert Settings(refresh_every="2w").refresh_seconds == seconds_of("2w") == 14 * 86_400
    assert Settings(refresh_every=" 1.5h ").refresh_seconds == 5400


def test_the_one_claude_path_left_may_still_be_named():
    assert Settings.load(environ={"FIELDGUIDE_CLAUDE_PATH": "cite"}, dotenv=None) == Settings()


def test_every_bad_setting_at_once_and_no_traceback(monkeypatch, capsys):
    monkeypatch.setenv("FIELDGUIDE_CHUNK_CHARS", "0")
    monkeypatch.setenv("FIELDGUIDE_TIMEOUT", "-1")
    assert main(["intents"]) == 2
    err = capsys.readouterr().err
    assert "FIELDGUIDE_CHUNK_CHARS=0" in err and "FIELDGUIDE_TIMEOUT=-1.0" in err
    assert "Traceback" not in err


def test_settings_made_in_code_are_checked_too():
    with pytest.raises(SettingsError, match="FIELDGUIDE_CHUNK_CHARS=0"):
        Settings(chunk_chars=0)
    assert Settings(chunk_chars=200).chunk_chars == 200
    assert Settings(timeout=5).timeout == 5.0
    with pytest.raises(SettingsError, match="FIELDGUIDE_CHUNK_CHARS='many' is not a whole number"):
        Settings(chunk_chars="many")
    with pytest.raises(SettingsError, match="chunk_size is not a setting"):
        Settings(chunk_size=100)
