"""The Claude path against a stand-in that behaves as today's Messages API does: the 5.5
models refuse a forced tool_choice, rate limits and overloads are ordinary and retried within the
question's deadline, a claim check that cannot run fails closed, Voyage down at question time costs
one short try."""

import time

import pytest

from bot.cli import main
from bot.state.sqlite import SqliteState
from index.embedders import VoyageEmbedder
from index.indexer import index_folder
from index.store import open_db
from router.answer import ANSWER, PARTIAL
from router.claude import OFFLINE_NOTE
from router.engine import Engine
from router.pipeline import Pipeline
from tests.conftest import EXAMPLES
from tests.standins.claude import OVERLOADED, FakeClaude, api_rules, rate_limited
from tests.standins.clock import skipping
from tests.standins.voyage import voyage_embeddings
from tests.test_pipeline import SIGNATURE_Q, make_pipeline

SONNET_55 = dict.fromkeys(("classify", "condense", "answer", "check"), "claude-sonnet-5-5")
STEPS = ("classify", "answer", "check")


def test_the_stand_in_refuses_what_the_api_refuses():
    forced = {
        "model": "claude-sonnet-5-5",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "t", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "t"},
    }

    def status(body: dict) -> int:
        refused = api_rules(body)
        return refused[0] if refused else 200

    refused = api_rules(forced)
    assert refused is not None and "forced tool use" in refused[1]["error"]["message"]
    assert status(forced) == 400 and status(dict(forced, tool_choice={"type": "any"})) == 400
    assert status(dict(forced, model="claude-haiku-4-5")) == 200  # older models force fine
    effort = {"model": "claude-haiku-4-5", "output_config": {"effort": "low"}}
    assert status(effort) == 400 and status(dict(effort, model="claude-haiku-5-5")) == 200
    assert status({"model": "claude-sonnet-9"}) == 404


def test_every_step_on_sonnet_5_5_is_answered_with_claude(examples_db, local_embedder, stub):
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    p = make_pipeline(examples_db, local_embedder, stub, models=SONNET_55)
    ans = p.answer(SIGNATURE_Q)
    assert ans.decision == ANSWER and not ans.trace.offline and not fake.refused
    assert set(STEPS) <= set(ans.trace.usage)
    assert {ans.trace.usage[s]["model"] for s in STEPS} == {"claude-sonnet-5-5"}
    assert ans.text == "Check the header see docs.[1] That is all."
    assert [s.n for s in ans.sources] == [1]  # only the source cited
    # no extraction call: the answer read its candidates, packed
    assert not fake.calls("extract")
    [call] = fake.calls("answer")
    results = [b for b in call["messages"][0]["content"] if b["type"] == "search_result"]
    read = ans.trace.route["read"]
    assert len(results) == len(read) > 5
    assert [r["title"] for r in results] == [r["section"] for r in read]


@pytest.mark.parametrize("fault", [rate_limited(1), OVERLOADED], ids=["429", "529"])
def test_one_rate_limit_or_overload_on_the_first_call_is_retried(
    examples_db, local_embedder, stub, fault
):
    """The defaults (30 s timeout, 45 s deadline, 2 retries): before, no retry fitted
    (max_retries = 45 // 30 - 1 = 0) and the whole question went offline."""
    fake = FakeClaude()
    fake.faults_for = {"answer": [fault]}
    stub.route("/v1/messages", fake)
    clock = skipping()  # the retry's wait, skipped
    p = make_pipeline(examples_db, local_embedder, stub, retries=2, timeout=30.0, clock=clock)
    assert p.deadline == 45.0
    started = clock.monotonic()
    ans = p.answer(SIGNATURE_Q)
    assert fake.failed == [("answer", fault[0])]
    assert ans.decision == ANSWER and not ans.trace.offline
    assert not any(OFFLINE_NOTE in n for n in ans.trace.notes)
    assert set(STEPS) <= set(ans.trace.usage)
    if fault[0] == 429:  # retry-after: 1 honoured
        assert clock.monotonic() - started >= 1.0


def test_a_retry_after_past_the_deadline_is_not_waited_for(examples_db, local_embedder, stub):
    fake = FakeClaude()
    fake.faults_for = {"classify": [rate_limited(60)]}
    stub.route("/v1/messages", fake)
    clock = skipping()  # a wait for the retry-after would move it on by 60 s
    p = make_pipeline(examples_db, local_embedder, stub, retries=2, timeout=30.0, clock=clock)
    started = clock.monotonic()
    ans = p.answer(SIGNATURE_Q)
    assert clock.monotonic() - started < 10
    # routing failed alone (beside the answer, which never waited for it): Claude still wrote
    # the answer, and the audit says why its routing is missing
    assert any("routing did not run (RateLimitError)" in n for n in ans.trace.notes)
    assert "answer" in ans.trace.usage and ans.decision == ANSWER and not ans.trace.offline
    assert ans.trace.route["classifier"] == "offline"


def test_claim_check_down_marks_the_answer_not_checked_where_it_is_seen(
    examples_db, local_embedder, stub, monkeypatch, capsys
):
    fake = FakeClaude()
    fake.down["check"] = OVERLOADED
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == PARTIAL and "not checked" in ans.caveat
    # the audit keeps it, as the caller records it (FieldGuide.ask): the decision and why
    state = SqliteState(open_db(examples_db))
    state.record_answer(ans, {})
    [row] = state.list_answers(limit=1)
    assert row["decision"] == PARTIAL
    assert any("claim check did not run" in n for n in row["notes"])
    # the CLI shows it
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
    monkeypatch.setenv("FIELDGUIDE_MAX_RETRIES", "0")
    assert main(["ask", SIGNATURE_Q, "--db", examples_db]) == 0
    out = capsys.readouterr().out
    assert "⚠ Partial answer: its claims were not checked against the docs it cites" in out


@pytest.mark.parametrize("down", ["refused", "hanging"])
def test_voyage_down_at_question_time_is_answered_within_10_s(tmp_path, stub, down):
    stub.route("/v1/embeddings", voyage_embeddings())
    voyage = VoyageEmbedder("k", base_url=stub.url + "/v1", max_retries=4)
    db = tmp_path / "v.db"
    index_folder(db, EXAMPLES, voyage)
    engine = Engine(str(db), voyage)
    engine.loaded()  # a running bot: its index (and intents' examples) loaded while Voyage was up
    before = len(stub.calls("/v1/embeddings"))
    if down == "refused":
        stub.route("/v1/embeddings", (503, {"detail": "down"}))
    else:

        def hang(req):
            time.sleep(30)
            return 200, {}

        stub.route("/v1/embeddings", hang)
    started = time.monotonic()
    ans = Pipeline(engine, None, {}).answer("How many times is a failed webhook delivery retried?")
    assert time.monotonic() - started < 10
    assert any("keyword search only" in n for n in ans.trace.notes) and ans.trace.hits
    assert len(stub.calls("/v1/embeddings")) == before + 1  # one short try for the question


def test_indexing_keeps_its_patient_retries(tmp_path, stub):
    from tests.standins.voyage import voyage_rate_limited

    ok = voyage_embeddings()
    calls = []

    def flaky(req):
        calls.append(1)
        return voyage_rate_limited(0) if len(calls) <= 2 else ok(req)

    stub.route("/v1/embeddings", flaky)
    voyage = VoyageEmbedder("k", base_url=stub.url + "/v1", max_retries=4)
    assert voyage.embed_documents(["a text"]).shape[0] == 1 and len(calls) == 3


def test_doctor_checks_each_configured_model_answers(stub, monkeypatch, capsys, examples_db):
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    stub.route("/v1/models", (200, {"data": [], "has_more": False}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
    monkeypatch.setenv("FIELDGUIDE_DB", examples_db)
    monkeypatch.setenv("FIELDGUIDE_ANSWER_MODEL", "claude-sonnet-9-9")
    main(["doctor"])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "claude" in x.lower() and "model" in x.lower())
    assert "claude-sonnet-9-9" in line and "FAIL" in out
    asked = {b["model"] for b in fake.seen} | {b["model"] for b in fake.refused}
    assert {"claude-haiku-5-5", "claude-sonnet-9-9"} <= asked


def test_a_model_without_a_price_is_named_once(stub, monkeypatch, caplog):
    from bot.costs import unpriced
    from bot.settings import Settings

    s = Settings.load()
    assert unpriced(s) == []  # the defaults are priced
    monkeypatch.setenv("FIELDGUIDE_ANSWER_MODEL", "claude-sonnet-9-9")
    monkeypatch.setenv("FIELDGUIDE_CHECK_MODEL", "claude-sonnet-9-9")
    assert unpriced(Settings.load()) == ["claude-sonnet-9-9"]
