"""An answer whose claim check finds unsupported sentences is written again once with them named
(router/review.py): the rewrite stands when its check finds fewer, else the first answer stands
with its caveat; it is asked for only with time left for it, and never streamed."""

from router import context
from router.answer import ANSWER, PARTIAL
from tests.standins.claude import OVERLOADED, FakeClaude
from tests.standins.clock import skipping
from tests.test_claude_reading import pipeline
from tests.test_pipeline import SIGNATURE_Q, make_pipeline

FIRST = [
    ("Compare the signature header with your own HMAC.", [(0, 0, 1)]),
    (" Signatures expire after 90 days.", [(0, 0, 1)]),
]
REWRITE = [("Compare the signature header with your own HMAC.", [(0, 0, 1)])]


def test_a_rewrite_without_the_unsupported_sentence_stands(examples_db, local_embedder, stub):
    fake = FakeClaude(answer=FIRST, unsupported=("90 days",), rewrite=REWRITE)
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=1)
    shown: list[str] = []
    p = pipeline(examples_db, local_embedder, stub, budget)
    ans = p.answer(SIGNATURE_Q, on_text=shown.append)
    assert fake.refused == []  # every request was one the API takes
    assert ans.decision == ANSWER and not ans.caveat
    assert ans.text == "Compare the signature header with your own HMAC.[1]"
    assert "90 days" in "".join(shown)  # the first answer was streamed; the rewrite replaces it
    first, again = fake.calls("answer")
    # the same conversation, the first answer as the assistant's turn, then the sentence named
    assert again["messages"][: len(first["messages"])] == first["messages"]
    reply, ask = again["messages"][-2:]
    assert reply["role"] == "assistant" and "90 days" in reply["content"][-1]["text"]
    [named] = ask["content"]
    assert "<sentence>Signatures expire after 90 days.</sentence>" in named["text"]
    assert again["tools"] == first["tools"] and again["tool_choice"] == {"type": "none"}
    # the rewrite is checked as the first answer was
    _, recheck = fake.calls("check")
    assert "90 days" not in recheck["messages"][0]["content"]
    assert "its check found 0" in " ".join(ans.trace.notes)
    assert ans.trace.route["rewritten"] == {"unsupported": 1, "after": 0, "stood": True}
    # both answer requests are billed to the answer (and both checks to the check)
    fake = FakeClaude(answer=FIRST)
    stub.route("/v1/messages", fake)
    once = p.answer(SIGNATURE_Q).trace.usage
    for step in ("answer", "check"):
        prompt = lambda u: u["input_tokens"] + u["cache_read_input_tokens"]  # noqa: E731
        assert prompt(ans.trace.usage[step]) > 1.5 * prompt(once[step])


def test_a_rewrite_that_is_no_better_leaves_the_first_answer(examples_db, local_embedder, stub):
    worse = [(" Signatures expire after 90 days, or 30.", [(0, 0, 1)]), *FIRST]
    for rewrite in (worse, ["NOT_IN_DOCS"]):
        fake = FakeClaude(answer=FIRST, unsupported=("90 days",), rewrite=rewrite)
        stub.route("/v1/messages", fake)
        ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
        assert ans.decision == PARTIAL and "“Signatures expire after 90 days.”" in ans.caveat
        assert "HMAC" in ans.text and "30" not in ans.text
        assert len(fake.calls("answer")) == 2
        assert ans.trace.route["rewritten"]["stood"] is False


def test_a_failed_rewrite_leaves_the_first_answer(examples_db, local_embedder, stub):
    fake = FakeClaude(answer=FIRST, unsupported=("90 days",), rewrite=REWRITE)
    stub.route("/v1/messages", fake)

    def shown(piece: str) -> None:  # the first answer is out: the next answer request fails
        fake.faults_for["answer"] = [OVERLOADED]

    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q, on_text=shown)
    assert ans.decision == PARTIAL and "90 days" in ans.text
    assert any("did not stand (OverloadedError)" in n for n in ans.trace.notes)
    assert ans.trace.route["rewritten"] == {"unsupported": 1, "after": None, "stood": False}
    assert len(fake.calls("check")) == 1


def test_no_rewrite_without_time_for_it(examples_db, local_embedder, stub):
    """A 12 s deadline, an answer taking ~5 s to its first word: after it and its check, less
    than another answer's time and the check's reserve (4 s) is left, so the first one stands."""
    clock = skipping()
    fake = FakeClaude(
        answer=FIRST, unsupported=("90 days",), rewrite=REWRITE, first_token=5.0, clock=clock
    )
    stub.route("/v1/messages", fake)
    p = make_pipeline(examples_db, local_embedder, stub, timeout=30.0, clock=clock)
    p.deadline = 12.0
    ans = p.answer(SIGNATURE_Q)
    assert ans.decision == PARTIAL and len(fake.calls("answer")) == 1
    p.deadline = 30.0  # time for it: the rewrite stands
    assert p.answer(SIGNATURE_Q).decision == ANSWER and len(fake.calls("answer")) == 3


def test_a_whole_answer_is_not_asked_again(examples_db, local_embedder, stub):
    fake = FakeClaude(answer=REWRITE, rewrite=FIRST)
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == ANSWER and len(fake.calls("answer")) == 1
    assert "rewritten" not in ans.trace.route
