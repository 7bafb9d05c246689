import sys

from bot.cli import main
from tests.conftest import EXAMPLES
from tests.standins.slack import SlackMock
from tests.standins.voyage import voyage_embeddings

MODELS = {
    "data": [
        {
            "type": "model",
            "id": "claude-haiku-4-5",
            "display_name": "Claude Haiku 4.5",
            "created_at": "2025-10-01T00:00:00Z",
        }
    ],
    "has_more": False,
    "first_id": "claude-haiku-4-5",
    "last_id": "claude-haiku-4-5",
}


def lines(out: str) -> dict[str, tuple[str, str]]:
    """{check name: (status, detail)} from doctor's output."""
    found = {}
    for line in out.splitlines():
        status, rest = line.split(maxsplit=1)
        name, _, detail = rest.partition("  ")
        found[name.strip()] = (status, detail.strip())
    return found


def test_doctor_all_ok_offline(examples_db, capsys):
    assert main(["doctor", "--db", examples_db, "--docs", str(EXAMPLES)]) == 0
    found = lines(capsys.readouterr().out)
    assert found["settings"][0] == "ok" and found["local model"][0] == "ok"
    assert found["index"][0] == "ok" and "integrity ok · generation 1" in found["index"][1]
    assert "24 docs" in found["index"][1] and found["model"][0] == "ok"
    assert found["docs"] == ("ok", f"{EXAMPLES}: 24 markdown files, all readable")
    assert [found[n][0] for n in ("claude", "voyage", "slack", "fleet")] == ["skip"] * 4


def test_doctor_reaches_each_service_once(examples_db, stub, monkeypatch, capsys):
    slack = SlackMock()
    try:
        stub.route("/v1/models", (200, MODELS))
        stub.route("/v1/embeddings", voyage_embeddings(8))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
        monkeypatch.setenv("VOYAGE_API_KEY", "pa-test")
        monkeypatch.setenv("VOYAGE_BASE_URL", f"{stub.url}/v1")
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
        monkeypatch.setenv("SLACK_API_BASE_URL", f"{slack.url}/api/")
        # the index was embedded locally: with a Voyage key set it no longer matches
        assert main(["doctor", "--db", examples_db, "--docs", str(EXAMPLES)]) == 1
        found = lines(capsys.readouterr().out)
        assert found["claude"] == ("ok", "reachable, key accepted")
        assert found["voyage"] == ("ok", "reachable, voyage-4 embeds (8 dims)")
        assert found["slack"][0] == "ok" and found["local model"][0] == "skip"
        assert found["model"][0] == "FAIL" and "voyage:voyage-4 is in use" in found["model"][1]
        assert len(stub.calls("/v1/models")) == 1 and len(stub.calls("/v1/embeddings")) == 1
        assert len(slack.calls("/api/auth.test")) == 1
    finally:
        slack.close()


def test_doctor_says_why_each_check_fails(tmp_path, stub, monkeypatch, capsys):
    slack = SlackMock()
    try:
        error = {"type": "error", "error": {"type": "authentication_error", "message": "bad"}}
        stub.route("/v1/models", (401, error))
        slack.route("/api/auth.test", (200, {"ok": False, "error": "invalid_auth"}))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-bad")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
        monkeypatch.setenv("VOYAGE_API_KEY", "pa-test")
        monkeypatch.setenv("VOYAGE_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-bad")
        monkeypatch.setenv("SLACK_API_BASE_URL", f"{slack.url}/api/")
        bad = tmp_path / "bad.db"
        bad.write_bytes(b"not sqlite " * 100)
        assert main(["doctor", "--db", str(bad), "--docs", str(tmp_path / "none")]) == 1
        found = lines(capsys.readouterr().out)
        assert found["index"][0] == "FAIL" and "cannot be read as an index" in found["index"][1]
        assert found["docs"] == ("FAIL", f"{tmp_path / 'none'} is not a folder (FIELDGUIDE_DOCS)")
        assert found["claude"] == ("FAIL", "ANTHROPIC_API_KEY was rejected (401)")
        assert found["voyage"][0] == "FAIL" and "cannot embed with voyage-4" in found["voyage"][1]
        assert found["slack"] == ("FAIL", "SLACK_BOT_TOKEN was refused: invalid_auth")
    finally:
        slack.close()


def test_doctor_reports_bad_settings_as_a_failed_check(monkeypatch, capsys):
    monkeypatch.setenv("FIELDGUIDE_CHUNK_CHARS", "0")
    assert main(["doctor"]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("FAIL  settings")
    assert "FIELDGUIDE_CHUNK_CHARS=0 must be between 200" in first


def test_doctor_lists_every_bad_setting_and_still_runs_the_other_checks(
    examples_db, monkeypatch, capsys
):
    # one value that is not a number and one out of range: both named, one line each
    monkeypatch.setenv("FIELDGUIDE_BM25_WEIGHT", "2")
    monkeypatch.setenv("FIELDGUIDE_TIMEOUT", "abc")
    assert main(["doctor", "--db", examples_db]) == 1
    out = capsys.readouterr().out.splitlines()
    failed = [line for line in out if line.startswith("FAIL  settings")]
    assert len(failed) == 2
    assert any("FIELDGUIDE_TIMEOUT='abc' is not a number" in line for line in failed)
    assert any("FIELDGUIDE_BM25_WEIGHT=2.0 must be between 0 and 1" in line for line in failed)
    assert not any(line.startswith("ok    settings") for line in out)  # not also "valid"
    # the rest ran, with those two at their defaults
    found = lines("\n".join(line for line in out if "settings" not in line))
    assert found["index"][0] == "ok" and found["model"][0] == "ok"
    # every other command stops with both named in one line
    assert main(["intents", "--db", examples_db]) == 2
    err = capsys.readouterr().err
    assert "FIELDGUIDE_TIMEOUT='abc'" in err and "FIELDGUIDE_BM25_WEIGHT=2.0" in err


def test_a_fleet_without_its_extra_is_named_and_stops_every_command(
    examples_db, capsys, monkeypatch
):
    """psycopg absent (None in sys.modules is how Python says a module cannot be imported): the
    fleet's extra is named by doctor, and `index` and `serve` stop with the same line."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.setenv("FIELDGUIDE_DATABASE_URL", "postgresql://db.invalid/fg")
    install = "pip install 'fieldguide[fleet]'"
    assert main(["doctor", "--db", examples_db, "--docs", str(EXAMPLES)]) == 1
    status, detail = lines(capsys.readouterr().out)["fleet"]
    assert status == "FAIL" and detail.endswith(install)
    for command in (["index", str(EXAMPLES), "--db", examples_db], ["serve", "--db", examples_db]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err == f"fieldguide: {detail}\n" and "Traceback" not in err
