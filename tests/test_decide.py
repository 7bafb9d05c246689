"""The answer decision (router/decide.py): a calibrated probability from a few signals, read
through the whole offline `ask` path. Tests describe behaviour, not one example's rule."""

import json
import shutil

import pytest

from bot.api import eval_index
from bot.cli import main
from bot.slack.slack_format import context_line
from index.indexer import index_folder
from router import decide, reading, words
from router.answer import ABSTAIN, ANSWER
from router.engine import Engine, decision_file
from router.pipeline import Pipeline
from router.question import abstain_message
from tests.conftest import EXAMPLES, write_docs


def ask(db: str, embedder, question: str):
    return Pipeline(Engine(db, embedder)).answer(question)


def test_the_decision_file_holds_a_model_per_embedder_and_an_embedder_free_one(local_embedder):
    data = json.loads(decide.MODEL_FILE.read_text())
    assert data["written_by"] == "fieldguide calibrate" and data["examples"]
    assert {local_embedder.name, "lexical"} <= set(data["models"])
    for name, model in decide.load_models().items():
        assert 0 < model.bands["partial"] <= model.bands["answer"] <= 1, name
    models = decide.load_models()
    assert decide.model_for("voyage:voyage-3.5", True, models)[0] == "lexical"  # not calibrated
    assert decide.model_for(local_embedder.name, False, models)[0] == "lexical"  # no vectors


def test_a_product_the_docs_never_mention_abstains_and_says_which(examples_db, local_embedder):
    ans = ask(
        examples_db, local_embedder, "How do I forward Tidewater webhooks to Amazon EventBridge?"
    )
    assert ans.decision == ABSTAIN
    assert ans.text.startswith("I couldn't find this in the docs") and "EventBridge" in ans.text
    # a name the docs do use is answered
    ok = ask(
        examples_db, local_embedder, "How do I sign in to the Tidewater dashboard through Okta?"
    )
    assert ok.decision != ABSTAIN and "okta" not in ok.trace.evidence["unknown_words"]


def test_a_refusal_names_the_rare_words_the_docs_lack_not_everyday_ones(
    examples_db, local_embedder
):
    """The words a refusal names are those the decision weighs (below everyday English): a word
    English uses everywhere ("straight", "couple") that the docs happen not to use frames the
    question, and naming it as the missing subject reads as nonsense."""
    for question in (
        "Does Tidewater support mercurial straight away?",
        "Can I send webhooks straight to a mercurial hook, a couple at a time?",
    ):
        ans = ask(examples_db, local_embedder, question)
        assert ans.decision == ABSTAIN, ans.trace.evidence
        assert "straight" in ans.trace.evidence["unknown_words"]  # the docs lack it too
        assert 'they don\'t mention "mercurial".' in ans.text, ans.text
        assert "straight" not in ans.text and "couple" not in ans.text
    evidence = {"why": "rare", "unknown_words": ["straight", "couple"], "unknown_phrases": []}
    assert abstain_message(evidence) is None  # nothing rare to name: the near sections


@pytest.mark.parametrize(
    "question",
    [
        "How many times is a failed webhook retried? And Explain the steps to replay one.",
        "what things do I need to verify a webhook signature?",
        "how to enable/disable webhook retries",
        "whats the difference between test and live API keys",
    ],
)
def test_everyday_words_never_get_a_question_refused(examples_db, local_embedder, question):
    ans = ask(examples_db, local_embedder, question)
    assert ans.decision != ABSTAIN, ans.trace.evidence


def correct_typos(question: str, db: str, embedder) -> tuple[str, dict[str, str]]:
    return words.correct_typos(reading.read(question), Engine(db, embedder).corpus().words)


def test_a_typo_is_read_as_the_word_a_name_is_not(examples_db, local_embedder):
    def fix(question: str) -> tuple[str, dict[str, str]]:
        return correct_typos(question, examples_db, local_embedder)

    fixed, typos = fix("how do i recieve a webhok on teh retry shedule")
    assert fixed == "how do i receive a webhook on the retry schedule"
    assert typos == {"recieve": "receive", "webhok": "webhook", "teh": "the", "shedule": "schedule"}
    assert fix("Recieve webhooks twice?")[0] == "Receive webhooks twice?"
    for question in ("Does Webhok support SAML?", "does ztunnel work", "xmas freeze"):
        assert fix(question) == (question, {})
    # a word English knows is typed on purpose: never "corrected" into a word of the docs
    git = "how do i rebase a branch in git onto main"
    assert fix(git) == (git, {})
    # a contraction's stem is no word of its own; the asker's pasted code is theirs as written
    pasted = "Why couldn't the webhok start?\n\n```python\nresp = shedule()\n```"
    assert fix(pasted) == (pasted.replace("webhok", "webhook"), {"webhok": "webhook"})
    ans = ask(examples_db, local_embedder, "How many times is a failed webhok retried?")
    assert ans.decision != ABSTAIN and "8 attempts" in ans.text
    assert 'read "webhok" as "webhook"' in ans.trace.notes and 'read "webhok"' in context_line(ans)


def test_a_word_is_known_in_any_form_the_docs_write_it(tmp_path, local_embedder):
    docs = write_docs(
        tmp_path / "docs",
        {
            "alerts.md": "# Alerts\n\n## KubePodCrashLooping\n\nA pod restarts over and over.\n",
            "tv.md": "# Network\n\n## Wi-Fi connection fails\n\nRestart your router.\n",
            "s3.md": "# Storage\n\nSet the bucket host of the registry.\n",
        },
    )
    index_folder(tmp_path / "w.db", docs, local_embedder)
    known = Engine(str(tmp_path / "w.db"), local_embedder).corpus().words
    # inside an identifier, written apart, another inflection
    for word in ("crashlooping", "wifi", "buckethost", "restarting", "routers"):
        assert known.knows(word), word
    assert not known.knows("ztunnel") and not known.knows("x" * 4000)


def test_the_askers_pasted_log_and_own_values_are_answered(examples_db, local_embedder):
    trace = (
        "webhook verification fails on worker-2.acme.local:\nTraceback (most recent call last):\n"
        '  File "/srv/app/handlers.py", line 42, in handle\n    tidewater.webhooks.verify(b, s)\n'
        "tidewater.errors.WebhookVerificationError: timestamp outside tolerance"
    )
    assert "handlers.py" not in reading.read(trace).prose
    assert "worker-2.acme.local" not in reading.read(trace).prose
    assert ask(examples_db, local_embedder, trace).decision != ABSTAIN
    ans = ask(
        examples_db, local_embedder, "I get TW-1002 when posting event evt_8f3k2 to ep_9Qw7PzL3"
    )
    assert ans.decision != ABSTAIN and "TW-1002" in ans.text


def test_a_word_of_any_length_costs_a_bounded_check(examples_db, local_embedder):
    long = "a" + "b" * 3999
    assert correct_typos(f"why {long}?", examples_db, local_embedder) == (f"why {long}?", {})
    assert ask(examples_db, local_embedder, f"what is {long}").decision == ABSTAIN


def test_with_claude_the_gate_stops_only_questions_with_nothing_near(examples_db, local_embedder):
    engine = Engine(examples_db, local_embedder)
    corpus = engine.corpus()
    name, model = decide.model_for(local_embedder.name, True, engine.models)

    def gate(question: str, claude: bool) -> str:
        vec, _ = engine.embed_query(question)
        hits = corpus.searcher.search(question, vec)
        s = decide.signals(reading.read(question), vec, hits, corpus)
        return decide.decide(s, model, name, claude=claude).decision

    close = "How do I forward Tidewater webhooks to Amazon EventBridge?"
    assert gate(close, claude=False) == ABSTAIN
    assert gate(close, claude=True) == ANSWER  # Claude's answer and check decide
    assert gate("How many calories are in a banana?", claude=True) == ABSTAIN


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
    ans = ask(examples_db, local_embedder, question)
    assert ans.decision == ABSTAIN
    assert "English" in ans.text and lang in ans.text and "couldn't find" not in ans.text


@pytest.mark.parametrize(
    "question", ["auto standby", "rate limits", "my WiFi drops", "teh api keys"]
)
def test_a_few_english_words_or_a_slang_word_are_never_another_language(
    examples_db, local_embedder, question
):
    corpus = Engine(examples_db, local_embedder).corpus()
    assert corpus.foreign_language(reading.read(question)) is None


def test_calibrate_writes_beside_the_index_and_the_engine_reads_it(
    tmp_path, capsys, monkeypatch, examples_template, local_embedder
):
    # with the examples' 30 answerable and 55 unanswered (25 off-topic, 30 gold hidden): ten of
    # each per signal altogether (calibrate's least)
    from bot.evaluation.calibrate import EVENTS_PER_SIGNAL

    need = EVENTS_PER_SIGNAL * len(decide.FEATURES)
    topics = [
        f"{t}{i}" for t in ("picture", "sound", "network") for i in range((need - 30) // 3 + 1)
    ]
    other = write_docs(
        tmp_path / "tv" / "docs",
        {
            f"{t}.md": f"# {t.title()}\n\n## Set up {t}\n\nOpen Settings and choose {t}.\n"
            for t in topics
        },
    )
    (other.parent / "questions.jsonl").write_text(
        "\n".join(
            json.dumps({"id": t, "question": f"How do I set up {t}?", "intents": ["general"]})
            for t in topics
        )
        + "\n"
        + "\n".join(
            json.dumps({"id": f"off{i}", "question": q, "intents": []})
            for i, q in enumerate(
                [f"Who won the football World Cup of {1930 + 4 * i}?" for i in range(need - 54)]
            )
        )
        + "\n"
    )
    # the example set's index, where calibrate keeps it (as a run before this one left it)
    shutil.copyfile(examples_template, eval_index(tmp_path, EXAMPLES.parent, local_embedder))
    index = tmp_path / "served" / "index.db"  # FIELDGUIDE_DB: the decision is written beside it
    monkeypatch.setenv("FIELDGUIDE_DB", str(index))
    args = [str(EXAMPLES.parent), str(other.parent), "--headings", "5", "--work", str(tmp_path)]
    assert main(["calibrate", *args]) == 0
    said = capsys.readouterr()
    out = index.parent / "decision.json"
    assert "| left out |" in said.out and "| examples |" in said.out and "| tv |" in said.out
    assert f"\nwrote {out} (" in said.err
    models = decide.load_models(out)
    assert set(models) == {"lexical", *[n for n in models if n != "lexical"]} and len(models) == 2
    # an engine on an index in that folder reads it; elsewhere, the shipped one
    assert decision_file(index) == out
    assert decision_file(tmp_path / "other" / "index.db") == decide.MODEL_FILE


def test_the_askers_own_words_are_no_evidence_against_the_docs(examples_db, local_embedder):
    """Paths, versions, identifiers, a project's name in code, pasted output and chatter around
    the question: none of it is a topic the docs lack."""
    question = (
        "webhook retries stop after a while\n\n"
        "Hi! Perhaps I'm guessing wrong, but on acme-billing-svc with `TIDEWATER_HOOK_URL` set in"
        " /srv/acme/.env and sdk 3.12.5 the retries stop somewhere around x.x.x:\n\n```\n"
        "ERR hook_4f9a2 giving up\n```\nHow many times is a failed webhook retried?"
    )
    ans = ask(examples_db, local_embedder, question)
    assert ans.decision != ABSTAIN and ans.sources
    named = ans.trace.evidence["unknown_words"] + ans.trace.evidence["unknown_phrases"]
    for own in ("tidewater_hook_url", "svc", "acme", "3.12.5", "x.x.x", "perhaps", "guessing"):
        assert not any(own in w.lower() for w in named), (own, named)


@pytest.mark.parametrize(
    "question",
    [
        "Is there a Terraform provider for Tidewater?",
        "Is there a Pulumi provider for Tidewater?",
        "Is there a Kafka connector for Tidewater events?",
        "Can I manage Tidewater with Ansible?",
    ],
)
def test_a_tool_the_docs_never_mention_is_not_answered_nor_another_language(
    examples_db, local_embedder, question
):
    ans = ask(examples_db, local_embedder, question)
    assert ans.decision != ANSWER
    assert "language" not in ans.text and "Indonesian" not in ans.text
    assert ans.trace.evidence["why"] != "language"


def test_unsure_says_so_and_quotes_the_closest_sections_cited(examples_db, local_embedder):
    """Offline there are three outcomes: an unsure PARTIAL names its doubt and still quotes the
    closest sections with their sources; --json keeps the three names."""
    engine = Engine(examples_db, local_embedder)
    _, model = decide.model_for(local_embedder.name, True, engine.models)
    # the same question decided with this engine's bands lowered to the doubt band: PARTIAL
    model.bands.update(answer=1.0, answer_message=1.0, partial=0.0, partial_message=0.0)
    ans = Pipeline(engine).answer("How many times is a failed webhook retried?")
    assert ans.decision == "PARTIAL" and ans.caveat.startswith("I'm not sure the docs answer this")
    assert ans.text.startswith("> ") and "8 attempts" in ans.text and ans.sources
    assert all(c.verified for c in ans.citations) and "[1]" in ans.text


def test_a_question_in_another_language_gets_no_typo_note(examples_db, local_embedder):
    ans = ask(
        examples_db, local_embedder, "Wie oft wird ein fehlgeschlagener Webhook erneut zugestellt?"
    )
    assert ans.decision == ABSTAIN and not any(
        n.startswith(words.TYPO_NOTE) for n in ans.trace.notes
    )


def test_degenerate_bands_are_refused_with_one_line(tmp_path, examples_db):
    """Band edges at 0 take every question (p is above 0 for all): such a decision would answer
    the sourdough question from any docs. doctor fails it, the bot will not load it."""
    from bot import api
    from bot.doctor import check_decision

    good = json.loads(decide.MODEL_FILE.read_text())
    for m in good["models"].values():
        m["bands"] = {k: 0.0 for k in m["bands"]}
    zero = tmp_path / "zero.json"
    zero.write_text(json.dumps(good))
    check = check_decision(zero)
    assert check.status == "FAIL" and "it would refuse no question" in check.detail
    assert "\n" not in check.detail
    with pytest.raises(decide.DecisionFileError, match="band edges at 0"):
        decide.load_models(zero)
    # the shipped decision refuses it
    assert api.ask("What is a good recipe for sourdough bread?", examples_db).decision == "ABSTAIN"
    swapped = json.loads(decide.MODEL_FILE.read_text())
    for m in swapped["models"].values():
        m["bands"]["partial"], m["bands"]["answer"] = 0.9, 0.2
    (tmp_path / "swapped.json").write_text(json.dumps(swapped))
    assert "partial edge above its answer" in check_decision(tmp_path / "swapped.json").detail


def test_calibrate_counts_distinct_questions_not_copies(tmp_path, capsys):
    """Two distinct questions copied 35 times each are two questions: refused in one line,
    nothing written."""
    docs = write_docs(
        tmp_path / "copied" / "docs", {"a.md": "# A\n\n## Set up a\n\nOpen Settings.\n"}
    )
    lines = [
        {"id": f"a{i}", "question": "How do I set up a?", "intents": ["general"]} for i in range(35)
    ]
    lines += [{"id": f"o{i}", "question": "How do I bake bread?", "intents": []} for i in range(35)]
    (docs.parent / "questions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "decision.json"
    args = ["calibrate", str(docs.parent), str(EXAMPLES.parent), "--work", str(tmp_path / "w")]
    assert main([*args, "--write", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "distinct answerable questions" in err and "68 copies of a question not counted" in err
    assert not out.exists()


# -- 6. calibrate fits only on enough of each kind; the decision file is checked -------------------


def eval_set(root, name: str, answerable: int, offtopic: int):
    """A small eval set: one doc per topic, a question on each of the first `answerable`, and
    `offtopic` questions the docs do not answer."""
    topics = [f"gadget{i}" for i in range(max(answerable, 1))]
    write_docs(
        root / name / "docs",
        {
            f"{t}.md": f"# {t.title()}\n\n## Set up {t}\n\nOpen Settings and choose {t}.\n"
            for t in topics
        },
    )
    lines = [
        json.dumps({"id": t, "question": f"How do I set up {t}?", "intents": ["general"]})
        for t in topics[:answerable]
    ]
    lines += [
        json.dumps({"id": f"off{i}", "question": f"How do I bake bread number {i}?", "intents": []})
        for i in range(offtopic)
    ]
    (root / name / "questions.jsonl").write_text("".join(line + "\n" for line in lines))
    return root / name


def test_calibrate_refuses_too_few_of_each_kind_and_writes_nothing(tmp_path, capsys):
    from bot.cli import main
    from router.decide import FEATURES

    one, two = eval_set(tmp_path, "one", 2, 0), eval_set(tmp_path, "two", 2, 0)
    out = tmp_path / "decision.json"
    args = ["calibrate", str(one), str(two), "--work", str(tmp_path / "w"), "--write", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("fieldguide: calibrate cannot fit")
    assert "one has no off-topic questions" in err and "two has no off-topic questions" in err
    need = 10 * len(FEATURES)  # ten of each per signal
    assert (
        f"at least {need} distinct answerable questions" in err and "have 4 answerable and 0" in err
    )
    assert not out.exists()
    # an empty questions file: said so, no traceback
    (one / "questions.jsonl").write_text("")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{one / 'questions.jsonl'} holds no questions" in err and "Traceback" not in err
    # and so does eval
    assert main(["eval", str(one), "--db", str(tmp_path / "e.db")]) == 2
    assert f"{one / 'questions.jsonl'} holds no questions" in capsys.readouterr().err


def test_a_bad_decision_file_is_named_and_doctor_checks_it(tmp_path, examples_db, capsys):
    from bot.cli import main
    from bot.doctor import check_decision
    from router import decide

    good = json.loads(decide.MODEL_FILE.read_text())
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"models": {')
    with pytest.raises(ValueError, match=f"{corrupt}: not a decision file"):
        decide.load_models(corrupt)
    # what calibrate wrote from two sets of two questions before: no signal weighed, band 0.5
    blind = tmp_path / "blind.json"
    for m in good["models"].values():
        m["weights"] = [0.0] * len(m["weights"])
        m["bands"] = {"answer": 0.5, "partial": 0.5, "claude": 0.5}
    blind.write_text(json.dumps(good))
    with pytest.raises(ValueError, match=f"{blind}: .*weighs no signal"):
        decide.load_models(blind)
    nan = tmp_path / "nan.json"
    nan.write_text(decide.MODEL_FILE.read_text().replace('"bias": ', '"bias": NaN, "x": ', 1))
    with pytest.raises(ValueError, match=f"{nan}: .*bias"):
        decide.load_models(nan)
    for bad in (corrupt, blind, nan):
        check = check_decision(bad)
        assert check.status == "FAIL" and str(bad) in check.detail
    assert check_decision(decide.MODEL_FILE).status == "ok"
    assert main(["doctor", "--db", examples_db]) in (0, 1)
    assert "decision.json" in capsys.readouterr().out
