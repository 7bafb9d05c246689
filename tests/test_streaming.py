"""The streaming contract: Pipeline.answer(..., on_text=) against the stub's server-sent events."""

import time

import pytest

from router.answer import ABSTAIN, ANSWER
from router.streamed import Holdback
from tests.standins.claude import FakeClaude
from tests.test_pipeline import SIGNATURE_Q, make_pipeline


def final(ans) -> dict:
    out = ans.to_json()
    for key in ("timings_ms", "usage"):
        out.pop(key)
    return out


def test_text_streams_as_it_arrives_and_the_answer_is_the_same(examples_db, local_embedder, stub):
    reply: list = [
        ("Send the header [docs](https://x.example) with each request.", [(0, 0, 1)]),
        " Done.",
    ]
    stub.route("/v1/messages", FakeClaude(answer=reply, words_per_second=40))
    pipeline = make_pipeline(examples_db, local_embedder, stub)
    plain = pipeline.answer(SIGNATURE_Q)
    pieces: list[tuple[float, str]] = []
    streamed = pipeline.answer(SIGNATURE_Q, on_text=lambda d: pieces.append((time.monotonic(), d)))
    done = time.monotonic()
    assert final(streamed) == final(plain) and streamed.decision == ANSWER
    # the model's words, as written, in order, each block's [n] marks at the end of its words
    # (the checked text drops the link too)
    assert "".join(d for _, d in pieces) == (
        "Send the header [docs](https://x.example) with each request.[1] Done."
    )
    assert len(pieces) == 9 and pieces[0][0] < done - 0.1  # the first words came well before
    assert streamed.text == "Send the header docs with each request.[1] Done."


@pytest.mark.parametrize("reply", [["NOT_IN_DOCS"], [" NOT_IN_DOCS\n"], []])
def test_nothing_is_streamed_for_an_abstention(examples_db, local_embedder, stub, reply):
    stub.route("/v1/messages", FakeClaude(answer=reply))
    pieces: list[str] = []
    ans = make_pipeline(examples_db, local_embedder, stub).answer(
        SIGNATURE_Q, on_text=pieces.append
    )
    assert ans.decision == ABSTAIN and pieces == []


def test_nothing_is_streamed_offline(examples_db, local_embedder):
    pieces: list[str] = []
    ans = make_pipeline(examples_db, local_embedder).answer(SIGNATURE_Q, on_text=pieces.append)
    assert ans.trace.offline and ans.text and pieces == []


def test_first_words_are_held_until_they_cannot_be_not_in_docs():
    out: list[str] = []
    hold = Holdback(out.append)
    for piece in ["NOT", "_IN", "_DOCS"]:
        hold(piece)
    assert out == []
    hold = Holdback(out.append)
    hold.cite()
    for piece in [" ", "NOT", " all", " of", " it"]:
        hold(piece)
    assert out == ["NOT all", " of", " it"]


def test_nothing_is_passed_on_before_a_citation_checks_out():
    """An answer that cites nothing is never shown: its words wait for a verified citation."""
    out: list[str] = []
    hold = Holdback(out.append)
    for piece in ["Here", " is", " how:"]:
        hold(piece)
    assert out == []
    hold.cite()
    hold(" verify")
    assert out == ["Here is how:", " verify"]


# -- what the path is doing (on_progress) ----------------------------------------------------------


def test_progress_comes_before_the_words_and_names_the_sections_read(
    examples_db, local_embedder, stub
):
    reply: list = [("Compare the signature header with your HMAC.", [(0, 0, 1)])]
    stub.route("/v1/messages", FakeClaude(answer=reply, words_per_second=400))
    seen: list = []
    ans = make_pipeline(examples_db, local_embedder, stub).answer(
        SIGNATURE_Q, on_text=lambda d: seen.append(("text", d)), on_progress=seen.append
    )
    kinds = [s[0] if isinstance(s, tuple) else s.kind for s in seen]
    assert kinds[:2] == ["searching", "reading"] and kinds[-1] == "checking"
    assert kinds.index("text") > kinds.index("reading")  # the reading is shown first
    [reading] = [s for s in seen if not isinstance(s, tuple) and s.kind == "reading"]
    # the sections sent to Claude, by "Title › Section", once each
    read = ans.trace.route["read"]
    assert reading.labels and reading.labels == [r["section"] for r in read]
    assert len(reading.labels) == len(set(reading.labels))


def test_marks_stream_where_the_answer_shows_them():
    """A block's marks come when it ends: on its words, before the blank line after them; on the
    line after code that ends it; none inside code still open. Words that run on from a closing
    fence start a paragraph."""
    out: list[str] = []
    hold = Holdback(out.append)
    hold.cite()
    for text, marks in [
        ("Set it:\n\n", [1]),
        ("```toml\nx = 1\n```", [2]),
        (" Then run it.", [3]),
        ("\n```sh\nrun", [4]),
        ("\n```", []),
    ]:
        hold.block()
        for n in marks:
            hold.cite(n)
        hold(text[:3])  # as deltas arrive: a few characters, then the rest
        hold(text[3:])
        hold.end()
    assert "".join(out) == (
        "Set it:[1]\n\n```toml\nx = 1\n```\n[2]\n\nThen run it.[3]\n```sh\nrun\n```"
    )
