"""Against the Messages API stub with the real anthropic client: citations checked by content,
the claim check after the answer, and prompt caching."""

import html
import json
import re
import time
from types import SimpleNamespace

import pytest

from router import citations, claims
from router.answer import ANSWER, PARTIAL, Citation, Source
from tests.standins.claude import (
    OVERLOADED,
    FakeClaude,
    estimate_tokens,
    min_cacheable,
    prompt_parts,
)
from tests.standins.server import Request
from tests.test_pipeline import SIGNATURE_Q, make_pipeline

ROTATE_Q = "How often should I rotate API keys?"


def test_a_citation_in_the_right_place_with_a_fabricated_text_is_unverified(
    examples_db, local_embedder, stub
):
    fabricated = {
        "type": "search_result_location",
        "source": "x",
        "title": "x",
        "cited_text": "Tidewater never signs webhooks.",
        "search_result_index": 0,
        "start_block_index": 0,
        "end_block_index": 1,
    }
    reply = [("Check the header.", [(0, 0, 1)]), (" Or not at all.", [fabricated])]
    stub.route("/v1/messages", FakeClaude(answer=reply))
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    good, cit = ans.citations
    assert good.verified
    assert not cit.verified and cit.cited_text == "Tidewater never signs webhooks."
    assert ans.decision == PARTIAL and ans.text == "Check the header.[1] Or not at all."


def test_cited_text_is_compared_whitespace_aside(examples_db, local_embedder, stub):
    fake = FakeClaude(answer=[("Check the header.", [(0, 0, 1)])])
    real = fake.citation

    def respaced(results, index, start, end):  # the same text with its spacing changed
        cit = real(results, index, start, end)
        return cit | {"cited_text": "  " + "\n".join(cit["cited_text"].split()) + " "}

    fake.citation = respaced  # type: ignore[method-assign]
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert [c.verified for c in ans.citations] == [True] and ans.decision == ANSWER


def test_an_unsupported_sentence_turns_answer_into_partial_naming_it(
    examples_db, local_embedder, stub
):
    reply = [
        ("Compare the signature header with your own HMAC.", [(0, 0, 1)]),
        (" Signatures expire after 90 days.", [(0, 0, 1)]),
    ]
    fake = FakeClaude(answer=reply, unsupported=("90 days",))
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == PARTIAL
    assert "“Signatures expire after 90 days.”" in ans.caveat
    assert "HMAC" not in ans.caveat  # the supported sentence is not named
    assert "claim check (claude): 1 of 2 sentences not supported" in ans.trace.notes[-1]
    # written again naming it, the same sentence comes back: the first answer stands
    assert "its check found 1: the first answer stands" in " ".join(ans.trace.notes)
    # the check: after the answer, a structured output, each sentence with the passages it cites
    check, _ = fake.calls("check")
    assert fake.seen.index(check) > fake.seen.index(fake.calls("answer")[0])
    assert "tool_choice" not in check and check["output_config"]["format"]["type"] == "json_schema"
    sent = check["messages"][0]["content"]
    assert sent.count('cites="P1"') == 2 and ans.passages[0].text.split()[0] in sent
    # each passage named by its page's title and headings, as the answer's search results are
    assert f'<passage id="P1" section="{html.escape(ans.sources[0].label)}">' in sent
    assert ans.trace.usage["check"]["output_tokens"] > 0


@pytest.mark.parametrize("says", ["supported", "unsupported"])
def test_a_factual_sentence_with_nothing_cited_before_it_is_unsupported(
    examples_db, local_embedder, stub, says
):
    reply = ["Keys last 90 days. ", ("Compare the signature header.", [(0, 0, 1)])]
    stub.route("/v1/messages", FakeClaude(answer=reply, uncited=says))
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    # a model calling it supported is overruled: a sentence citing nothing has no support
    assert ans.decision == PARTIAL and "“Keys last 90 days.”" in ans.caveat


@pytest.mark.parametrize("unsupported", [(), ("So compare",)])
def test_an_uncited_sentence_is_checked_against_what_the_one_before_cites(
    examples_db, local_embedder, stub, unsupported
):
    """ "So …" drawn from the cited sentence before it, or the example a cited sentence
    introduces, cites nothing itself: it is judged against what that sentence cites."""
    reply = [("Compare the signature header.", [(0, 0, 1)]), " So compare it on every request."]
    fake = FakeClaude(answer=reply, unsupported=unsupported)
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    check = fake.calls("check")[0]
    assert check["messages"][0]["content"].count('cites="P1"') == 2
    assert ans.decision == (PARTIAL if unsupported else ANSWER)


def test_a_sentence_stating_nothing_passes(examples_db, local_embedder, stub):
    reply = ["Here is how:\n\n", ("Compare the signature header.", [(0, 0, 1)])]
    stub.route("/v1/messages", FakeClaude(answer=reply))  # uncited lead-in: no_claim
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == ANSWER and not ans.caveat


def test_a_part_the_docs_do_not_cover_is_partial_in_any_language(examples_db, local_embedder, stub):
    """The claim check reads which sentence says the docs do not cover something, whatever the
    language the answer is written in: such an answer is never a plain ANSWER."""
    reply = [("比较签名标头。", [(0, 0, 1)]), " 文档没有涉及 Oracle。"]
    stub.route("/v1/messages", FakeClaude(answer=reply, not_covered=("Oracle",)))
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == PARTIAL
    assert ans.caveat == "Partial answer: the docs cover only part of this question."


def test_a_sentence_stated_by_another_passage_sent_is_cited_there(
    examples_db, local_embedder, stub
):
    """The check reads every passage the answer was sent: a sentence citing the wrong one but
    stated by another is cited where the docs state it, not called unsupported."""
    reply = [("Respond with a 400 when verification fails.", [(0, 0, 1)])]
    fake = FakeClaude(answer=reply, elsewhere={"Respond with a 400": "we suggest 400"})
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    [check] = fake.calls("check")
    sent = check["messages"][0]["content"]
    assert sent.index('id="P1"') < sent.index("we suggest 400")  # the cited passage first
    assert ans.decision == ANSWER and not ans.caveat
    moved = [c for c in ans.citations if "we suggest 400" in c.cited_text]
    assert [c.verified for c in moved] == [True]
    assert ans.text.endswith(f"[1][{moved[0].source}]")
    assert moved[0].source in [s.n for s in ans.sources]
    assert any("we suggest 400" in p.text for p in ans.passages)
    assert "1 sentence cited where the docs state them" in " ".join(ans.trace.notes)


def test_a_sentence_cited_where_the_docs_state_it_carries_the_mark(
    examples_db, local_embedder, stub
):
    """The mark of a passage the check cites a sentence to follows that sentence, not the last
    sentence of its block."""
    reply = [("Respond with a 400 when verification fails. Then retry later.", [(0, 0, 1)])]
    fake = FakeClaude(answer=reply, elsewhere={"Respond with a 400": "we suggest 400"})
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    [moved] = [c for c in ans.citations if "we suggest 400" in c.cited_text]
    assert ans.text == (
        f"Respond with a 400 when verification fails.[{moved.source}] Then retry later.[1]"
    )


def test_supported_elsewhere_naming_no_passage_sent_is_unsupported(
    examples_db, local_embedder, stub
):
    reply = [("Respond with a 418 when verification fails.", [(0, 0, 1)])]
    fake = FakeClaude(answer=reply, elsewhere={"418": "a text no passage holds"})
    stub.route("/v1/messages", fake)
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == PARTIAL and "“Respond with a 418" in ans.caveat
    assert len(ans.citations) == 1


def test_the_check_lists_what_else_was_sent_once():
    """After the cited passages, each other block sent, unless a cited passage holds it."""
    cited = Citation(1, "d", "A", "u", "Alpha beta.", True, ("Alpha beta.", "Gamma."))
    others = [
        Citation(1, "d", "A", "u", "Gamma.", True, ("Gamma.",)),
        Citation(2, "e", "B", "v", "Delta.", True, ("Delta.",)),
    ]
    items = claims.sentences([("Alpha.", [cited])])
    asked = claims.request(items, claims.numbered(items, others))
    got = re.findall(r'<passage id="(P\d)" section="(\w)">(.*?)</passage>', asked, re.S)
    assert got == [("P1", "A", "Alpha beta.\n\nGamma."), ("P2", "B", "Delta.")]


def failing_check(fake: FakeClaude, result):
    def handler(req: Request):
        if fake.kind(req.json) == "check":
            return result() if callable(result) else result
        return fake(req)

    return handler


NOT_CHECKED = "Partial answer: its claims were not checked against the docs it cites"


def test_a_check_that_fails_marks_the_answer_not_checked(examples_db, local_embedder, stub):
    """Fail closed: an answer whose claims could not be
    checked is never a plain ANSWER; the caveat says so where the user sees it."""
    fake = FakeClaude(unsupported=("header",))
    stub.route("/v1/messages", failing_check(fake, OVERLOADED))
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == PARTIAL and ans.caveat.startswith(NOT_CHECKED)
    assert not ans.trace.offline and "check" not in ans.trace.usage
    assert "the claim check did not run (OverloadedError)" in ans.trace.notes


def test_a_check_past_the_deadline_marks_the_answer_not_checked(examples_db, local_embedder, stub):
    fake = FakeClaude()

    # real time: the check's own socket read times out when the deadline comes (a call's timeout
    # is the time left), which no clock of ours can stand in for
    def slow():
        time.sleep(4)
        return 200, {}

    stub.route("/v1/messages", failing_check(fake, slow))
    p = make_pipeline(examples_db, local_embedder, stub)
    p.deadline = 2.5
    p.engine.loaded(), p.engine.embed_query("warm up")
    started = time.perf_counter()
    ans = p.answer(SIGNATURE_Q)
    assert time.perf_counter() - started < 2.5 + 1.0
    assert ans.decision == PARTIAL and ans.caveat.startswith(NOT_CHECKED)
    assert not ans.trace.offline
    assert any(n.startswith("the claim check did not run (") for n in ans.trace.notes)


def test_an_unusable_check_marks_the_answer_not_checked(examples_db, local_embedder, stub):
    from tests.standins.claude import structured_message

    fake = FakeClaude()
    reply = structured_message({"sentences": []})
    stub.route("/v1/messages", failing_check(fake, (200, reply)))
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.decision == PARTIAL and ans.caveat.startswith(NOT_CHECKED)
    assert any("did not run (unusable reply" in n for n in ans.trace.notes)


def test_offline_the_quotes_are_their_own_support(examples_db, local_embedder):
    ans = make_pipeline(examples_db, local_embedder).answer(SIGNATURE_Q)
    assert ans.decision == ANSWER and not any("claim check" in n for n in ans.trace.notes)
    quotes = [Citation(1, "d", "s", "u", "found", True), Citation(1, "d", "s", "u", "not", False)]
    checked = claims.offline(quotes)
    assert checked.ran and checked.unsupported == ["not"]
    decision, caveat, note = claims.judged(ANSWER, "", checked)
    assert decision == PARTIAL and "“not”" in caveat and "1 of 2 sentences" in note


def test_sentences_keep_code_blocks_whole_and_split_lines():
    cit = Citation(1, "d", "s", "u", "passage", True)
    text = (
        "Run this:\n```sh\nfoo --bar. Baz\n```\n- First. Second e.g. this.\n- v1.2 is out\n"
        "Pick a form (e.g. `COPY t TO`: it writes). Or i.e. This one."
    )
    got = [(s.text, s.passages) for s in claims.sentences([(text, [cit])])]
    assert [t for t, _ in got] == [
        "Run this:",
        "```sh\nfoo --bar. Baz\n```",
        "First.",
        "Second e.g. this.",
        "v1.2 is out",
        "Pick a form (e.g. `COPY t TO`: it writes).",
        "Or i.e. This one.",
    ]
    assert all(p == {("s", "passage"): cit} for _, p in got)


def test_the_check_reads_a_citation_with_the_blocks_either_side():
    """What "it" names is the block before; the example a cited sentence introduces ("pin it
    with:") is the block after: the check reads both with it."""
    blocks = ["FastAPI 0.112.", "Pin the version with:", "```txt\nfastapi==0.112.0\n```", "Or not."]
    results = [{"content": [{"type": "text", "text": b} for b in blocks]}]
    source = Source(1, "c1", "d.md", "Versions", ["Pin"], "u")
    cit = SimpleNamespace(
        type="search_result_location",
        search_result_index=0,
        start_block_index=1,
        end_block_index=2,
        cited_text=blocks[1],
    )
    got = citations.check(cit, results, [source])
    assert got is not None and got.verified and got.around == tuple(blocks[:3])
    reply = [("Pin it:", [got]), ("\n```txt\nfastapi==0.112.0\n```", [])]
    items = claims.sentences(reply)
    asked = claims.request(items, claims.numbered(items))
    assert ">" + "\n\n".join(blocks[:3]) + "</passage>" in asked
    assert asked.count('cites="P1"') == 2  # the example cites nothing: it is read as its lead's


def test_the_check_reads_a_tasted_section_whole(examples_db, local_embedder, stub):
    """What was sent of a section may be a taste; the citation names the section, and the check
    reads the section as the docs write it."""
    from router import context
    from tests.test_claude_reading import pipeline

    fake = FakeClaude(answer=[("Roll it.", [(3, 0, 1)])])
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=0)
    pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    [answer], [check] = fake.calls("answer"), fake.calls("check")
    tasted = answer["messages"][0]["content"][3]
    sent = "\n\n".join(b["text"] for b in tasted["content"])
    passage = re.findall(
        r'<passage id="P1"[^>]*>(.*?)</passage>', check["messages"][0]["content"], re.S
    )[0]
    assert sent in html.unescape(passage) and len(passage) > len(sent) + 100


def test_the_check_reads_each_passage_with_its_section():
    """A passage's heading says what it is about ("You can disable it" under "Swagger UI")."""
    cit = Citation(1, "d", "Metadata › Docs URLs", "u", "You can disable it.", True)
    items = claims.sentences([("Disable Swagger UI with docs_url.", [cit])])
    asked = claims.request(items, claims.numbered(items))
    assert '<passage id="P1" section="Metadata › Docs URLs">You can disable it.</passage>' in asked


# -- prompt caching ------------------------------------------------------------------------------


def cached_prefix(body: dict, first: bool = False) -> list:
    """The request's prompt up to its last (or `first`) cache_control breakpoint."""
    parts = prompt_parts(body)
    ends = [i for i, (_, breakpoint) in enumerate(parts) if breakpoint]
    end = ends[0] if first else ends[-1]
    return [p for p, _ in parts[: end + 1]]


MODELS_55 = {
    "classify": "claude-haiku-5-5",
    "condense": "claude-haiku-5-5",
    "answer": "claude-sonnet-5-5",
    "check": "claude-haiku-5-5",
}


def test_a_prefix_is_marked_for_caching_only_where_it_reaches_the_minimum(
    examples_db, local_embedder, stub
):
    """A cache_control marker on a prefix shorter than the model's minimum caches nothing: the
    classifier's taxonomy prompt (~1,250 tokens) and the answer's rules pass the 5.5 models' 512
    and are marked, the same prefix for every question (the answer's turn that a second look
    sends again is marked too); the check's shorter prompt carries none."""
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    p = make_pipeline(examples_db, local_embedder, stub, models=MODELS_55)
    p.answer(SIGNATURE_Q)
    second = p.answer(ROTATE_Q)
    first_call, second_call = fake.calls("classify")
    assert first_call != second_call  # the questions differ, their cached prefixes do not
    assert cached_prefix(first_call) == cached_prefix(second_call) != []
    prefix = json.dumps(cached_prefix(first_call))
    assert SIGNATURE_Q not in prefix and ROTATE_Q not in prefix
    assert second.trace.usage["classify"]["cache_read_input_tokens"] > 500
    first_answer, second_answer = fake.calls("answer")[:1] + fake.calls("answer")[-1:]
    rules = cached_prefix(first_answer, first=True)
    assert rules == cached_prefix(second_answer, first=True) != []
    assert SIGNATURE_Q not in json.dumps(rules)
    assert ROTATE_Q in json.dumps(cached_prefix(second_answer)[-1])
    for body in fake.calls("check"):
        assert not any(flag for _, flag in prompt_parts(body))


def long_request(model: str, system_tokens: int, question: str) -> dict:
    text = "Rules for the assistant. " * round(system_tokens * 3.5 / 25)
    return {
        "model": model,
        "max_tokens": 10,
        "system": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": question}],
    }


def bill(fake: FakeClaude, body: dict) -> dict:
    return fake.bill(body, fake.condense(body))


def test_the_stub_bills_cache_writes_and_reads_as_the_api_does():
    fake = FakeClaude()
    body = long_request("claude-sonnet-4-6", 1500, "first question")
    total = sum(estimate_tokens(p) for p, _ in prompt_parts(body))
    first = bill(fake, body)
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 1024
    assert first["input_tokens"] + first["cache_creation_input_tokens"] == total
    second = bill(fake, long_request("claude-sonnet-4-6", 1500, "another question"))
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0 and second["input_tokens"] < 20
    # the cache is per model; below a model's minimum nothing is cached (Haiku 4.5: 4,096)
    assert min_cacheable("claude-haiku-4-5") == 4096 and min_cacheable("claude-sonnet-4-6") == 1024
    haiku = bill(fake, long_request("claude-haiku-4-5", 1500, "first question"))
    assert haiku["cache_creation_input_tokens"] == haiku["cache_read_input_tokens"] == 0
    assert haiku["input_tokens"] == total
    # without caching every prompt is billed in full
    off = FakeClaude(cache=False)
    bill(off, body)
    assert bill(off, body)["input_tokens"] == total


def test_the_stub_refuses_more_than_four_breakpoints(stub):
    import anthropic

    stub.route("/v1/messages", FakeClaude())
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
    block = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=10,
            system=[block] * 5,  # type: ignore[list-item]
            messages=[{"role": "user", "content": "hi"}],
        )


# -- judged eval ---------------------------------------------------------------------------------


def test_eval_answers_judged_by_claude_with_intervals(
    tmp_path, capsys, examples_db, stub, monkeypatch
):
    from bot.cli import main
    from tests.conftest import ROOT

    grades = [
        {"faithfulness": "faithful", "correctness": "correct", "reason": "r"},
        {"faithfulness": "partly_faithful", "correctness": "incorrect", "reason": "r"},
        {"faithfulness": "faithful", "correctness": "partly_correct", "reason": "r"},
    ]
    fake = FakeClaude(judgement=grades)
    judged = 0

    def handler(req: Request):
        nonlocal judged
        if fake.kind(req.json) == "judge":
            judged += 1
            if judged == 4:  # one grade the judge fails to give
                return OVERLOADED
        return fake(req)

    stub.route("/v1/messages", handler)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
    monkeypatch.setenv("FIELDGUIDE_MAX_RETRIES", "0")
    off = tmp_path / "off.jsonl"
    off.write_text(json.dumps({"id": "o1", "question": "What is the capital of Australia?"}) + "\n")
    out = tmp_path / "answers.json"
    argv = ["eval", str(ROOT / "examples"), "--answers", "--judge", "--db", examples_db]
    argv += ["--limit", "5", "--offtopic", str(off), "--output", str(out)]
    assert main([*argv, "--judge-model", "claude-opus-4-6"]) == 0
    printed = capsys.readouterr().out
    assert "judged faithfulness" in printed and "judged correctness" in printed
    result = json.loads(out.read_text())
    s = result["summary"]
    assert s["judge_model"] == "claude-opus-4-6" and s["judge_failed"] == 1
    answered = [a for a in result["answers"] if a["decision"] != "ABSTAIN"]
    assert s["judge_faithfulness"]["n"] == len(answered) - 1
    for key in ("judge_faithfulness", "judge_correctness"):
        lo, hi = s[key]["ci95"]
        assert lo <= s[key]["value"] <= hi and lo < hi  # grades differ: a real interval
    calls = fake.calls("judge")
    assert {c["model"] for c in calls} == {"claude-opus-4-6"}
    first = calls[0]
    assert "tool_choice" not in first and first["output_config"]["format"]["type"] == "json_schema"
    item = next(a for a in answered if "error" not in a["judge"])
    question = next(
        json.loads(line)
        for line in (ROOT / "examples" / "questions.jsonl").open()
        if json.loads(line)["id"] == item["id"]
    )
    sent = next(c for c in calls if item["question"] in c["messages"][0]["content"])
    text = sent["messages"][0]["content"]
    assert question["answer"][:40] in text.replace("&amp;", "&")  # the reference answer
    assert "<cited_passages>" in text and "(the answer cites no passage)" not in text
    # the judge's model from the settings; no key, no judge
    monkeypatch.setenv("FIELDGUIDE_JUDGE_MODEL", "claude-sonnet-4-6")
    fake.seen.clear()
    assert main([*argv, "--limit", "1"]) == 0
    assert {c["model"] for c in fake.calls("judge")} == {"claude-sonnet-4-6"}
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    capsys.readouterr()
    assert main(argv) == 2
    assert "--judge needs ANTHROPIC_API_KEY" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, said",
    [
        # a list item's marker ("1.") is markup, not a claim: the check reads what the item says
        (
            "Steps:\n1. Install it. Then run it.\n2) Run `uv sync`.\n- A bullet.\n-5 is cold.",
            ["Steps:", "Install it.", "Then run it.", "Run `uv sync`.", "A bullet.", "-5 is cold."],
        ),
        # inline code is never cut ("`FOREIGN KEY ...`"), nor read as a code block of its own
        (
            "Clauses (`FOREIGN KEY ...` `ON DELETE CASCADE`) fail. Use the ```HostSNI(`*`)``` form."
            "\n```sh\nrun. It\n```",
            [
                "Clauses (`FOREIGN KEY ...` `ON DELETE CASCADE`) fail.",
                "Use the ```HostSNI(`*`)``` form.",
                "```sh\nrun. It\n```",
            ],
        ),
    ],
)
def test_the_check_reads_what_each_sentence_says(text, said):
    cited = Citation(1, "d", "A", "u", "Alpha beta.", True)
    assert [s.text for s in claims.sentences([(text, [cited])])] == said
