"""Answer-level behaviour: the offline decision (names the docs never mention, other languages),
clean offline answers, and `fieldguide eval --answers`."""

import json

import pytest

from bot.cli import main
from bot.evaluation.answers import content_words, load_stopwords, token_scores
from bot.slack_format import context_line
from index.indexer import index_folder
from router import decide
from router.answer import ABSTAIN, ANSWER, PARTIAL, Answer, occurs_in
from router.engine import Engine
from router.offline import furniture, repeats_itself
from router.pipeline import Pipeline
from tests.conftest import ROOT, write_docs


def offline_pipeline(db: str, embedder) -> Pipeline:
    return Pipeline(Engine(db, embedder))


def test_specific_phrases_are_names_versions_and_flags():
    assert decide.specific_phrases("What does Claude Opus 4 cost per million tokens?") == [
        "Claude Opus 4"
    ]
    assert decide.specific_phrases("How do I set budget_tokens with the Go SDK?") == [
        "budget_tokens",
        "Go SDK",
    ]
    # the first word, plain words, quantities and years are not names
    assert decide.specific_phrases("How many retries happen in 2024 for 10,000 events?") == []


def test_a_name_the_docs_never_mention_abstains_and_says_which(examples_db, local_embedder):
    p = offline_pipeline(examples_db, local_embedder)
    ans = p.answer("How do I forward Tidewater webhooks to Amazon EventBridge?")
    assert ans.decision == ABSTAIN
    assert ans.evidence["unknown_terms"] == ["Amazon EventBridge"]
    assert ans.text.startswith("I couldn't find this in the docs")
    assert "Amazon EventBridge" in ans.text
    # a name the docs do use does not
    ok = p.answer("How do I sign in to the Tidewater dashboard through Okta?")
    assert ok.decision != ABSTAIN and ok.evidence["unknown_terms"] == []


def test_a_word_neither_in_the_docs_nor_everyday_english_is_an_unknown_name(
    examples_db, local_embedder
):
    searcher = Engine(examples_db, local_embedder).loaded().searcher
    english = decide.english_words(local_embedder.model_dir)
    assert "banana" in english and "ztunnel" not in english
    # inflections of everyday words are everyday ("padding" is not in the vocabulary, "pad" is)
    assert decide.everyday("padding", english) and decide.everyday("rotated", english)
    assert decide.everyday("unblock", english)
    assert not decide.everyday("doctl", english)
    # a contraction typed without its apostrophe is everyday too, not a name
    assert decide.unknown_terms("cant find my api key, why dont i see it", searcher, english) == []
    # an adverb of an -able adjective too ("reliable" is in the vocabulary, "reliably" not)
    assert decide.unknown_terms("how do i get json back reliably", searcher, english) == []
    # and a team chat's shorthand ("diff", "config", "pls")
    q = "whats the diff between the two webhook configs, pls?"
    assert decide.unknown_terms(q, searcher, english) == []
    # and the kind of help asked for ("tutorial" is missing from the vocabulary)
    assert decide.unknown_terms("webhook tutorial", searcher, english) == []
    # another form of a word the docs use is no name ("pagination", "paginated" in the docs)
    q = "Is the events list paginating by default?"
    assert decide.unknown_terms(q, searcher, english) == []
    q = "How do I forward Tidewater webhooks through ztunnel?"
    assert decide.unknown_terms(q, searcher, english) == ["ztunnel"]
    # an everyday word the docs don't use is no name; without the vocabulary the check is off
    assert decide.unknown_terms("How do I forward webhooks to a banana?", searcher, english) == []
    assert decide.unknown_terms(q, searcher) == []
    assert decide.english_words(None) == frozenset()
    ans = offline_pipeline(examples_db, local_embedder).answer(q)
    assert ans.decision == ABSTAIN and '"ztunnel"' in ans.text


def test_the_askers_own_values_are_no_names_the_docs_lack(examples_db, local_embedder):
    values = "my-app-7d9fb-x2x evt_8f3k2 https://hooks.acme.io/tw 10.0.0.0/16 worker-2.acme.local"
    for value in values.split() + ["bob@acme.io", "tw_test_9xQ2mVb71LkPq0ZsR8tYw3Ne"]:
        assert decide.own_value(value), value
    names = "x509 sha256 rhel8 claude-3-5-sonnet-20241022 TW-1002 claude.ai install-config.yaml"
    for name in names.split() + ["budget_tokens", "v1/messages", "k8s", "OAuth2"]:
        assert not decide.own_value(name), name
    # a pasted error with the asker's own IDs is answered, not refused for "evt_8f3k2"
    ans = offline_pipeline(examples_db, local_embedder).answer(
        "I get TW-1002 when posting event evt_8f3k2 to endpoint ep_9Qw7PzL3"
    )
    assert ans.decision == ANSWER and ans.evidence["unknown_terms"] == []
    assert "`TW-1002` means credentials were sent but not recognised." in ans.text


PASTED_TRACE = """webhook verification fails in prod:
Traceback (most recent call last):
  File "/srv/app/handlers.py", line 42, in handle
    event = tidewater.webhooks.verify(body, sig, secret)
tidewater.errors.WebhookVerificationError: timestamp outside tolerance
any idea?"""


def test_what_the_asker_pasted_from_a_log_names_nothing_the_docs_lack(examples_db, local_embedder):
    # the frames of a stack trace, an indented line, a fenced block are the asker's code
    asked = decide.without_own_values(PASTED_TRACE)
    assert asked == (
        "webhook verification fails in prod: tidewater.errors.WebhookVerificationError: timestamp"
        " outside tolerance any idea?"
    )
    node = "Error: 429 at TidewaterClient.request (/app/node_modules/x/client.js:88:11) why?"
    assert decide.without_own_values(node) == "Error: 429 why?"
    assert decide.without_own_values("why does ```tide replay --since 2h``` fail?") == (
        "why does fail?"
    )
    # a question typed indented is no paste; one that is nothing but a paste is read whole
    assert decide.without_own_values("   how do I rotate a key?") == "how do I rotate a key?"
    assert decide.without_own_values("```TW-1002```") == "```TW-1002```"
    ans = offline_pipeline(examples_db, local_embedder).answer(PASTED_TRACE)
    assert ans.decision != ABSTAIN and ans.evidence["unknown_terms"] == []


TV_NETWORK = """---
title: Troubleshooting
---
# Troubleshooting

## Wi-Fi connection fails

Restart your router and the TV, then open **Settings** > **Network** and select your network again.

## Remote control does not work

Replace the batteries and point the remote at the sensor on the front of the TV.
"""


def test_a_word_the_docs_write_apart_and_everyday_prefixes_are_no_names(tmp_path, local_embedder):
    pages = {  # other pages, so that a word in one page is rare, as in real docs
        f"{topic}.md": f"# {topic.title()}\n\nHow to set up the {topic} of the TV.\n"
        for topic in ("picture", "sound", "channels", "apps", "updates", "accessibility")
    }
    docs = write_docs(tmp_path / "docs", {"tv.md": TV_NETWORK, **pages})
    index_folder(tmp_path / "tv.db", docs, local_embedder)
    p = offline_pipeline(str(tmp_path / "tv.db"), local_embedder)
    # "wifi" is "Wi-Fi" in the docs, "disconnecting" is everyday English ("connect")
    ans = p.answer("wifi keeps disconnecting")
    assert ans.decision != ABSTAIN and 'read "wifi" as "wi fi"' in ans.notes
    assert "Restart your router" in ans.text
    # one word the offline checks don't know is no sign of another language
    ans = p.answer("my WiFi drops")
    assert "language" not in ans.evidence and ans.evidence["unknown_terms"] == []


def test_a_name_and_its_version_must_stand_together_in_the_docs(tmp_path, local_embedder):
    steps = "\n".join(f"{i}. Step {i}: check part 4 of page {i}." for i in range(1, 6))
    docs = write_docs(
        tmp_path / "docs",
        {
            "models.md": "# Models\n\nClaude 3 Opus is the largest model; it reads 4 images.\n",
            **{f"guide{i}.md": f"# Guide {i}\n\n{steps}\n" for i in range(12)},
        },
    )
    db = tmp_path / "v.db"
    index_folder(db, docs, local_embedder)
    searcher = Engine(str(db), local_embedder).loaded().searcher
    assert decide._common("4", searcher.bm25)  # "4" is everywhere, yet kept beside "Opus"
    assert decide.known_phrase("Claude 3 Opus", searcher)
    assert not decide.known_phrase("Claude Opus 4", searcher)


def test_with_claude_the_gate_stops_only_questions_with_nothing_near(examples_db, local_embedder):
    engine = Engine(examples_db, local_embedder)
    loaded = engine.loaded()

    def gate(question: str, claude: bool) -> str:
        vec, _ = engine.embed_query(question)
        hits = loaded.router.route(question, vec, k=10).hits
        ans = Answer(question, question, ABSTAIN, "")
        return decide.evidence(
            question, vec, hits, loaded.searcher.bm25, ans, loaded.searcher, claude=claude
        )

    close = "How do I forward Tidewater webhooks to Amazon EventBridge?"
    assert gate(close, claude=False) == ABSTAIN
    assert gate(close, claude=True) == ANSWER  # Claude's extraction and answer decide
    assert gate("How many calories are in a banana?", claude=True) == ABSTAIN


def test_a_short_question_whose_words_head_the_top_section_is_answered(tmp_path, local_embedder):
    # a short question has a low cosine even to the section that answers it; the section's
    # headings naming all of its words say the section is about it
    filler = {
        f"{t}.md": f"# {t.title()}\n\nHow {t} works for every request and response.\n"
        for t in ("streaming", "pagination", "errors", "billing", "regions", "batches")
    }
    docs = write_docs(
        tmp_path / "docs",
        {
            "bedrock.md": (
                "# Claude on Amazon Bedrock\n\n## List available models\n\nThe following examples"
                " show how to print a list of all the Claude models available through Bedrock:\n\n"
                "```python\nbedrock.list_foundation_models(byProvider='anthropic')\n```\n"
            ),
            **filler,
        },
    )
    index_folder(tmp_path / "m.db", docs, local_embedder)
    ans = offline_pipeline(str(tmp_path / "m.db"), local_embedder).answer(
        "What models are available?"
    )
    # closeness alone would say "loosely" at best (claude-docs' own page: 0.31, an abstention)
    assert ans.evidence["similarity"] < decide.PARTIAL_SIMILARITY
    assert ans.evidence["heading_coverage"] == 1.0
    assert ans.decision == ANSWER and "list of all the Claude models" in ans.text
    # a question the headings only half name is still judged on closeness
    other = offline_pipeline(str(tmp_path / "m.db"), local_embedder).answer(
        "What colours are available?"
    )
    assert other.evidence["heading_coverage"] < decide.HEADING_COVERAGE
    assert other.decision == ABSTAIN


def test_a_short_question_with_every_word_in_the_top_chunks_is_partial_not_abstained(
    examples_db, local_embedder
):
    ans = offline_pipeline(examples_db, local_embedder).answer("what is idempotency key")
    assert ans.evidence["similarity"] < decide.ABSTAIN_SIMILARITY  # a short question's cosine
    assert ans.evidence["coverage"] >= decide.FULL_COVERAGE
    assert ans.decision == PARTIAL and "Idempotency-Key" in ans.text


def test_a_typo_is_read_as_the_docs_word_a_name_is_not(examples_db, local_embedder):
    searcher = Engine(examples_db, local_embedder).loaded().searcher
    english = decide.english_words(local_embedder.model_dir)
    fixed, typos = decide.correct_typos(
        "how do i recieve a webhok on the retry shedule", searcher, english
    )
    assert fixed == "how do i receive a webhook on the retry schedule"
    assert typos == {"recieve": "receive", "webhok": "webhook", "shedule": "schedule"}
    # the question's first word, capitalised as typed
    assert decide.correct_typos("Recieve webhooks twice?", searcher, english) == (
        "Receive webhooks twice?",
        {"Recieve": "Receive"},
    )
    # names, words whose near words change their first or last letter, far words: left alone
    for question in (
        "Does Webhok support SAML?",  # capitalised inside the question: a name
        "does ztunnel work",  # "tunnel" only by a new first letter
        "how long do i boil an egg for a runny yolk",
    ):
        assert decide.correct_typos(question, searcher, english) == (question, {})
    # before, the typo was a name the docs never mention: refused
    ans = offline_pipeline(examples_db, local_embedder).answer(
        "How many times is a failed webhok retried?"
    )
    assert ans.decision == ANSWER and "8 attempts" in ans.text
    assert 'read "webhok" as "webhook"' in ans.notes
    assert 'read "webhok" as "webhook"' in context_line(ans)


@pytest.mark.parametrize(
    "question, lang",
    [
        ("Wie oft wird ein fehlgeschlagener Webhook erneut zugestellt?", "German"),
        ("Kolikrát se opakuje neúspěšné doručení webhooku?", "Czech"),
    ],
)
def test_offline_a_question_in_another_language_is_told_to_ask_in_the_docs_language(
    examples_db, local_embedder, question, lang
):
    ans = offline_pipeline(examples_db, local_embedder).answer(question)
    assert ans.decision == ABSTAIN
    assert "English" in ans.text and lang in ans.text and "couldn't find" not in ans.text


@pytest.mark.parametrize("question", ["auto standby", "sandbox mode", "rate limits", "json mode"])
def test_a_few_english_words_are_never_taken_for_another_language(
    examples_db, local_embedder, question
):
    # langid alone calls these Italian, Latin, Sotho and Albanian
    searcher = Engine(examples_db, local_embedder).loaded().searcher
    english = decide.english_words(local_embedder.model_dir)
    assert decide.foreign_language(question, searcher, english) is None
    ans = offline_pipeline(examples_db, local_embedder).answer(question)
    assert "language" not in ans.evidence and "Offline search works only" not in ans.text


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
    chunk_text = {h["id"]: h["text"] for h in ans.hits}
    for c in ans.citations:
        assert c.verified and any(occurs_in(c.cited_text, t) for t in chunk_text.values())

    ans = p.answer("The sound is distorted, what can I do?")
    # the row that answers, with its table header, not the whole table
    assert "| Problem | Solution |" in ans.text
    assert "| Sound is distorted | Lower the volume" in ans.text
    assert "Remote does not work" not in ans.text
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
            "--json",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "answerable abstain" in printed and "off-topic abstain" in printed
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
    models = {"condense": "claude-haiku-4-5", "extract": "claude-haiku-4-5", "answer": "x"}
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

    from bot.testing.stubs import OVERLOADED

    stub.route("/v1/messages", lambda req: OVERLOADED)
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0, timeout=5.0)
    models = {"condense": "h", "extract": "h", "answer": "s"}
    p = Pipeline(Engine(examples_db, local_embedder, client, "h"), client, models)
    ans = p.answer("How do I forward Tidewater webhooks to Amazon EventBridge?")
    assert ans.offline and ans.decision == ABSTAIN and "Amazon EventBridge" in ans.text
