import json
import re

import pytest

from bot.cli import main
from tests.conftest import ROOT, write_docs


def test_index_json_summary(tmp_path, capsys):
    docs = write_docs(
        tmp_path / "docs", {"a.md": "---\nintent: api\n---\n# A\n\nAlpha.\n", "bad.md": b"\x00\x01"}
    )
    assert main(["index", str(docs), "--db", str(tmp_path / "i.db"), "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {
        k: out[k] for k in ("added", "changed", "removed", "unchanged", "chunks", "embedded")
    } == {"added": 1, "changed": 0, "removed": 0, "unchanged": 0, "chunks": 1, "embedded": 1}
    assert out["skipped"] == [
        {"path": "bad.md", "reason": "binary file (contains NUL bytes), not markdown"}
    ]
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

    (tmp_path / ".env").write_text(
        "# comment\nFIELDGUIDE_DB='x.db'\nexport FIELDGUIDE_BM25_WEIGHT=0.3\n"
    )
    s = Settings.load(environ={"FIELDGUIDE_DB": "from-env.db"}, dotenv=tmp_path / ".env")
    assert s.db == "from-env.db" and s.bm25_weight == 0.3


def test_every_setting_is_documented():
    from bot.settings import describe
    from tests.conftest import ROOT

    example = (ROOT / ".env.example").read_text()
    table = (ROOT / "docs" / "configuration.md").read_text()
    for env, _, _ in describe():
        assert f"\n{env}=" in example, f"{env} missing from .env.example"
        assert f"| `{env}` |" in table, f"{env} missing from docs/configuration.md's table"


def test_eval_on_the_example_set(tmp_path, capsys, examples_db):

    from tests.conftest import EXAMPLES

    set_dir = EXAMPLES.parent  # docs/ and questions.jsonl: an eval set, read only
    out_json = tmp_path / "out.json"
    assert (
        main(
            [
                "eval",
                str(set_dir),
                "--db",
                examples_db,  # already holds these docs: eval's index run finds nothing to embed
                "--output",
                str(out_json),
                "--modes",
                "hybrid",
                "routed",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "| routed |" in table and "Per intent (routed)" in table
    result = json.loads(out_json.read_text())
    assert result["questions"] == 35 and set(result["modes"]) == {"hybrid", "routed"}
    routed = result["modes"]["routed"]
    assert set(routed) >= {
        "intent_accuracy",
        "intent_hit@1",
        "hit@1",
        "hit@5",
        "mrr@10",
        "recall@3",
        "p50_ms",
        "p95_ms",
    }
    assert routed["mrr@10"] > 0.5 and routed["intent_accuracy"] > 0.6
    [paired] = result["paired"]
    assert (paired["mode"], paired["baseline"], paired["metric"]) == ("routed", "hybrid", "mrr@10")
    lo, hi = paired["ci95"]
    assert lo <= paired["difference"] <= hi
    assert "routed − hybrid (mrr@10, 30 questions)" in table and "bootstrap 95% interval" in table
    assert main(["eval", str(tmp_path / "nothing")]) == 2
    capsys.readouterr()
    # --json is a flag, as every other command's: the same figures on stdout, no table
    args = ["eval", str(set_dir), "--db", examples_db, "--modes", "hybrid", "--json"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["questions"] == 35 and list(printed["modes"]) == ["hybrid"]
    assert printed["modes"]["hybrid"]["mrr@10"] == result["modes"]["hybrid"]["mrr@10"]


def test_eval_help_says_where_its_index_is(capsys):
    assert main(["eval", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "default: .fieldguide/eval/SET-EMBEDDER.db" in text and "not FIELDGUIDE_DB" in text
    assert "--json print every figure as one JSON object" in text
    assert "-o, --output FILE also write every figure to this JSON file" in text


def test_search_and_ask_json(examples_db, capsys):
    from tests.conftest import EXAMPLES

    db = examples_db
    assert main(["index", str(EXAMPLES), "--db", db, "--quiet"]) == 0  # nothing changed
    capsys.readouterr()
    assert main(["intents", "--db", db, "--json"]) == 0
    intents = {i["name"]: i for i in json.loads(capsys.readouterr().out)}
    assert (
        intents["webhooks"]["docs"] == 5
        and intents["general"]["docs"] == 1
        and intents["api"]["chunks"] > 0
    )
    assert intents["authentication"]["description"] and intents["authentication"]["examples"]
    assert main(["search", "What does error TW-1429 mean?", "--db", db, "--k", "3", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert len(found["hits"]) == 3 and found["routing"]["intents"][0]["intent"] == "troubleshooting"
    assert {"doc", "heading_path", "bm25", "vector", "score"} <= set(found["hits"][0])
    assert (
        main(
            [
                "ask",
                "How many times is a failed webhook retried, and over how long?",
                "--db",
                db,
                "--json",
            ]
        )
        == 0
    )
    ans = json.loads(capsys.readouterr().out)
    assert ans["decision"] != "ABSTAIN" and ans["offline"] is True and "8 attempts" in ans["text"]
    assert {"doc", "section", "url", "cited_text", "verified"} <= set(ans["citations"][0])
    assert all(c["verified"] for c in ans["citations"])
    assert (
        set(ans["timings_ms"]) >= {"embed", "route_retrieve", "extract", "total"} and ans["intents"]
    )
    assert main(["ask", "   ", "--db", db]) == 2
    assert main(["audit", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["decision"] == ans["decision"]


def test_a_file_that_is_not_an_index_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    assert main(["ask", "what is a webhook", "--db", str(bad)]) == 2
    assert "is not an index" in capsys.readouterr().err


def test_ask_with_claude_honours_base_url_and_model_settings(
    examples_db, stub, monkeypatch, capsys
):
    from tests.standins.claude import FakeClaude

    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
    monkeypatch.setenv("FIELDGUIDE_ANSWER_MODEL", "claude-opus-4-6")
    monkeypatch.setenv("FIELDGUIDE_CLASSIFY_MODEL", "claude-haiku-4-5")
    assert (
        main(["ask", "How do I verify the signature of a webhook?", "--db", examples_db, "--json"])
        == 0
    )
    ans = json.loads(capsys.readouterr().out)
    assert (
        ans["offline"] is False and ans["decision"] == "ANSWER" and ans["citations"][0]["verified"]
    )
    models = [body["model"] for body in fake.seen]
    # classify, answer (the cite path: its citations extract), claim check (the default model)
    assert models == ["claude-haiku-4-5", "claude-opus-4-6", "claude-haiku-5-5"]
    assert "test-key" in json.dumps(stub.calls("/v1/messages")[0].headers)


def test_a_partial_answer_is_marked_in_the_cli(examples_db, stub, monkeypatch, capsys):
    from tests.standins.claude import FakeClaude

    # a citation in the right place with a text that is not there: unverified
    wrong = {
        "type": "search_result_location",
        "source": "x",
        "title": "x",
        "cited_text": "Tidewater never signs webhooks.",
        "search_result_index": 0,
        "start_block_index": 0,
        "end_block_index": 1,
    }
    reply = [("Check the header.", [(0, 0, 1)]), (" Or not at all.", [wrong])]
    stub.route("/v1/messages", FakeClaude(answer=reply))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
    assert main(["ask", "How do I verify the signature of a webhook?", "--db", examples_db]) == 0
    out = capsys.readouterr().out
    assert out.startswith("⚠ Partial answer: ") and "(PARTIAL · " in out


def test_audit_stats_counts_tokens_and_cost_by_model(examples_db, stub, monkeypatch, capsys):
    from bot.prices import DEFAULT_PRICES
    from bot.state.sqlite import SqliteState
    from index.store import open_db
    from tests.standins.claude import FakeClaude

    stub.route("/v1/messages", FakeClaude())
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
    for q in ("How do I verify the signature of a webhook?", "How often should I rotate keys?"):
        assert main(["ask", q, "--db", examples_db]) == 0
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert main(["ask", "How do I verify the signature of a webhook?", "--db", examples_db]) == 0
    rows = SqliteState(open_db(examples_db)).list_answers()
    SqliteState(open_db(examples_db)).record_feedback(rows[-1]["id"], "U1", "helpful")
    # each answer's row keeps its tokens per step, with the model that billed them
    assert rows[-1]["usage"]["answer"]["model"] == "claude-sonnet-5-5"
    assert set(rows[-1]["usage"]["check"]) == {
        "model",
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    }
    capsys.readouterr()
    assert main(["audit", "--stats", "--json", "--db", examples_db]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["questions"] == 3 and sum(s["decisions"].values()) == 3
    assert s["feedback"] == {"helpful": 1}
    sonnet, haiku = s["models"]["claude-sonnet-5-5"], s["models"]["claude-haiku-5-5"]
    assert sonnet["calls"] == 2 and haiku["calls"] == 4  # classify and check, twice
    # the answer's rules are one cached prefix, written by the first question and read by the
    # second; each question's own turn (what a second look's round sends again) is written too
    assert 0 < sonnet["cache_read_input_tokens"] < sonnet["cache_creation_input_tokens"]
    price = DEFAULT_PRICES["claude-sonnet-5-5"]
    expected = (
        sonnet["input_tokens"] * price["input"]
        + sonnet["output_tokens"] * price["output"]
        + sonnet["cache_creation_input_tokens"] * price["cache_write"]
        + sonnet["cache_read_input_tokens"] * price["cache_read"]
    ) / 1e6
    assert abs(sonnet["cost_usd"] - expected) < 1e-6
    assert abs(s["cost_usd"] - sonnet["cost_usd"] - haiku["cost_usd"]) < 1e-6
    # per step and per answer: the steps' costs add up to the total; two of the three
    # answers called Claude
    assert {"classify", "answer", "check"} <= set(s["steps"])
    assert s["steps"]["answer"]["calls"] == 2 and s["answers_with_claude"] == 2
    assert abs(sum(st["cost_usd"] for st in s["steps"].values()) - s["cost_usd"]) < 1e-5
    assert abs(s["cost_per_answer_usd"] - s["cost_usd"] / 2) < 1e-6
    # a price table of one's own; a model without a price is named, not guessed
    prices = {"claude-sonnet": {"input": 1, "output": 1, "cache_write": 1, "cache_read": 1}}
    monkeypatch.setenv("FIELDGUIDE_PRICES", json.dumps(prices))
    assert main(["audit", "--stats", "--db", examples_db, "--since", "2000-01-01"]) == 0
    out = capsys.readouterr().out
    assert "Answers since 2000-01-01T00:00:00+00:00: 3" in out and "| claude-haiku-5-5 | 4 |" in out
    assert "No price for claude-haiku-5-5: add it to FIELDGUIDE_PRICES." in out
    assert "| answer | 2 |" in out and "an answer that called Claude, 2 of them" in out
    assert main(["audit", "--stats", "--db", examples_db, "--since", "2999-01-01"]) == 0
    assert "Answers since 2999-01-01T00:00:00+00:00: 0" in capsys.readouterr().out


def test_a_bad_price_table_is_refused_with_the_reason(monkeypatch, capsys, tmp_path):
    from bot.settings import Settings, SettingsError

    for raw, why in [
        ("{", "is not JSON"),
        ('{"m": {"input": 1}}', "give exactly input, output, cache_write, cache_read"),
        ('{"m": {"input": -1, "output": 1, "cache_write": 1, "cache_read": 1}}', "numbers ≥ 0"),
    ]:
        try:
            Settings.load(environ={"FIELDGUIDE_PRICES": raw}, dotenv=None)
        except SettingsError as e:
            assert why in str(e) and "FIELDGUIDE_PRICES" in str(e)
        else:
            raise AssertionError(raw)


def test_version_is_the_installed_distributions(capsys):
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"fieldguide {version('fieldguide')}\n"


def test_small_talk_gets_a_reply_of_its_own_never_not_in_the_docs(tmp_path, capsys):
    """Small talk ("thanks!", "hello") is no question for the docs: a short reply, before any
    index is read (none exists here), nothing recorded, so never a gap."""
    db = str(tmp_path / "none.db")
    for text, reply in (("thanks!", "You're welcome!"), ("hello", "Hi!"), ("bye", "Ask me")):
        assert main(["ask", text, "--db", db]) == 0
        out = capsys.readouterr().out
        assert out.startswith(reply) and "docs, so I won't guess" not in out
    assert main(["ask", "hello", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["small_talk"] == "greeting"
    assert main(["ask", "how long is the grace period", "--db", db]) == 2  # a question: no index
    assert "No index" in capsys.readouterr().err


def test_prices_are_the_english_pricing_pages():
    """Cache reads as the English pricing page lists them (2026-11): Sonnet 5.5 $0.10, Opus 5.5
    $0.20, Fable 5.1 $0.25, Haiku 5.5 $0.01 (they were listed at 2x and 4x)."""
    from bot.costs import price_for
    from bot.prices import DEFAULT_PRICES

    reads = {
        "claude-sonnet-5-5": 0.10,
        "claude-opus-5-5": 0.20,
        "claude-fable-5-1": 0.25,
        "claude-haiku-5-5": 0.01,
        "claude-opus-5": 0.50,
    }
    for model, read in reads.items():
        price = price_for(model, DEFAULT_PRICES)
        assert price is not None and price["cache_read"] == read, model
    sonnet = price_for("claude-sonnet-5-5", DEFAULT_PRICES)
    assert sonnet is not None
    assert (sonnet["input"], sonnet["output"], sonnet["cache_write"]) == (2.0, 10.0, 2.5)


def test_ask_with_a_key_exits_once_its_answer_is_printed(examples_db, stub, tmp_path):
    """Claude's classification beside the answer hangs: `fieldguide ask` prints its answer and
    exits without waiting for it, and the audit says the routing was not back."""
    import os
    import subprocess
    import sys
    import threading
    import time

    from bot.state.sqlite import SqliteState
    from index.store import open_db
    from tests.conftest import ROOT
    from tests.standins.claude import FakeClaude, hanging

    release = threading.Event()
    fake = FakeClaude(down={"classify": hanging(release, 120)})
    stub.route("/v1/messages", fake)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": stub.url,
        "FIELDGUIDE_DB": examples_db,
    }
    question = "How do I verify the signature of a webhook?"
    try:
        out = subprocess.run(
            [sys.executable, "-m", "bot.cli", "ask", question],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=110,
        )
        exited = time.monotonic()
        assert not release.is_set()  # the classification never came back
    finally:
        release.set()
    assert out.returncode == 0, out.stderr
    assert "[1]" in out.stdout
    checked = [r for r in stub.calls("/v1/messages") if fake.kind(r.json) == "check"]
    assert checked and exited - checked[-1].at < 10  # the answer's last call, then the exit
    [row] = SqliteState(open_db(examples_db)).list_answers(limit=1)
    assert "Claude's routing was not back by the end of the answer" in row["notes"]


def test_audit_stats_offline_says_no_answer_called_claude(examples_db, capsys):
    assert main(["ask", "How do I verify the signature of a webhook?", "--db", examples_db]) == 0
    capsys.readouterr()
    assert main(["audit", "--stats", "--db", examples_db]) == 0
    out = capsys.readouterr().out
    assert "Estimated cost: none (no answer called Claude)" in out
    assert "an answer that called Claude" not in out and "$0.00000" not in out


@pytest.mark.parametrize("flag", ["--db", "--json"])
def test_cli_md_names_the_commands_without_a_common_flag(flag):
    """docs/cli.md says which commands do not take `--db` and `--json`: exactly those."""
    from bot.cli import cli

    text = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    said = re.search(rf"every command but ((?:`[\w ]+`(?:, | and )?)+) takes `{flag}", text, re.I)
    assert said, f"docs/cli.md says nothing of which commands take {flag}"
    named = {n.split()[0] for n in re.findall(r"`([\w ]+)`", said.group(1))}
    without = {
        name
        for name, command in cli.commands.items()
        if flag not in {o for p in command.params for o in getattr(p, "opts", [])}
    }
    assert named == without
