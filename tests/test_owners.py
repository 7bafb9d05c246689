"""Docs owners: who owns each doc (front matter, CODEOWNERS, git), stale docs ranked by damage
and marked beside an answer's sources (CLI, Slack, MCP), gaps an owner can act on (off-topic
questions apart, questions search missed with their closest section), drafts that never touch
the docs' branch, the MCP tools, and the weekly note within Slack's limits, sent once by a fleet."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from bot.app import FieldGuide
from bot.cli import main
from bot.indexing import index_docs
from bot.settings import Settings
from bot.state.sqlite import SqliteState
from index.indexer import index_folder
from index.store import doc_records, open_db
from router.answer import Answer
from tests.conftest import ROOT, write_docs
from tests.test_freshness import Repo, git

LIMITS = (
    "---\nintent: api\nwatches: [src/limits.py]\n---\n# Rate limits\n\n"
    "Team plans get 100 requests a second, with bursts of 200.\n"
)
LOGIN = (
    "---\nintent: authentication\nreviewed: 2025-01-01\nreview_every: 90d\n---\n# Login\n\n"
    "Use tide login to sign in from the terminal; it opens the browser once.\n"
)
FRESH = "---\nintent: ops\n---\n# Pelican drills\n\nThe pelican drill rotates ferry tokens.\n"
LIMITS_Q = "How many requests a second do Team plans get?"
LOGIN_Q = "How do I sign in from the terminal with tide login?"


@pytest.fixture
def stale_repo(tmp_path, local_embedder):
    """A docs repository: limits.md watches src/limits.py, which changed after it; login.md was
    last reviewed on 2025-01-01 and is due every 90 days; CODEOWNERS names auth's owner."""
    repo = Repo(tmp_path / "repo")
    then = datetime.now(UTC) - timedelta(days=10)
    repo.commit(
        {"api/limits.md": LIMITS, "auth/login.md": LOGIN, "ops/fresh.md": FRESH,
         ".github/CODEOWNERS": "* @docs-team\nauth/ @auth-team\nops/\n"},
        then,
    )  # fmt: skip
    repo.commit({"src/limits.py": "LIMIT = 100\n"}, then + timedelta(days=2))
    settings = Settings(db=str(tmp_path / "index.db"), docs_git=str(repo.bare), docs_branch="main")
    index_docs(settings, None, local_embedder)
    return settings


def test_owners_come_from_front_matter_then_codeowners_then_git(stale_repo):
    from bot.owners import doc_owner

    docs = {d["path"]: d for d in doc_records(open_db(stale_repo.db))}
    assert doc_owner(docs["auth/login.md"]) == ("@auth-team", "CODEOWNERS")
    assert doc_owner(docs["api/limits.md"]) == ("@docs-team", "CODEOWNERS")
    # ops/ has a rule naming nobody (GitHub's: the last match wins): its last author owns it
    assert doc_owner(docs["ops/fresh.md"]) == ("t <t@example.com>", "git")
    assert docs["api/limits.md"]["watches"] == ["src/limits.py"]


def test_doctor_lists_the_docs_nobody_owns(tmp_path, local_embedder, capsys):
    docs = write_docs(
        tmp_path / "docs", {"a.md": FRESH, "b.md": "---\nowner: Ana\n---\n# B\n\nb\n"}
    )
    db = str(tmp_path / "i.db")
    index_folder(db, docs, local_embedder)  # a folder in no git working copy: no history
    main(["doctor", "--db", db, "--docs", str(docs)])
    [line] = [ln for ln in capsys.readouterr().out.splitlines() if ln.split()[1:2] == ["owners"]]
    assert line.startswith("warn") and "1 of 2 docs have no owner" in line and "a.md" in line


def ask_and_rate(guide: FieldGuide, question: str, n: int, down: int) -> None:
    for i in range(n):
        ans = guide.ask(question, context={"channel": "C1", "user": f"U{i}"})
        assert ans.sources and ans.audit_id is not None
        if i < down:
            guide.state.record_feedback(ans.audit_id, f"U{i}", "not_helpful")


def test_stale_lists_both_kinds_by_damage_and_answers_say_so(stale_repo, local_embedder, capsys):
    guide = FieldGuide(stale_repo, embedder=local_embedder)
    ask_and_rate(guide, LOGIN_Q, 3, 0)
    ask_and_rate(guide, LIMITS_Q, 2, 1)  # fewer answers, but one marked 👎: more damage
    assert main(["stale", "--db", stale_repo.db, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [s["doc"] for s in found] == ["api/limits.md", "auth/login.md"]
    assert (found[0]["cited"], found[0]["not_helpful"]) == (2, 1)
    assert (found[1]["cited"], found[1]["not_helpful"]) == (3, 0)
    assert "src/limits.py changed" in found[0]["stale"][0]
    assert found[1]["stale"] == ["review due 2025-04-01 (reviewed 2025-01-01, every 90d)"]
    assert main(["stale", "--db", stale_repo.db]) == 0
    assert "src/limits.py changed" in capsys.readouterr().out
    # the CLI's answer says so beside the source
    for q, why in ((LIMITS_Q, "src/limits.py changed"), (LOGIN_Q, "review due 2025-04-01")):
        assert main(["ask", "--db", stale_repo.db, q]) == 0
        out = capsys.readouterr().out
        assert f"⚠ stale: {why}" in out, out
    # Slack's sources and MCP's
    from bot.mcp_server import build
    from bot.slack.slack_format import plain_pieces, sources_markdown
    from tests.test_mcp import call

    ans = guide.ask(LIMITS_Q)
    assert "stale: src/limits.py changed" in sources_markdown(ans.sources)
    assert "stale: src/limits.py changed" in "".join(plain_pieces(ans))
    (asked,) = call(build(guide, None), ("ask", {"question": LIMITS_Q}))
    assert "src/limits.py changed" in asked.structured_content["sources"][0]["stale"]
    guide.close()


def test_a_fresh_doc_is_not_stale():
    from bot.owners import stale_reasons

    today = datetime.now(UTC).date()
    doc: dict = {"reviewed": today.isoformat(), "review_every": "12w", "updated": "2020-01-01"}
    assert stale_reasons(doc) == []
    doc["watched"] = {"src/x.py": "2020-01-01T00:00:00+00:00"}  # same commit as the doc: fresh
    doc["updated"] = "2020-01-01T00:00:00+00:00"
    assert stale_reasons(doc) == []


# -- gaps an owner can act on ----------------------------------------------------------------------


def asked_trail(db: str, embedder, questions: list[str]) -> None:
    guide = FieldGuide(Settings(db=db), embedder=embedder)
    for i, q in enumerate(questions):
        guide.ask(q, context={"channel": "C1", "user": f"U{i % 5}"})
    guide.close()


def test_off_topic_questions_never_ask_to_be_written_up(examples_db, local_embedder, capsys):
    off = [json.loads(line)["question"] for line in (ROOT / "examples/offtopic.jsonl").open()]
    asked_trail(examples_db, local_embedder, off)
    assert main(["gaps", "--db", examples_db, "--json", "--top", "50"]) == 0
    topics = json.loads(capsys.readouterr().out)["topics"]
    assert sum(t["count"] for t in topics) == len(off)
    assert {t["kind"] for t in topics} == {"offtopic"}, [
        (t["kind"], t["questions"]) for t in topics
    ]
    assert main(["gaps", "--db", examples_db, "--top", "50"]) == 0
    out = capsys.readouterr().out
    assert "write this up" not in out and "off-topic for these docs" in out


def test_a_question_search_missed_is_shown_as_such_with_its_closest_section(
    examples_db, local_embedder, capsys
):
    """The error table has TW-1016: a refusal of a question about it (one search missed, every
    name it holds in the docs) is no missing doc."""
    state = SqliteState(open_db(examples_db))
    question = "What does TW-1016 mean?"
    state.record_answer(Answer(question, question, "ABSTAIN", "…"), {"channel": "C1", "user": "U1"})
    assert main(["gaps", "--db", examples_db, "--json"]) == 0
    [topic] = json.loads(capsys.readouterr().out)["topics"]
    assert topic["kind"] == "missed" and topic["doc"] == "troubleshooting/error-codes.md"
    assert "search missed it" in topic["action"]
    assert main(["gaps", "--db", examples_db]) == 0
    out = capsys.readouterr().out
    assert "closest section troubleshooting/error-codes.md" in out and "write this up" not in out


# -- drafts never touch the docs' branch -----------------------------------------------------------


def draft_row(guide: FieldGuide, question: str) -> dict:
    from router.answer import Trace

    hit = {"id": "x", "doc": "api/limits.md", "heading_path": ["Rate limits"], "bm25": 0,
           "vector": 0, "score": 0}  # fmt: skip
    ans = Answer(question, question, "ABSTAIN", "…", trace=Trace(hits=[hit]))
    aid = guide.state.record_answer(ans, {"channel": "C1", "user": "U1", "thread_ts": "1.1"})
    assert aid is not None
    row = guide.state.get_answer(aid)
    assert row is not None
    return row


def test_a_draft_the_token_may_not_push_is_kept_as_a_patch(tmp_path, local_embedder):
    from bot.drafts import make_draft
    from tests.standins.githttp import GitHttpServer

    repo = Repo(tmp_path / "srv")
    repo.commit({"api/limits.md": LIMITS})
    server = GitHttpServer(repo.bare.parent, token="read-only-token", push=False)
    try:
        settings = Settings(
            db=str(tmp_path / "i.db"), docs_git=f"{server.url}/docs.git",
            docs_git_token="read-only-token", docs_branch="main",
        )  # fmt: skip
        index_docs(settings, None, local_embedder)
        guide = FieldGuide(settings, embedder=local_embedder)
        main_before = git("rev-parse", "main", cwd=repo.bare)
        row = draft_row(guide, "Is there a burst allowance on the Free plan?")
        draft = make_draft(settings, row, "Rate limits", "api/limits.md", ["Free: no bursts."])
        assert not draft.pushed and draft.branch.startswith("fieldguide/draft-")
        assert "+## Is there a burst allowance on the Free plan?" in draft.patch
        assert "+Free: no bursts." in draft.patch
        heads = git("for-each-ref", "--format=%(refname:short)", "refs/heads", cwd=repo.bare)
        assert heads.split() == ["main"] and git("rev-parse", "main", cwd=repo.bare) == main_before
        # the index's own working copy is untouched: it still reads main
        assert "Free: no bursts" not in (tmp_path / "i.db.docs" / "api/limits.md").read_text()
        guide.close()
    finally:
        server.close()


def test_a_docs_folder_is_never_written_a_draft_is_a_patch(tmp_path, local_embedder):
    from bot.drafts import DraftError, checked_branch, make_draft

    docs = write_docs(tmp_path / "docs", {"api/limits.md": LIMITS})
    settings = Settings(db=str(tmp_path / "i.db"), docs=str(docs))
    index_folder(settings.db, docs, local_embedder)
    guide = FieldGuide(settings, embedder=local_embedder)
    row = draft_row(guide, "What about bursts?")
    draft = make_draft(settings, row, "Rate limits", "api/limits.md", ["Bursts of 200."])
    assert draft.branch == "" and "+Bursts of 200." in draft.patch
    assert (docs / "api/limits.md").read_text() == LIMITS
    for name in ("main", "master", "docs-main", "release"):
        with pytest.raises(DraftError):
            checked_branch(name, "docs-main")
    guide.close()


def test_the_offline_draft_adds_a_subsection_inside_the_section_only():
    from bot.drafts import changed_doc

    text = "# Doc\n\n## A\n\nalpha\n\n```\n## not a heading\n```\n\n### A.1\n\nx\n\n## B\n\nbeta\n"
    new = changed_doc(text, "A", "What about gamma?", ["Gamma is 3."])
    assert new.index("### What about gamma?") < new.index("## B")
    assert new.index("### A.1") < new.index("### What about gamma?")
    assert new.endswith("## B\n\nbeta\n") and "Gamma is 3." in new


# -- MCP ------------------------------------------------------------------------------------------


def test_mcp_gaps_and_stale_docs_are_read_only_and_scoped(tmp_path, local_embedder):
    from bot.mcp_server import build, deployment_scope
    from tests.test_mcp import call

    docs = write_docs(
        tmp_path / "docs",
        {"alpha/limits.md": LIMITS.replace("intent: api", "intent: alpha"),
         "beta/login.md": LOGIN.replace("intent: authentication", "intent: beta")},
    )  # fmt: skip
    scopes = tmp_path / "scopes.yaml"
    scopes.write_text('channels:\n  "#alpha-team": {intents: [alpha]}\n')
    settings = Settings(db=str(tmp_path / "s.db"), scopes=str(scopes), mcp_scope="#alpha-team")
    index_folder(settings.db, docs, local_embedder)
    guide = FieldGuide(settings, embedder=local_embedder)
    for q, channel in (("Is there a Terraform provider?", "C1"), ("Secret Kotlin SDK?", "D9")):
        guide.ask(q, context={"channel": channel, "user": "U1"})
    everything = call(build(guide, None), ("gaps", {}), ("stale_docs", {}))
    scoped = call(build(guide, deployment_scope(guide)), ("gaps", {}), ("stale_docs", {}))
    gaps, stale = (r.structured_content for r in everything)
    assert [s["doc"] for s in stale["docs"]] == ["beta/login.md"]
    assert gaps["unanswered"] == 2 and "Secret Kotlin" not in json.dumps(gaps)  # a DM's question
    alpha_gaps, alpha_stale = (r.structured_content for r in scoped)
    assert alpha_stale["docs"] == [] and alpha_stale["scope"] == "#alpha-team"
    assert all(t["doc"].startswith("alpha/") for t in alpha_gaps["topics"])
    guide.close()


# -- the weekly note -------------------------------------------------------------------------------

OWNERS = ("U0ANA", "U0BEN", "U0CAT")


def owned_docs(tmp_path) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {}
    for n, owner in enumerate(OWNERS):
        for k in range(3):
            files[f"team{n}/doc{k}.md"] = (
                f"---\nintent: team{n}\nowner: {owner}\nreviewed: 2020-01-01\nreview_every: 30d\n"
                f"---\n# Widget {n}-{k}\n\nWidget {n}-{k} spins at {k + 1}00 rpm in zone {n}.\n"
            )
    return files


def test_the_weekly_note_for_three_owners_is_sent_once_by_a_fleet_of_two(
    tmp_path, local_embedder, pg_url
):
    import shutil

    from slack_sdk import WebClient

    from bot.slack.owners import send_weekly
    from tests.standins.slack import SlackMock

    docs = write_docs(tmp_path / "docs", owned_docs(tmp_path))
    template = tmp_path / "template.db"
    index_folder(template, docs, local_embedder)
    mock = SlackMock()
    replicas = []
    for name in ("a", "b"):
        db = tmp_path / f"{name}.db"
        shutil.copyfile(template, db)
        settings = Settings(db=str(db), docs=str(docs), database_url=pg_url, doc_owners="on")
        replicas.append(FieldGuide(settings, embedder=local_embedder))
    asker = replicas[0]
    long = " and also ".join(["why does the widget spin so fast in the night"] * 12)
    for i in range(150):  # a busy week: more than any note can list
        n = i % 3
        q = [f"How fast does widget {n}-{i % 3} spin?", f"Widget {n}-1 colour? {long}"][i % 2]
        ans = asker.ask(q, context={"channel": "C1" if i % 5 else "D1", "user": f"U{i}"})
        if ans.audit_id and i % 4 == 0:
            asker.state.record_feedback(ans.audit_id, f"U{i}", "not_helpful")
    now = datetime.now(UTC)  # FIELDGUIDE_WEEKLY_NOTE=mon: due on any day of the week
    clients = [WebClient(token="xoxb-test", base_url=mock.url + "/api/") for _ in replicas]
    sent = [0, 0]

    def send(k: int) -> None:
        sent[k] = send_weekly(clients[k], replicas[k], now)

    threads = [threading.Thread(target=send, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    posts = [p for p in mock.posts() if p["channel"] in OWNERS]
    assert sorted(p["channel"] for p in posts) == sorted(OWNERS) and sum(sent) == 3
    texts = []
    for p in posts:  # the stand-in refuses blocks past Slack's limits: these passed
        blocks = json.loads(p["blocks"]) if isinstance(p["blocks"], str) else p["blocks"]
        assert 3 < len(blocks) <= 50
        assert all(len(b.get("text", {}).get("text", "")) <= 3000 for b in blocks)
        texts.append(text := json.dumps(blocks, ensure_ascii=False))
        assert "Stale docs" in text and "review due" in text and "marked 👎" in text
    assert any("more: fieldguide audit" in t for t in texts)  # the rest counted, not listed
    assert any("(asked in a direct message)" in t for t in texts)  # counted, never quoted
    # the same week again: nobody gets a second note
    assert send_weekly(clients[0], replicas[0], now) == 0
    for r in replicas:
        r.close()
    mock.close()


def test_a_cli_reindex_that_changes_docs_replays_the_open_topics(tmp_path, local_embedder, capsys):
    """`fieldguide index` after a fix: the topic's questions asked again, apart from the audit."""
    import shutil

    from tests.conftest import EXAMPLES
    from tests.standins.gap_topics import TOPICS

    docs = shutil.copytree(EXAMPLES, tmp_path / "docs")
    db = str(tmp_path / "i.db")
    assert main(["index", str(docs), "--db", db, "--quiet"]) == 0
    asked_trail(db, local_embedder, TOPICS["crypto"])
    before = len(FieldGuide(Settings(db=db)).state.list_answers(None, None, 1000))
    faq = docs / "troubleshooting" / "faq.md"
    faq.write_text(
        faq.read_text()
        + "\n## Can I pay with cryptocurrency?\n\nYes: Bitcoin (BTC), Ethereum (ETH) and USDC"
        " stablecoin payments are accepted for invoices on every plan, Team included, from any"
        " crypto wallet.\n"
    )
    capsys.readouterr()
    assert main(["index", str(docs), "--db", db, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "answered 0/10 before" in out and "— fixed" in out, out
    guide = FieldGuide(Settings(db=db))
    assert len(guide.state.list_answers(None, None, 1000)) == before  # replays kept apart
    [topic] = guide.state.loop.topics()
    assert topic["state"] == "fixed" and len(guide.state.loop.replays(topic["id"])) == 10


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_a_hand_off_is_found_by_either_of_its_threads(where, tmp_path, request):
    """The asker's thread, or the thread of the hand-off's message in an owners' channel."""
    from bot.state import State

    state: State
    if where == "postgres":
        from bot.state.postgres import PostgresState

        state = PostgresState(request.getfixturevalue("pg_url"))
    else:
        from bot.state.sqlite import SqliteState

        state = SqliteState(open_db(tmp_path / "i.db"))
    try:
        ans = Answer("q", "q", "ABSTAIN", "…")
        aid = state.record_answer(ans, {"channel": "C1", "user": "U1", "thread_ts": "17.1"})
        assert aid is not None and state.claim_handoff(aid, "U1", "#docs", "#docs") is None
        state.loop.note_posted(aid, "C0DOCS", "18.5")
        for channel, ts in (("C1", "17.1"), ("C0DOCS", "18.5")):
            found = state.loop.handoff_in_thread(channel, ts)
            assert found == {"answer_id": aid, "owner": "#docs", "target": "#docs", "user": "U1"}
        assert state.loop.handoff_in_thread("C0DOCS", "17.1") is None
        assert state.loop.claim("offer", str(aid)) and not state.loop.claim("offer", str(aid))
        state.loop.release("offer", str(aid))
        assert state.loop.claim("offer", str(aid))
    finally:
        state.close()
