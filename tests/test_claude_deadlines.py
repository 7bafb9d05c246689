"""A question's time with keys: one model round trip before the first word, a deadline
that holds for the whole answer, nothing slow on the question's path, errors read by their kind.
Against the Messages API and Voyage stand-ins, with the real anthropic and voyageai clients."""

import shutil
import threading

import anthropic
import pytest

from index.embedders import VoyageEmbedder
from index.indexer import index_folder
from index.rerank import VoyageReranker
from router import compose
from router.answer import ANSWER, PARTIAL
from router.claude import FIRST_BYTE, Claude
from router.engine import Engine
from router.pipeline import Pipeline
from tests.conftest import EXAMPLES
from tests.standins.claude import (
    OVERLOADED,
    FakeClaude,
    api_error,
    api_rules,
    broken_after,
    hanging,
    overloaded_mid_stream,
    should_not_retry,
    spend_limited,
)
from tests.standins.clock import skipping
from tests.standins.voyage import voyage_embeddings, voyage_hanging, voyage_rerank
from tests.test_pipeline import SIGNATURE_Q, make_pipeline

CURRENT = {
    "classify": "claude-haiku-5-5",
    "condense": "claude-haiku-5-5",
    "answer": "claude-sonnet-5-5",
    "check": "claude-haiku-5-5",
}
# an answer of many cited sentences, for a stream that outlasts its deadline
LONG = [
    (f"Sentence {n} says what the docs say about verifying a webhook signature.", [(0, 0, 1)])
    for n in range(12)
]


def test_the_answer_does_not_wait_for_the_classifier(examples_db, local_embedder, stub):
    """The cite path's first word comes after one model round trip: retrieval runs on the
    offline router while Claude classifies beside the answer. The classification is held until
    the first word is shown, so the word can only have come while it was out; the models' times
    to their first token are played on a clock that skips them."""
    clock = skipping()
    timing = {"claude-haiku-5-5": (3.0, 130.0), "claude-sonnet-5-5": (0.2, 400.0)}
    fake = FakeClaude(timing=timing, clock=clock)
    routing = threading.Event()  # set: the classification is answered

    def classify_held(req):
        if fake.kind(req.json) == "classify":
            routing.wait(10.0)
        return fake(req)

    stub.route("/v1/messages", classify_held)
    p = make_pipeline(examples_db, local_embedder, stub, models=CURRENT, clock=clock)
    routing.set()
    p.answer(SIGNATURE_Q)  # a process's first question loads what every question reads
    routing.clear()
    first: list[tuple[float, bool]] = []  # (when, whether the classification was answered)
    started = clock.monotonic()

    def seen(_delta: str) -> None:
        if not first:
            first.append((clock.monotonic(), routing.is_set()))
            routing.set()

    try:
        ans = p.answer(SIGNATURE_Q, on_text=seen)
    finally:
        routing.set()
    assert ans.decision in (ANSWER, PARTIAL) and first and first[0][0] - started < 3.0
    assert not first[0][1]  # the first word came before the routing did
    assert ans.trace.route["classifier"] == "offline" and not ans.trace.offline
    kinds = [fake.kind(r.json) for r in stub.calls("/v1/messages")]
    assert kinds.count("classify") == 2 and kinds.count("answer") == 2


def test_thinking_and_effort_are_set_per_step(examples_db, local_embedder, stub):
    """Thinking as low as each model allows (Sonnet 5.5: between_tools; Haiku 5.5: disabled),
    the answer at medium effort, the short closed steps at low; the stand-in refuses what the API
    refuses."""
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    p = make_pipeline(examples_db, local_embedder, stub, models=CURRENT)
    ans = p.answer(SIGNATURE_Q)
    assert not fake.refused and not ans.trace.offline
    [answer] = fake.calls("answer")
    assert answer["thinking"] == {"type": "between_tools"}
    assert answer["output_config"]["effort"] == "medium"
    for kind in ("classify", "check"):
        body = fake.calls(kind)[0]
        assert body["thinking"] == {"type": "disabled"} and body["output_config"]["effort"] == "low"
    refused = api_rules({"model": "claude-sonnet-5-5", "thinking": {"type": "disabled"}})
    assert refused is not None and "between_tools" in refused[1]["error"]["message"]
    assert api_rules({"model": "claude-opus-5-5", "thinking": {"type": "disabled"}}) is not None


def test_a_slow_stream_is_cut_at_the_deadline_and_the_check_keeps_its_time(
    examples_db, local_embedder, stub
):
    """8 s deadline, an answer streamed at 3 words a second (~25 s whole): delivered within 9 s,
    what was streamed and checked kept, marked cut, and the claim check ran. The stream's pace
    and the deadline are played on one clock that skips the waits."""
    clock = skipping()
    fake = FakeClaude(answer=LONG, words_per_second=3, clock=clock)
    stub.route("/v1/messages", fake)
    p = make_pipeline(examples_db, local_embedder, stub, timeout=30.0, clock=clock)
    p.deadline = 8.0
    p.answer(SIGNATURE_Q)  # warm: loads timed apart
    shown: list[str] = []
    started = clock.monotonic()
    ans = p.answer(SIGNATURE_Q, on_text=shown.append)
    elapsed = clock.monotonic() - started
    assert elapsed < 9.0, elapsed
    assert ans.decision == PARTIAL and "time limit" in ans.caveat
    assert ans.text.startswith("Sentence 0") and "Sentence 11" not in ans.text
    assert "".join(shown).startswith("Sentence 0") and ans.citations
    assert "check" in ans.trace.usage  # the check ran in its reserved time
    assert not any("claim check did not run" in n for n in ans.trace.notes)


SILENCE = 0.2  # seconds a test's silent socket is waited for before the read times out


def test_an_api_that_never_answers_holds_a_question_less_than_45_s(examples_db, stub, monkeypatch):
    """Default settings (45 s deadline, 30 s timeout, 2 retries) but for the first byte's
    timeout, the index loaded by the question itself: each answer attempt waits its first byte
    in vain, and the docs' own quotes come well within the deadline. A silent socket costs each
    attempt its first-byte timeout in real time (the HTTP client's own read timeout, which no
    clock of ours shortens), so the test gives it 0.2 s rather than 5 s, skips the backoffs on
    its clock, and holds the default's 5 s per attempt to the same bound."""
    from bot.app import FieldGuide
    from bot.settings import Settings

    release = threading.Event()
    fake = FakeClaude(down={k: hanging(release) for k in ("classify", "answer", "check")})
    stub.route("/v1/messages", fake)
    for env, value in {
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": stub.url,
        "FIELDGUIDE_DB": examples_db,
        "FIELDGUIDE_FIRST_BYTE_TIMEOUT": str(SILENCE),
    }.items():
        monkeypatch.setenv(env, value)
    settings = Settings.load()
    assert (settings.deadline, settings.timeout, settings.max_retries) == (45.0, 30.0, 2)
    clock = skipping()
    try:
        pipeline = FieldGuide(settings).pipeline
        pipeline.clock = clock
        started = clock.monotonic()
        ans = pipeline.answer(SIGNATURE_Q)
        elapsed = clock.monotonic() - started
    finally:
        release.set()
    assert ans.trace.offline and ans.text.startswith("From the docs:")
    assert any(n.startswith("answer: APITimeoutError") for n in ans.trace.notes)
    attempts = [r for r in stub.calls("/v1/messages") if fake.kind(r.json) == "answer"]
    assert len(attempts) == 1 + settings.max_retries
    assert elapsed + len(attempts) * (FIRST_BYTE - SILENCE) < 45.0  # at the default 5 s


def test_voyage_hanging_after_a_reindex_costs_one_query_timeout(tmp_path, stub):
    """intents.yaml's example questions are embedded by the index run, as queries, and stored;
    the first question on the new generation embeds only itself (one short try) and, Voyage not
    answering, asks no reranker: Voyage costs it the query timeout, + 1 s at most."""
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    stub.route("/v1/embeddings", voyage_embeddings())
    stub.route("/v1/rerank", voyage_rerank())
    # Voyage's socket is silent for real (the HTTP client's own timeout, no clock of ours): the
    # query timeout is as short as a local stand-in's answer allows
    voyage = VoyageEmbedder("k", base_url=stub.url + "/v1", max_retries=4, query_timeout=0.5)
    db = tmp_path / "v.db"
    index_folder(db, docs, voyage)
    examples = [r.json for r in stub.calls("/v1/embeddings") if r.json["input_type"] == "query"]
    assert examples and any("?" in t for r in examples for t in r["input"])
    reranker = VoyageReranker("k", base_url=stub.url + "/v1", timeout=0.5, max_retries=0)
    engine = Engine(str(db), voyage, reranker=reranker)
    engine.loaded()
    page = next(docs.rglob("*.md"))
    page.write_text(page.read_text() + "\n\nOne more line.\n")
    index_folder(db, docs, voyage)  # a reindex while Voyage is up
    release = threading.Event()
    stub.route("/v1/embeddings", voyage_hanging(release))
    stub.route("/v1/rerank", voyage_hanging(release))
    before = len(stub.calls("/v1/embeddings")), len(stub.calls("/v1/rerank"))
    try:
        ans = Pipeline(engine, None, {}).answer("How many times is a failed webhook retried?")
    finally:
        release.set()
    # Voyage is asked once, by the embedding step (the counts below): that step's time is what
    # Voyage cost; the rest is the question's own work on a new generation (loading it), which
    # a busy machine makes slower
    assert ans.trace.timings_ms["embed"] < (0.5 + 1.0) * 1000, str(ans.trace.timings_ms)
    assert any("keyword search only" in n for n in ans.trace.notes) and ans.trace.hits
    after = len(stub.calls("/v1/embeddings")), len(stub.calls("/v1/rerank"))
    assert after == (before[0] + 1, before[1])  # the question alone, once; no rerank


def test_a_planted_attribute_error_in_the_answer_step_is_raised(
    examples_db, local_embedder, stub, monkeypatch
):
    """A typo in our own code (compose.read reading `block.citatons`) fails loudly: it is no API
    failure, and no offline answer hides it."""

    def planted(msg, results, sources):
        return [block.citatons for block in msg.content]  # the typo

    monkeypatch.setattr(compose, "read", planted)
    stub.route("/v1/messages", FakeClaude())
    p = make_pipeline(examples_db, local_embedder, stub)
    with pytest.raises(AttributeError, match="citatons"):
        p.answer(SIGNATURE_Q)


def test_an_overloaded_error_mid_stream_before_any_text_is_retried(
    examples_db, local_embedder, stub
):
    fake = FakeClaude()
    served: list[int] = []

    def first_answer_fails(req):
        if fake.kind(req.json) == "answer" and not served:
            served.append(1)
            return overloaded_mid_stream(req.json)
        return fake(req)

    stub.route("/v1/messages", first_answer_fails)
    shown: list[str] = []
    p = make_pipeline(examples_db, local_embedder, stub, retries=2, clock=skipping())
    ans = p.answer(SIGNATURE_Q, on_text=shown.append)
    assert served and ans.decision == ANSWER and not ans.trace.offline
    assert len(fake.calls("answer")) == 1  # the stand-in's own answer, after the failed stream
    assert "".join(shown).strip() and ans.text.startswith("".join(shown).strip()[:10])


def test_an_error_mid_stream_after_text_was_shown_keeps_it_marked(
    examples_db, local_embedder, stub
):
    fake = FakeClaude(answer=LONG)

    def breaks(req):
        status, body, *rest = fake(req)
        if fake.kind(req.json) == "answer":
            return status, broken_after(body, 3)
        return status, body, *rest

    stub.route("/v1/messages", breaks)
    shown: list[str] = []
    p = make_pipeline(examples_db, local_embedder, stub, retries=2)
    ans = p.answer(SIGNATURE_Q, on_text=shown.append)
    assert len(fake.calls("answer")) == 1  # not asked again: words were out
    assert ans.decision == PARTIAL and "cut short" in ans.caveat and not ans.trace.offline
    assert ans.text.startswith("".join(shown).strip()) and "Sentence 1" not in ans.text


@pytest.mark.parametrize(
    "fault, requests",
    [
        (spend_limited(), 1),  # a spend limit: never retried
        (should_not_retry(OVERLOADED), 1),  # the server says no
        (OVERLOADED, 3),  # retried twice
        (api_error(400, "invalid_request_error", "bad", {"x-should-retry": "true"}), 3),
    ],
    ids=["spend-limit", "x-should-retry-false", "overloaded", "x-should-retry-true"],
)
def test_retries_follow_the_error_and_the_server(stub, fault, requests):
    stub.route("/v1/messages", fault)
    client = anthropic.Anthropic(api_key="k", base_url=stub.url, max_retries=2, timeout=5.0)
    claude = Claude(client, 30.0, skipping())
    with pytest.raises(anthropic.APIStatusError):
        claude.call(
            "x",
            lambda c: c.messages.create(
                model="claude-haiku-5-5", max_tokens=8, messages=[{"role": "user", "content": "q"}]
            ),
        )
    assert len(stub.calls("/v1/messages")) == requests
