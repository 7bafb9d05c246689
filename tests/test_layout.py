"""The rooms show the architecture: the question's path (router/) below the application (bot/),
the Slack runtime in bot/slack/, no product module too long to read whole."""

import ast
from pathlib import Path

from tests.conftest import ROOT

PRODUCT = ("bot", "router", "index", "prompts")
ROUTER_MAX_LINES = 400
MAX_LINES = 600


def imports_of(path: Path) -> set[str]:
    """The modules `path` imports, relative imports made absolute."""
    package = list(path.relative_to(ROOT).parent.parts)
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            names.add(".".join(base + ([node.module] if node.module else [])))
    return names


def test_the_question_path_imports_nothing_from_bot():
    """router/ is below bot/: the question's path keeps no store and knows no caller."""
    for path in sorted((ROOT / "router").glob("*.py")):
        assert not [n for n in imports_of(path) if n.split(".")[0] == "bot"], path.name
    source = (ROOT / "router" / "pipeline.py").read_text(encoding="utf-8")
    assert "self.state" not in source and "record_answer" not in source


def test_no_product_module_is_over_600_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for top in PRODUCT
        for p in (ROOT / top).rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_question_path_reads_in_modules_under_400_lines():
    """router/ is read question by question: no module there past ROUTER_MAX_LINES."""
    long = {
        p.name: n
        for p in (ROOT / "router").glob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > ROUTER_MAX_LINES
    }
    assert long == {}


def test_the_slack_runtime_is_one_package():
    slack = {p.stem for p in (ROOT / "bot" / "slack").glob("*.py")}
    assert {"slack_app", "answers", "slack_format", "slack_rules", "home", "handoff"} <= slack
    assert {"orphans", "reindex", "serve"} <= slack and (ROOT / "bot/slack/listeners").is_dir()
    # FieldGuide.serve alone starts it (the CLI only names serve's CannotServe), and it knows
    # fieldguide by what it declares it needs (bot/slack/guide.py), never the object itself
    for path in sorted((ROOT / "bot").rglob("*.py")):
        inside = "slack" in path.relative_to(ROOT / "bot").parts
        if not inside and path.name not in ("app.py", "cli.py"):
            assert not [n for n in imports_of(path) if n.startswith("bot.slack")], path.name
        if inside:
            assert "bot.app" not in imports_of(path), path.name


def test_the_state_is_a_declared_interface():
    """What a State can do is declared (bot/state/__init__.py), fleet capabilities included:
    every implementation has all of it, and no caller probes a State with getattr/hasattr."""
    import re

    from bot.state import State
    from bot.state.postgres import PostgresState
    from bot.state.sqlite import SqliteState

    parts = [c for c in State.__mro__ if c.__module__ == "bot.state"]
    members = {n for c in parts for n in vars(c) if not n.startswith("_")}
    members |= {n for c in parts for n in getattr(c, "__annotations__", {})}
    assert {"fleet", "durable", "take_orphans", "note_placeholder", "take_event"} <= members
    for cls in (SqliteState, PostgresState):
        assert [m for m in members if not hasattr(cls, m)] == [], cls.__name__
    assert SqliteState.fleet is False and PostgresState.fleet is True
    for path in sorted((ROOT / "bot").rglob("*.py")):
        probes = re.findall(r"\b(?:getattr|hasattr)\([\w.]*state\b", path.read_text())
        assert probes == [], path.name


def test_sql_is_written_by_the_owners_of_the_tables():
    """The index's tables are read and written in index/, the audit trail's in bot/state/: the
    rest of bot/ (home, doctor, scopes, health...) and router/ go through them."""
    import re

    statement = re.compile(r"\.execute\(|\.query\(|\b(?:SELECT|INSERT|UPDATE|DELETE) ", re.M)
    for top in ("bot", "router"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.relative_to(ROOT).parts[:2] == ("bot", "state"):
                continue
            assert not statement.search(path.read_text(encoding="utf-8")), path.name
