"""Answer-level behaviour: the offline decision (names the docs never mention, other languages),
clean offline answers, and `fieldguide eval --answers`."""

import json

from bot.cli import main
from bot.evaluation.answers import content_words, load_stopwords, token_scores
from index.indexer import index_folder
from router.answer import ABSTAIN, ANSWER, PARTIAL, occurs_in
from router.engine import Engine
from router.pipeline import Pipeline
from router.units import furniture, repeats_itself
from tests.conftest import ROOT, write_docs


def offline_pipeline(db: str, embedder) -> Pipeline:
    return Pipeline(Engine(db, embedder))


CLEAN_DOC = """---
title: TV manual
intent: tv
---
# TV manual

## Sound

### Equalizer

The equalizer adjusts the balance of bass and treble for each sound mode.
To change it, open
Settings
>
Sound
>
Equalizer
and move the sliders.

- 37 -

SoundPicturexlinkedin Equalizer Sound modes SoundPicture xlinkedin Equalizer Sound modes

### Troubleshooting

| Problem | Solution |
|---|---|
| No picture | Check that the power cable is plugged in. |
| Sound is distorted | Lower the volume or reset the equalizer in the Sound menu. |
| Remote does not work | Replace the batteries of the remote. |

## Picture

The equalizer adjusts the balance of bass and treble for each sound mode.
"""


def test_offline_answers_quote_the_few_lines_that_answer_cleanly(tmp_path, local_embedder):
    docs = write_docs(tmp_path / "docs", {"tv.md": CLEAN_DOC})
    db = tmp_path / "tv.db"
    index_folder(db, docs, local_embedder)
    p = offline_pipeline(str(db), local_embedder)

    ans = p.answer("How do I change the equalizer?")
    assert ans.decision in (ANSWER, PARTIAL)
    # the menu path written one word per line comes out on one line
    assert "open Settings > Sound > Equalizer and move the sliders." in ans.text
    assert "- 37 -" not in ans.text  # page furniture is never quoted
    assert "xlinkedin" not in ans.text  # nor a scraped menu that says itself twice
    # the paragraph repeated in a sibling section is quoted once
    assert ans.text.count("balance of bass and treble") <= 1
    # the attribution names the section once
    assert "\n— Equalizer [1]" in ans.text and "›" not in ans.text
    chunk_text = {h["id"]: h["text"] for h in ans.trace.hits}
    for c in ans.citations:
        assert c.verified and any(occurs_in(c.cited_text, t) for t in chunk_text.values())

    ans = p.answer("The sound is distorted, what can I do?")
    # the row that answers, with its table header; a table this small is quoted whole, so no
    # row is left out without a mark
    assert "| Problem | Solution |" in ans.text
    assert "| Sound is distorted | Lower the volume" in ans.text
    assert "| Remote does not work |" in ans.text
    assert all(c.verified for c in ans.citations)


def test_a_small_table_whose_rows_answer_alike_is_quoted_whole(examples_db, local_embedder):
    ans = offline_pipeline(examples_db, local_embedder).answer(
        "what ip addresses do webhooks come from"
    )
    # both regions' addresses, under the table's header, not just the one that scored first
    assert "| Region | Egress IP addresses |" in ans.text
    assert "| US (default) | `203.0.113.10`" in ans.text and "| EU | `198.51.100.20`" in ans.text


def test_a_scraped_menu_is_furniture_a_sentence_naming_a_thing_twice_is_not():
    assert furniture("ErrorsClient SDKsxlinkedin ErrorsClient SDKs xlinkedin About our limits")
    # code tabs flattened into prose: the same command once per tab
    assert furniture('pip install -U "anthropic[bedrock]" ' * 3 + "Python Python")
    assert not furniture(
        "Make a copy of our Claude for Sheets workbook template to get started with your own"
        " Claude for Sheets work!"
    )
    # a product name said in every clause is no menu
    assert not repeats_itself(
        "Red Hat OpenShift Container Platform supports Fibre Channel, so Red Hat OpenShift"
        " Container Platform clusters can use Fibre Channel volumes on Red Hat hardware"
    )


def test_token_scores_follow_the_eval_readme():
    stop = load_stopwords()  # the shipped copy of shared/eval/stopwords.txt
    assert content_words("The API key is rotated: rotate it, rotate it!", stop) == [
        "api",
        "key",
        "rotated",
        "rotate",
        "rotate",
    ]
    reference = "Rotate the API key, then rotate again"
    recall, precision = token_scores("rotate the key", reference, stop)
    # reference tokens rotate, api, key, rotate ("then", "again" are stopwords): 3 of 4 are in
    # the answer; the answer's rotate, key: 2 of 2 are in the reference
    assert (recall, precision) == (0.75, 1.0)


def test_eval_answers_writes_the_summary_and_every_answer(tmp_path, capsys, examples_db):
    off = tmp_path / "off.jsonl"
    off.write_text(
        json.dumps({"id": "o1", "question": "What is the capital city of Australia?"}) + "\n"
    )
    out = tmp_path / "answers.json"
    code = main(
        [
            "eval",
            str(ROOT / "examples"),
            "--answers",
            "--db",
            examples_db,
            "--limit",
            "3",
            "--offtopic",
            str(off),
            "--output",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "answerable refused" in printed and "off-topic given a plain ANSWER" in printed
    result = json.loads(out.read_text())
    assert set(result) == {"summary", "answers", "offtopic"}
    s = result["summary"]
    # the examples keep 5 off-topic questions in questions.jsonl itself
    assert s["questions"] == 3 and s["offtopic_questions"] == 6 and s["sampled"]
    for key in ("abstain", "partial", "token_recall", "token_precision", "offtopic_abstain"):
        assert set(s[key]) == {"value", "ci95", "n"}
        lo, hi = s[key]["ci95"]
        assert lo <= s[key]["value"] <= hi
    assert s["offtopic_abstain"]["value"] >= 0.8
    item = result["answers"][0]
    assert {"id", "question", "decision", "text", "sources", "citations", "timings_ms"} <= set(item)
    assert "total" in item["timings_ms"]
    assert all(set(src) == {"doc", "section", "url"} for src in item["sources"])


def test_with_claude_a_question_in_another_language_is_rewritten_for_retrieval(
    examples_db, local_embedder, stub
):
    import anthropic

    from tests.test_pipeline import FakeClaude

    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0, timeout=5.0)
    models = {
        "condense": "claude-haiku-4-5",
        "check": "claude-haiku-4-5",
        "answer": "claude-sonnet-4-6",
    }
    p = Pipeline(Engine(examples_db, local_embedder, client, "claude-haiku-4-5"), client, models)
    question = "Wie rotiere ich das Signaturgeheimnis eines Webhooks?"
    ans = p.answer(question)
    condense = next(b for b in fake.seen if "rewrite a follow-up" in json.dumps(b["system"]))
    assert "written in English" in condense["system"][0]["text"]
    assert question in condense["messages"][0]["content"]
    # retrieval reads the rewritten question; the answer step gets the user's own words
    assert ans.condensed == "How do I rotate the webhook signing secret?"
    assert f"Question: {question}" in json.dumps(fake.calls("answer")[-1]["messages"][0]["content"])
    # an English question is not rewritten
    fake.seen.clear()
    p.answer("How do I verify the signature of a webhook?")
    assert not any("rewrite a follow-up" in json.dumps(b.get("system", "")) for b in fake.seen)


def test_when_claude_fails_the_offline_decision_holds(examples_db, local_embedder, stub):
    import anthropic

    from tests.standins.claude import OVERLOADED

    stub.route("/v1/messages", lambda req: OVERLOADED)
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0, timeout=5.0)
    models = {"condense": "h", "answer": "s", "check": "h"}
    p = Pipeline(Engine(examples_db, local_embedder, client, "h"), client, models)
    ans = p.answer("How do I forward Tidewater webhooks to Amazon EventBridge?")
    assert ans.trace.offline and ans.decision == ABSTAIN and "EventBridge" in ans.text
