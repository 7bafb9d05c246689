"""`fieldguide gaps`: the questions the docs did not answer well, grouped into topics; the HTML
report checked in a real headless Chromium."""

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import anthropic
import numpy as np
import pytest

from bot.api import gaps
from bot.app import FieldGuide
from bot.cli import main
from bot.gaps import average_linkage, flat, said_missing
from bot.gaps_report import plural, shorten
from bot.mcp_server import build
from bot.owners import doc_owner
from bot.settings import Settings
from bot.state.sqlite import SqliteState
from bot.weekly import Note, topics_part
from index.indexer import index_folder
from index.store import doc_records, open_db
from router import context
from router.answer import PARTIAL, Answer
from router.engine import Engine
from router.pipeline import Pipeline
from tests.conftest import ROOT
from tests.standins.claude import FakeClaude
from tests.standins.gap_topics import ANSWERED, TOPICS
from tests.test_claude_reading import GAP_ANSWER
from tests.test_mcp import call


def planted(db: str) -> dict[str, str]:
    """An audit trail: the three topics' questions not answered well — abstained, partial, a 👎
    on an answer, a hand-off — interleaved with answered questions. Returns question → topic."""
    state = SqliteState(open_db(db))
    topic_of = {}
    rows = [(q, name) for name, qs in TOPICS.items() for q in qs]
    for i, (q, name) in enumerate(rows):
        topic_of[q] = name
        decision = ("ABSTAIN", "PARTIAL", "ANSWER", "ANSWER")[i % 4]
        aid = state.record_answer(Answer(q, q, decision, "…"), {"channel": "C1", "user": "U1"})
        assert aid is not None
        if decision == "ANSWER" and i % 8 == 2:
            state.record_feedback(aid, "U1", "not_helpful")
        elif decision == "ANSWER":
            state.claim_handoff(aid, "U1", "#docs", "#docs")
        if i < len(ANSWERED):
            a = ANSWERED[i]
            state.record_answer(Answer(a, a, "ANSWER", "…"), {"channel": "C1", "user": "U2"})
    return topic_of


def test_gaps_json_finds_the_three_planted_topics_with_their_counts(examples_db, capsys):
    topic_of = planted(examples_db)
    assert main(["gaps", "--db", examples_db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    top = out["topics"][:3]
    assert out["unanswered"] == 30  # the answered ones are left out
    found = {topic_of[t["questions"][0]] for t in top}
    assert found == set(TOPICS)
    docs = {d["path"]: d for d in doc_records(open_db(examples_db))}
    for t in top:
        # each topic's refusals, 👎 and hand-offs; its unsure answers are listed apart
        assert (
            t["count"] >= 7 and 1 <= len(t["questions"]) <= 5 and t["kind"] in ("missing", "missed")
        )
        assert {topic_of[q] for q in t["questions"]} == {topic_of[t["questions"][0]]}
        # the nearest doc, its intent and owner (the example docs name none: their last author
        # in git, where they are in a git working copy), and its link
        assert (
            t["intent"] == docs[t["doc"]]["intent"] and t["owner"] == doc_owner(docs[t["doc"]])[0]
        )
        assert t["url"].startswith(("https://docs.tidewater.example/", t["doc"]))
        assert t["state"] == "open"  # rows without the decision's evidence: no name told lacking
    assert sum(t["unsure"] for t in out["topics"]) == 8  # a quarter of the planted rows
    assert sum(t["count"] for t in out["topics"]) == 30
    assert main(["gaps", "--db", examples_db, "--since", "2999-01-01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["topics"] == []
    # --since is read as audit's is (bot/since.py): a time ago, or a clear usage error
    assert main(["gaps", "--db", examples_db, "--since", "1h", "--json"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["gaps", "--db", examples_db, "--since", "yesterday"])
    assert "Invalid value for '--since': 'yesterday' is neither" in capsys.readouterr().err


def test_gaps_intent_is_one_of_the_index_and_finds_the_topics_labelled_with_it(examples_db, capsys):
    planted(examples_db)
    assert main(["gaps", "--db", examples_db, "--intent", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fieldguide: no intent 'nosuch' in ") and err.count("\n") == 1
    assert "its intents are api, authentication, billing, general, troubleshooting" in err
    assert main(["gaps", "--db", examples_db, "--json"]) == 0
    everything = json.loads(capsys.readouterr().out)["topics"]
    for intent in {t["intent"] for t in everything}:
        assert main(["gaps", "--db", examples_db, "--json", "--intent", intent]) == 0
        mine = json.loads(capsys.readouterr().out)
        # a topic labelled with an intent is found by filtering on it, and only those are
        assert mine["topics"] == [t for t in everything if t["intent"] == intent]
        assert mine["unanswered"] == sum(t["count"] for t in mine["topics"])


PLANTED = [json.loads(line) for line in (ROOT / "examples" / "gaps.jsonl").open()]
SMALL_TALK = ["hi", "thanks", "hello!", "Thank you!", "good morning", "ok"]


def snapshot(src: Path, dst: Path) -> str:
    """A copy of the SQLite file at `src` (its write-ahead log included), at `dst`."""
    import sqlite3

    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return str(dst)


@pytest.fixture(scope="module")
def trails(examples_template, local_embedder, tmp_path_factory) -> dict[str, Path]:
    """Audit trails as the bot makes them, every question through the real offline pipeline,
    asked once for this module. "unsure": examples/gaps.jsonl's 30 questions in three topics the
    example docs don't cover (a Terraform provider, mobile SDKs, compliance certifications) and
    10 answerable questions (which the offline path often answers unsure, quoting the section).
    "full": the same, then the rest of the example set's questions, its off-topic ones and small
    talk typed at the command line, and a 👎 from its asker on each planted question answered."""
    work = tmp_path_factory.mktemp("trails")
    db = work / "full.db"
    shutil.copyfile(examples_template, db)
    planted = [r["question"] for r in PLANTED]
    examples = ROOT / "examples"
    questions = [json.loads(line)["question"] for line in (examples / "questions.jsonl").open()]
    answerable = [q for q in questions if q not in set(planted)]
    offtopic = [json.loads(line)["question"] for line in (examples / "offtopic.jsonl").open()]
    first, rest = planted + answerable[:10], answerable[10:] + offtopic + SMALL_TALK
    with FieldGuide(Settings(db=str(db)), embedder=local_embedder) as guide:
        answers = [
            guide.ask(q, context={"channel": "CLI", "user": f"U{i % 7}"})
            for i, q in enumerate(first)
        ]
        unsure = Path(snapshot(db, work / "unsure.db"))
        for i, q in enumerate(rest, start=len(first)):
            guide.ask(q, context={"channel": "CLI", "user": f"U{i % 7}"})
        for i, ans in enumerate(answers[: len(planted)]):
            if ans.decision == "ANSWER":
                assert ans.audit_id is not None
                guide.state.record_feedback(ans.audit_id, f"U{i % 7}", "not_helpful")
    return {"unsure": unsure, "full": db}


def test_the_planted_topics_come_back_as_planted_and_small_talk_stays_out(trails, tmp_path, capsys):
    examples_db = snapshot(trails["full"], tmp_path / "asked.db")
    assert main(["gaps", "--db", examples_db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    topics = out["topics"]
    topic_of = {r["question"]: r["topic"] for r in PLANTED}
    for name in ("terraform", "mobile", "compliance"):
        # the topic holding most of this planted topic's questions: found whole enough, pure
        # enough, and among the three biggest
        def held(t: dict, name=name) -> int:
            return sum(topic_of.get(q) == name for q in every_question(examples_db, t))

        rank, best = max(enumerate(topics), key=lambda rt: held(rt[1]))
        mine = held(best)
        assert mine >= 6 and mine / best["count"] >= 0.7 and rank < 3, (name, topics[:4])
    # small talk is no gap: none of it is in any topic
    shown = {q for t in topics for q in t["questions"]}
    assert not shown & set(SMALL_TALK)
    assert out["small_talk"] == len(SMALL_TALK)


def test_the_three_uncovered_topics_rank_above_answerable_questions_answered_unsure(
    trails, tmp_path, capsys
):
    """The planted-topics check: examples/gaps.jsonl's 30 questions in three topics the docs don't
    cover, asked beside 10 answerable questions (which the offline path often answers unsure,
    quoting the section): the three topics are the top three, each mostly one planted topic, and
    an unsure answer's question weighs less than a refused one."""
    examples_db = snapshot(trails["unsure"], tmp_path / "asked.db")
    assert main(["gaps", "--db", examples_db, "--json"]) == 0
    topics = json.loads(capsys.readouterr().out)["topics"]
    topic_of = {r["question"]: r["topic"] for r in PLANTED}
    top = []
    for t in topics[:3]:
        held = Counter(topic_of.get(q, "") for q in every_question(examples_db, t))
        name, n = held.most_common(1)[0]
        assert name and n / t["count"] >= 0.7, (t, held)
        top.append(name)
    assert sorted(top) == ["compliance", "mobile", "terraform"], topics[:4]
    assert all(t["unanswered"] + t["unsure"] == t["count"] for t in topics)
    assert [t["evidence"] for t in topics] == sorted((t["evidence"] for t in topics), reverse=True)
    # in words an owner reads: no clustering statistics
    assert main(["gaps", "--db", examples_db]) == 0
    out = capsys.readouterr().out
    assert "silhouette" not in out and "linkage" not in out and "cosine" not in out
    assert "the docs did not answer" in out


def every_question(db: str, topic: dict) -> list[str]:
    """All the questions of a topic (it shows five), from its audit rows."""
    marks = ",".join("?" * len(topic["ids"]))
    rows = open_db(db).execute(f"SELECT question FROM answers WHERE id IN ({marks})", topic["ids"])
    return [q for (q,) in rows]


def test_unrelated_questions_stay_apart_with_a_silhouette_in_range():
    """No merge below cosine distance 1 (three questions with nothing in common): each is its own
    topic, and the silhouette reported is a silhouette (0 for singletons), never out of [-1, 1]."""
    from bot.gaps import cluster

    labels, cut, score = cluster(np.eye(3))
    assert sorted(labels.tolist()) == [0, 1, 2] and -1.0 <= score <= 1.0


def test_average_linkage_agrees_with_scipy():
    hierarchy = pytest.importorskip("scipy.cluster.hierarchy")
    from scipy.spatial.distance import pdist, squareform

    rng = np.random.default_rng(7)
    points = rng.normal(size=(60, 8))
    points[:20] += 3  # some structure, and ties-free distances
    condensed = pdist(points)
    merges = average_linkage(squareform(condensed))
    tree = hierarchy.linkage(condensed, method="average")
    assert np.allclose([m[0] for m in merges], tree[:, 2])
    for cut in np.quantile(tree[:, 2], [0.2, 0.5, 0.8, 0.95]):
        ours = flat(merges, len(points), float(cut))
        theirs = hierarchy.fcluster(tree, cut, criterion="distance")
        # the same partition, whatever the labels
        assert len(set(zip(ours, theirs, strict=True))) == len(set(ours)) == len(set(theirs))


# -- the HTML report in a real browser -------------------------------------------------------------


def chromium() -> str:
    """A system's Chromium (CI installs Debian's: `make chromium`); skipped with the reason where
    it is missing, failed under CI (CI or FIELDGUIDE_REQUIRE_CHROMIUM=1 set)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    why = "Chromium is not installed: a system package (`make chromium` installs Debian's, as root)"
    if os.environ.get("CI") or os.environ.get("FIELDGUIDE_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"the browser test is required here: {why}")
    pytest.skip(why)


def headless(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on `page` at a 1280 px wide window, its scripts run."""
    run = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--window-size=1280,2000",
            "--virtual-time-budget=5000",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run


def dump_dom(page: Path, profile: Path) -> str:
    """The page's DOM after its scripts ran."""
    return headless(page, profile, "--dump-dom").stdout


def test_the_html_report_renders_with_its_plots_drawn_and_no_errors(examples_db, tmp_path, capsys):
    import re

    planted(examples_db)
    page = tmp_path / "gaps.html"
    assert main(["gaps", "--db", examples_db, "--html", str(page)]) == 0
    assert "30 questions not answered well, in " in capsys.readouterr().out
    html = page.read_text()
    # self-contained: nothing is fetched (no external script, style, font or image)
    assert not re.search(r"""<(script|link|img)[^>]*(src|href)\s*=""", html)
    assert "@import" not in html and "url(" not in html
    dom = dump_dom(page, tmp_path / "profile")
    assert 'data-drawn="3"' in dom, dom[:2000]  # the three plots have a size and bars
    assert 'data-errors="yes"' not in dom and '<div id="errors"></div>' in dom
    assert dom.count('class="bar"') >= 3 + 1 + 3  # days x outcomes, intents, gaps
    assert "HIPAA" in dom and "Terraform" in dom  # the top gaps are listed
    # the whole width of a 1280 px window, not 60% of it
    found = re.search(r'data-plot-share="([\d.]+)"', dom)
    assert found is not None, dom[:2000]
    share = float(found.group(1))
    assert share > 0.9, share
    # what a docs owner reads: the period, counts in words, what "answered" means, bar labels cut
    # at a word, the nearest docs linked
    day = open_db(examples_db).execute("SELECT substr(max(created), 1, 10) FROM answers")
    assert f"Questions asked on {next(iter(day))[0]} (UTC)." in dom
    assert not re.search(r"\b1 (questions|topics)\b", dom)
    assert "Only an answer someone marked helpful counts as covered" in dom
    labels = re.findall(r"<text[^>]*><title>([^<]*)</title>([^<]*)</text>", dom)
    assert labels and all(label == shorten(whole) for whole, label in labels)
    assert '<a href="https://docs.tidewater.example/' in dom
    # and it is drawn: a screenshot of it (what a reviewer looks at)
    shot = tmp_path / "gaps.png"
    headless(page, tmp_path / "profile3", f"--screenshot={shot}")
    assert shot.stat().st_size > 10_000
    # the error check itself works: a page whose script fails is caught
    broken = tmp_path / "broken.html"
    broken.write_text(html.replace("</body>", "<script>notDefined();</script></body>"))
    dom = dump_dom(broken, tmp_path / "profile2")
    assert 'data-errors="yes"' in dom and "notDefined" in dom


def test_report_words():
    assert [plural(n, "question") for n in (0, 1, 2)] == [
        "0 questions",
        "1 question",
        "2 questions",
    ]
    assert shorten("Can our Terraform HCL configs create Tidewater endpoints?", 30) == (
        "Can our Terraform HCL configs…"
    )
    assert shorten("short enough", 30) == "short enough"
    assert len(shorten("x" * 80, 30)) == 30  # one long word: cut inside it


def test_a_part_an_answer_says_the_docs_lack_is_a_gap_to_write_up_in_its_words(
    examples_db, local_embedder, stub, capsys, tmp_path
):
    """An answer that says the docs don't cover a part of the question (the claim check reads the
    sentence so) keeps that sentence in its audit row: the question is one to write up, and the
    sentence comes with its topic; asked in a direct message, its words stay out."""
    stub.route("/v1/messages", FakeClaude(answer=GAP_ANSWER, not_covered=("don't cover",)))
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
    engine = Engine(examples_db, local_embedder, client, "claude-haiku-4-5")
    models = {"condense": "claude-haiku-4-5", "answer": "claude-sonnet-5-5"}
    models["check"] = "claude-haiku-4-5"
    budget = context.Budget(tokens=600, looks=0)
    p = Pipeline(engine, client, models, "https://docs.example.com", budget=budget)
    ans = p.answer("How do I rotate an API key?")
    said = "The docs don't cover how long the old key keeps working."
    assert ans.decision == PARTIAL and ans.trace.route["gaps"] == [said]
    state = SqliteState(open_db(examples_db))
    state.record_answer(ans, {"channel": "C1", "user": "U1"})
    assert main(["gaps", "--db", examples_db, "--json"]) == 0
    [topic] = json.loads(capsys.readouterr().out)["topics"]
    assert topic["kind"] == "missing" and topic["missing"] == [said] and topic["unsure"] == 1
    assert main(["gaps", "--db", examples_db]) == 0
    assert f"the answer said: “{said}”" in capsys.readouterr().out
    page = tmp_path / "gaps.html"
    assert main(["gaps", "--db", examples_db, "--html", str(page)]) == 0
    shown = '<p class="said">The answer said: “The docs don&#x27;t cover how long'
    assert shown in page.read_text()
    guide = FieldGuide(Settings(db=examples_db), embedder=local_embedder)
    [listed] = call(build(guide, None), ("gaps", {}))
    assert listed.structured_content["topics"][0]["missing"] == [said]
    note = Note("U1", set(), topics=gaps(examples_db).topics)
    assert f"_The answer said:_ “{said}”" in json.dumps(topics_part(note), ensure_ascii=False)
    guide.close()
    state.record_answer(ans, {"channel": "D1", "user": "U2"})
    dm = state.list_answers(limit=1)[0]
    assert dm["routing"]["gaps"] == [said] and said_missing(dm) == []


def test_a_topic_names_its_section_as_answers_do(tmp_path, local_embedder, capsys):
    # a heading that names its own anchor (VitePress, MkDocs, kramdown): the topic's section is
    # named without it, and linked to it
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "shims.md").write_text(
        "---\nintent: tools\nurl: https://docs.example/shims\n---\n# Shims\n\n"
        "## Shims vs PATH {#shims-vs-path}\n\nShims are small scripts on PATH that run the"
        " version of a tool the project asks for; activation puts the tools on PATH instead.\n"
    )
    (docs / "tasks.md").write_text(
        "---\nintent: tasks\n---\n# Tasks\n\n## Running tasks\n\nRun a task with `run`.\n"
    )
    db = str(tmp_path / "gaps.db")
    index_folder(db, docs, local_embedder)
    state = SqliteState(open_db(db))
    for q in (
        "why do shims on PATH pick the wrong tool version?",
        "shims or PATH activation: which one runs my tool version?",
        "my PATH shims run the system version of the tool",
        "do shims on PATH pick the tool version of the project?",
    ):
        state.record_answer(Answer(q, q, "ABSTAIN", "…"), {"channel": "C1", "user": "U1"})
    assert main(["gaps", "--db", db, "--json"]) == 0
    (topic,) = json.loads(capsys.readouterr().out)["topics"]
    assert (topic["doc"], topic["section"]) == ("shims.md", "Shims vs PATH")
    assert topic["url"] == "https://docs.example/shims#shims-vs-path"
