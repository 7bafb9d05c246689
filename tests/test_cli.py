import json

from bot.cli import main
from tests.conftest import write_docs


def test_index_json_summary(tmp_path, capsys):
    docs = write_docs(tmp_path / "docs", {"a.md": "---\nintent: api\n---\n# A\n\nAlpha.\n", "bad.md": b"\x00\x01"})
    assert main(["index", str(docs), "--db", str(tmp_path / "i.db"), "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {k: out[k] for k in ("added", "changed", "removed", "unchanged", "chunks", "embedded")} == \
        {"added": 1, "changed": 0, "removed": 0, "unchanged": 0, "chunks": 1, "embedded": 1}
    assert out["skipped"] == [{"path": "bad.md", "reason": "binary file (contains NUL bytes), not markdown"}]
    assert isinstance(out["seconds"], float)


def test_index_human_summary(tmp_path, capsys):
    docs = write_docs(tmp_path / "docs", {"a.md": "# A\n\nAlpha.\n"})
    assert main(["index", str(docs), "--db", str(tmp_path / "i.db"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "added 1 · changed 0 · removed 0 · unchanged 0 · skipped 0" in out and "1 chunks" in out


def test_index_errors_exit_nonzero_with_a_message(tmp_path, capsys):
    assert main(["index", str(tmp_path / "missing"), "--db", str(tmp_path / "i.db")]) == 2
    assert "Docs folder not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["index", str(tmp_path / "empty"), "--db", str(tmp_path / "i.db")]) == 2
    assert "No markdown files" in capsys.readouterr().err


def test_settings_from_dotenv(tmp_path, monkeypatch):
    from bot.settings import Settings

    (tmp_path / ".env").write_text("# comment\nFIELDGUIDE_DB='x.db'\nexport FIELDGUIDE_BM25_WEIGHT=0.3\n")
    s = Settings.load(environ={"FIELDGUIDE_DB": "from-env.db"}, dotenv=tmp_path / ".env")
    assert s.db == "from-env.db" and s.bm25_weight == 0.3


def test_every_setting_is_documented():
    from bot.settings import describe
    from tests.conftest import ROOT

    example = (ROOT / ".env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    for env, _, _ in describe():
        assert f"\n{env}=" in example, f"{env} missing from .env.example"
        assert f"`{env}`" in readme, f"{env} missing from the README's configuration table"
