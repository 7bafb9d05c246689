"""What the third attack found (issue 35), each row held by a test that failed before its fix:
a scoped question reading only its scope's words, owners from the deployment, credentials in git
URLs, deceptive links, questions during reindexes, calibration's inputs, /healthz, a size cap on
docs, failing pulls shown as failing, hand-offs by the asker only, malformed signed bodies."""

from __future__ import annotations

import json

import pytest

from index.indexer import index_folder
from router.engine import Engine, Scope
from router.pipeline import Pipeline
from tests.conftest import write_docs

# -- 1. a scoped question reads its scope's words only ------------------------------------------

ALPHA_KEYS = (
    "---\nintent: alpha\n---\n# Signing keys\n\n"
    "Rotate the signing key every ninety days with the key rotation job. The rotation job"
    " writes the new key to the vault and retires the old key after one day.\n"
)
ALPHA_DEPLOY = (
    "---\nintent: alpha\n---\n# Deploys\n\n"
    "Deploys run from the release branch. A deploy waits for the health checks to pass.\n"
)
ALPHA_HANDOVER = (  # a doc of alpha's folder that joins bravo's intent
    "---\nintent: bravo\n---\n# Handover to bravo\n\nAlpha hands incidents to bravo on call.\n"
)
BRAVO_VAULT = (
    "---\nintent: bravo\n---\n# Vault access\n\n"
    "The zephyrquill passphrase opens the bravo vault. Rotate the zephyrquill key with the"
    " bravo key rotation job.\n"
)


@pytest.fixture(scope="module")
def two_teams(tmp_path_factory, local_embedder) -> str:
    root = tmp_path_factory.mktemp("teams")
    docs = write_docs(
        root / "docs",
        {
            "alpha/keys.md": ALPHA_KEYS,
            "alpha/deploys.md": ALPHA_DEPLOY,
            "alpha/handover.md": ALPHA_HANDOVER,
            "bravo/vault.md": BRAVO_VAULT,
        },
    )
    db = str(root / "index.db")
    index_folder(db, docs, local_embedder)
    return db


def test_a_scoped_question_reads_only_its_scopes_words(two_teams, local_embedder):
    pipeline = Pipeline(Engine(two_teams, local_embedder))
    alpha = Scope("#alpha", folders=("alpha/",))
    # unscoped, the typo is read as the other team's word: the whole index knows it
    everywhere = pipeline.answer("how do I rotate the zephyrqill key")
    assert 'read "zephyrqill" as "zephyrquill"' in everywhere.trace.notes
    # scoped to alpha, nothing of bravo's vocabulary shows: no correction to it, and bravo's word
    # is as unknown to the refusal as a word no doc holds
    typo = pipeline.answer("how do I rotate the zephyrqill key", scope=alpha)
    assert "zephyrquill" not in json.dumps(typo.to_json() | {"notes": typo.trace.notes})
    theirs = pipeline.answer("how do I rotate the zephyrquill key", scope=alpha)
    nobodys = pipeline.answer("how do I rotate the qorvanthex key", scope=alpha)
    assert theirs.decision == nobodys.decision == "ABSTAIN"
    assert "zephyrquill" in theirs.trace.evidence["unknown_words"]
    assert theirs.text == nobodys.text.replace("qorvanthex", "zephyrquill")
    assert all(h["doc"].startswith("alpha/") for h in theirs.trace.hits)


def test_claude_routes_a_scoped_question_on_its_scopes_headings_only(two_teams, local_embedder):
    import anthropic

    from tests.standins.claude import FakeClaude
    from tests.standins.server import StubServer

    stub = StubServer()
    try:
        fake = FakeClaude(intents=[{"intent": "bravo", "confidence": 0.9}])
        stub.route("/v1/messages", fake)
        client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
        haiku = "claude-haiku-4-5"  # model ids the Messages API stand-in knows
        models = {
            "condense": haiku,
            "extract": haiku,
            "answer": "claude-sonnet-4-6",
            "check": haiku,
        }
        pipeline = Pipeline(Engine(two_teams, local_embedder, client, haiku), client, models)
        pipeline.answer("Who takes incidents on call?", scope=Scope("#alpha", folders=("alpha/",)))
        [classify] = fake.calls("classify")
        taxonomy = json.dumps(classify)
        assert "Handover to bravo" in taxonomy  # bravo's doc inside alpha's folder
        assert "Vault access" not in taxonomy  # bravo's own docs: outside the scope
    finally:
        stub.close()


# -- 2. owners of an intent come from the deployment, not from a doc -----------------------------

INTENTS_YAML = "alpha: {description: alpha's docs}\nbravo: {description: vault, owner: U0BRAVO}\n"
EVIL = (  # under alpha's folder, joining bravo's intent and naming its author as owner
    "---\nintent: bravo\nowner: U0EVIL\n---\n# Vault recovery\n\n"
    "Vault recovery is handled by the recovery team on request.\n"
)


@pytest.fixture
def enrolled_db(tmp_path, local_embedder) -> str:
    docs = write_docs(
        tmp_path / "docs",
        {
            "alpha/keys.md": ALPHA_KEYS,
            "alpha/recovery.md": EVIL,
            "bravo/vault.md": BRAVO_VAULT,
            "intents.yaml": INTENTS_YAML,
        },
    )
    db = str(tmp_path / "index.db")
    index_folder(db, docs, local_embedder)
    return db


def record_bravo_question(state, question: str, doc: str, user: str = "U1") -> int:
    """An unanswered DM question routed to bravo, whose first section looked at is in `doc`."""
    from router.answer import Answer, Trace

    hit = {"id": "x", "doc": doc, "heading_path": ["H"], "bm25": 0, "vector": 0, "score": 0}
    trace = Trace(route={"intents": [{"intent": "bravo", "score": 1}]}, hits=[hit])
    ans = Answer(question, question, "ABSTAIN", "…", trace=trace)
    aid = state.record_answer(ans, {"channel": "D1", "user": user, "thread_ts": "1.1"})
    assert aid is not None
    return aid


def home_text(h, user: str, event_id: str) -> str:
    from tests.standins.slack_harness import wait

    h.mock.home_views.pop(user, None)
    h.event({"type": "app_home_opened", "user": user, "tab": "home"}, event_id)
    return json.dumps(wait(lambda: h.mock.home_views.get(user), what="the Home tab")["blocks"])


def test_a_doc_cannot_enrol_its_author_as_owner_of_an_intent(make_harness, enrolled_db):
    from tests.standins.slack_harness import wait

    h = make_harness(db=enrolled_db)
    question = "what is the vault passphrase"
    aid = record_bravo_question(h.state, question, "alpha/recovery.md")
    # the doc's author sees no figures and no gaps of bravo; bravo's owner (intents.yaml) does
    evil = home_text(h, "U0EVIL", "EvO1")
    assert "passphrase" not in evil and "questions ·" not in evil
    owner = home_text(h, "U0BRAVO", "EvO2")
    assert "(your intents: bravo)" in owner and "passphrase" in owner
    # by default a doc's own owner is not honoured either: the hand-off goes to bravo's owner
    h.click("U1", str(aid), action_id="ask_person")
    [sent] = wait(lambda: [p for p in h.mock.posts() if p["channel"].startswith("U0")], what="DM")
    assert sent["channel"] == "U0BRAVO"


def test_doc_owners_get_their_docs_hand_offs_where_the_deployment_allows(make_harness, enrolled_db):
    from tests.standins.slack_harness import wait

    h = make_harness(db=enrolled_db, doc_owners="on")
    aid = record_bravo_question(h.state, "who recovers the vault", "alpha/recovery.md")
    h.click("U1", str(aid), action_id="ask_person")
    [sent] = wait(lambda: [p for p in h.mock.posts() if p["channel"].startswith("U0")], what="DM")
    assert sent["channel"] == "U0EVIL"  # the doc's own hand-off: allowed here
    assert "questions ·" not in home_text(h, "U0EVIL", "EvO3")  # still no intent's figures


# -- 3. credentials in a git URL, reserved characters and all ------------------------------------


def test_credentials_with_reserved_characters_are_split_off_and_decoded():
    from index.gitsource import split_credentials

    assert split_credentials("http://alice:tok#SECRET/123@host/docs.git")[:3] == (
        "http://host/docs.git",
        "alice",
        "tok#SECRET/123",
    )
    assert split_credentials("https://alice:tok%23SECRET@host:8443/d.git")[:3] == (
        "https://host:8443/d.git",
        "alice",
        "tok#SECRET",
    )
    # the user part ends at the authority's last '@'
    found = split_credentials("https://bob:p@ss@host/d.git")[:3]
    assert found == ("https://host/d.git", "bob", "p@ss")
    # an '@' in the path, with no user part, is no credential
    assert split_credentials("https://host/team@corp/docs.git")[:3] == (
        "https://host/team@corp/docs.git",
        "",
        "",
    )


@pytest.mark.parametrize("written", ["tok#SECRET/123", "tok%23SECRET%2F123"])
def test_a_password_with_reserved_characters_authenticates_and_is_never_shown(
    written, tmp_path, monkeypatch, capsys, caplog
):
    import logging

    from bot.cli import main
    from tests.standins.githttp import GitHttpServer
    from tests.test_freshness import Repo, docs_reindex

    repo = Repo(tmp_path)
    repo.commit({"auth/login.md": ALPHA_KEYS})
    server = GitHttpServer(repo.bare.parent, token="tok#SECRET/123", user="alice")
    caplog.set_level(logging.DEBUG)
    try:
        db = str(tmp_path / "index.db")
        host = server.url.removeprefix("http://")
        monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", f"http://alice:{written}@{host}/docs.git")
        assert main(["index", "--db", db, "--quiet"]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert f"Indexed {server.url}/docs.git (branch default)" in out
        assert {r["user"] for r in server.requests} == {"alice"}  # every request authenticated
        # unreachable now: the index error, doctor and /docs-reindex's reply say so without it
        unreachable = f"http://alice:{written}@127.0.0.1:9/docs.git"
        monkeypatch.setenv("FIELDGUIDE_DOCS_GIT", unreachable)
        assert main(["index", "--db", db, "--quiet", "--replace"]) == 2
        assert main(["doctor", "--db", db]) == 1
        from bot.settings import Settings

        said = docs_reindex(Settings(db=db, docs_git=unreachable, git_timeout=20))
        shown = capsys.readouterr()
        text = shown.out + shown.err + said + caplog.text
        assert "could not pull http://127.0.0.1:9/docs.git" in text
        stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
        for secret in ("SECRET", "tok#", "tok%23", "alice:"):
            assert secret not in text
        assert b"SECRET" not in stored and b"alice" not in stored
    finally:
        server.close()


# -- 4. no link from the docs or the model reaches Slack, nested brackets and all ----------------

DECEPTIVE = [
    "[the recovery console [official]](//evil.example/recover)",
    "[a [b [c]]](https://evil.example/x)",
    "![logo [x]](//evil.example/p.png)",
    "[label](<//evil.example/a b>)",
    "[ref [x]][r]\n\n[r]: //evil.example/ref",
    "[x](//evil.example/a_(b))",
    "[x\\\\](//evil.example/b)",  # an escaped backslash, then the `]` that closes the label
    "see [r] below\n\n> [r]: //evil.example/quoted\n\nend",  # a definition in a blockquote
    "[one]\n[two]: //evil.example/list\n\n- [two]: //evil.example/item\n\n[two]",
]


def links_in(markdown: str) -> list[str]:
    """The link and image targets CommonMark reads in `markdown` (as Slack's markdown block)."""
    from markdown_it import MarkdownIt

    found = []
    for token in MarkdownIt("commonmark").parse(markdown):
        for t in token.children or []:
            if t.type in ("link_open", "image"):
                found.append(str(t.attrs.get("href") or t.attrs.get("src")))
    return found


@pytest.mark.parametrize("text", DECEPTIVE)
def test_no_link_of_the_text_reaches_the_markdown_block(text):
    from bot.slack.slack_format import StreamSanitizer, answer_messages
    from router.answer import Answer

    ans = Answer("q", "q", "ANSWER", f"See {text} for the steps.")
    [[block, *_]] = answer_messages(ans, None)
    assert not links_in(block["text"]), block["text"]
    # streamed a few characters at a time, as Claude's deltas arrive
    s = StreamSanitizer()
    streamed = "".join(s.feed(ans.text[i : i + 3]) for i in range(0, len(ans.text), 3)) + s.flush()
    assert not links_in(streamed), streamed


def test_a_docs_deceptive_link_is_no_link_in_slack(make_harness, tmp_path, local_embedder):
    from tests.standins.slack_harness import answer_in, mention

    doc = (
        "---\nintent: ops\n---\n# Account recovery\n\n"
        "To recover a locked account, open [the recovery console [official]]"
        "(//evil.example/recover) and follow the recovery steps shown there.\n"
    )
    docs = write_docs(tmp_path / "docs", {"ops/recovery.md": doc})
    db = str(tmp_path / "index.db")
    index_folder(db, docs, local_embedder)
    h = make_harness(db=db)
    h.event(mention("How do I recover a locked account?"), "EvL1")
    [answer] = answer_in(h.mock, "C1")
    text = "\n".join(b["text"] for b in answer["blocks"] if b["type"] == "markdown")
    assert "recovery console" in text
    assert "evil.example" not in " ".join(links_in(text)), text


# -- 5. questions during reindexes (SQLite) --------------------------------------------------------


def test_questions_during_reindexes_are_all_answered_and_recorded(tmp_path, local_embedder):
    """A reindex committing every half second (twice the attack's /docs-reindex rate, and a doc
    rewritten before each, so the chunks a question found leave the index) while three threads
    ask about that doc: every question gets its answer, none raises, and every answer has its
    audit row."""
    import threading
    import time

    from bot.app import FieldGuide
    from bot.settings import Settings
    from index.store import open_db

    def rotation(n: int) -> str:
        return (
            f"---\nintent: ops\n---\n# Key rotation\n\nRotate the signing key every {n} days with"
            f" the rotation job (revision {n}). The job retires the old key after one day.\n"
        )

    docs = write_docs(
        tmp_path / "docs", {"ops/rotation.md": rotation(0), "ops/deploy.md": ALPHA_DEPLOY}
    )
    db = str(tmp_path / "index.db")
    index_folder(db, docs, local_embedder)
    guide = FieldGuide(Settings(db=db), embedder=local_embedder)
    guide.ask("warm up")
    stop = threading.Event()
    errors: list[str] = []
    answered: list[int | None] = []
    reindexes = 0

    def reindex() -> None:
        nonlocal reindexes
        n = 1
        while not stop.is_set():
            (docs / "ops" / "rotation.md").write_text(rotation(n))
            try:
                index_folder(db, docs, local_embedder)
                reindexes += 1
            except Exception as e:  # noqa: BLE001 - counted: the test says which
                errors.append(f"reindex: {type(e).__name__}: {e}")
            n += 1
            stop.wait(0.5)

    def ask() -> None:
        while not stop.is_set():
            try:
                ans = guide.ask("How often is the signing key rotated?")
                answered.append(ans.audit_id)
            except Exception as e:  # noqa: BLE001
                errors.append(f"question: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=reindex)] + [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(8)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert reindexes >= 5 and len(answered) >= 20, (reindexes, len(answered))
    assert errors == [], sorted({e[:40] for e in errors})
    assert None not in answered  # every answer recorded
    with open_db(db).conn as conn:
        (rows,) = conn.execute("SELECT count(*) FROM answers").fetchone()
    assert rows == len(answered) + 1  # and the warm-up


def test_audit_rows_wait_for_another_writer_instead_of_being_lost(examples_db):
    """Another connection committing write after write (an index run's) while answers are
    recorded: each audit write waits its turn; none is lost to "database is locked"."""
    import threading
    import time

    from bot.state.sqlite import SqliteState
    from index.store import open_db
    from router.answer import Answer

    state = SqliteState(open_db(examples_db))
    stop = threading.Event()

    def writer() -> None:
        conn = open_db(examples_db).conn
        n = 0
        while not stop.is_set():
            with conn:
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('busy', ?)", [str(n)])
                time.sleep(0.002)
            time.sleep(0.003)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        ids = [state.record_answer(Answer(f"q{i}", "q", "ANSWER", "…"), {}) for i in range(100)]
    finally:
        stop.set()
        thread.join()
    assert None not in ids and len(set(ids)) == 100


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


# -- 8. /healthz: localhost by default, a connection cap, idle connections closed -----------------

from tests.test_operations import replica, slack  # noqa: E402, F401 - slack: a fixture


def reachable(host: str, port: int) -> bool:
    import socket

    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False


def test_the_health_port_binds_localhost_unless_told(slack, examples_db, tmp_path):  # noqa: F811
    import shutil

    mock, _ = slack
    spare = tmp_path / "spare.db"
    shutil.copyfile(examples_db, spare)
    bot = replica(tmp_path, examples_db, mock.url, socket=True)
    try:
        bot.wait_ready()
        assert bot.health()[0] == 200
        # 127.0.0.2 is this machine too, but not the address the port is bound to
        assert not reachable("127.0.0.2", bot.port)
    finally:
        bot.stop()
    (tmp_path / "other").mkdir()
    bot = replica(
        tmp_path / "other", str(spare), mock.url, socket=True, FIELDGUIDE_HEALTH_HOST="0.0.0.0"
    )
    try:
        bot.wait_ready()
        assert reachable("127.0.0.2", bot.port)
    finally:
        bot.stop()


def test_half_sent_probes_hold_no_threads_and_are_closed(examples_db, local_embedder):
    import socket
    import threading
    import time
    from urllib.request import urlopen

    from bot.health import HEALTH_CONNECTIONS, HEALTH_IDLE_SECONDS, Health, serve_health

    health = Health(Engine(examples_db, local_embedder))
    health.slack = lambda: (True, "test")
    server = serve_health(health, 0)
    port = server.effective_port
    threads = threading.active_count()
    half = []
    try:
        for _ in range(3 * HEALTH_CONNECTIONS):  # the attack's 800, at this cap's scale
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the rest
            half.append(s)
        time.sleep(1)
        assert threading.active_count() <= threads + 1, "a thread per connection"
        # each is closed once idle; a probe is answered once the cap has room again
        started = time.monotonic()
        with urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
            assert r.status == 200 and json.loads(r.read())["index"]["ok"]
        assert time.monotonic() - started < 4 * (HEALTH_IDLE_SECONDS + 1) + 5

        def closed(s: socket.socket) -> bool:
            s.settimeout(2 * HEALTH_IDLE_SECONDS + 2)
            try:
                return s.recv(100) == b""
            except ConnectionResetError:
                return True
            except TimeoutError:
                return False

        assert all(closed(s) for s in half)
    finally:
        for s in half:
            s.close()
        server.close()


# -- 9. a size cap on docs -------------------------------------------------------------------------


def test_a_doc_over_the_size_cap_is_skipped_with_its_reason(tmp_path, monkeypatch, capsys):
    import time

    from bot.cli import main

    docs = write_docs(
        tmp_path / "docs", {"alpha/keys.md": ALPHA_KEYS, "alpha/deploys.md": ALPHA_DEPLOY}
    )
    paragraph = "The rotation job writes the new key to the vault and retires the old one.\n\n"
    with open(docs / "alpha" / "huge.md", "w") as f:
        f.write("# Huge\n\n")
        for _ in range(30 * 1024 * 1024 // len(paragraph)):  # 30 MB
            f.write(paragraph)
    db = str(tmp_path / "index.db")
    started = time.monotonic()
    assert main(["index", str(docs), "--db", db, "--json"]) == 0
    took = time.monotonic() - started
    summary = json.loads(capsys.readouterr().out)
    [skipped] = summary["skipped"]
    assert skipped["path"] == "alpha/huge.md"
    assert "30.0 MB" in skipped["reason"] and "FIELDGUIDE_MAX_DOC_MB" in skipped["reason"]
    assert summary["added"] == 2 and took < 30
    # the cap is a setting: lowered under the small docs' size, they are skipped too, and kept
    between = (len(ALPHA_DEPLOY) + len(ALPHA_KEYS)) / 2 / 1024 / 1024
    monkeypatch.setenv("FIELDGUIDE_MAX_DOC_MB", f"{between:.7f}")
    (docs / "alpha" / "keys.md").write_text(ALPHA_KEYS + "\nChanged.\n")
    assert main(["index", str(docs), "--db", db, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {s["path"] for s in summary["skipped"]} == {"alpha/huge.md", "alpha/keys.md"}
    assert summary["removed"] == 0 and summary["chunks"] > 0  # its last good version stays
    # doctor says so too, without reading it
    main(["doctor", "--db", db, "--docs", str(docs)])
    assert "would be skipped: alpha/huge.md: 30.0 MB, over the" in capsys.readouterr().out


# -- 10. a failing pull is shown as failing, and since when --------------------------------------


def test_failing_pulls_show_in_status_and_app_home_with_since_when(tmp_path, local_embedder):
    from bot.settings import Settings
    from bot.slack.home import home_view
    from bot.slack.reindex import Reindexer
    from bot.state.sqlite import SqliteState
    from index.store import open_db
    from tests.test_freshness import Repo, lock_only

    repo = Repo(tmp_path)
    repo.commit({"alpha/keys.md": ALPHA_KEYS})
    db = str(tmp_path / "index.db")
    settings = Settings(db=db, docs_git=str(repo.bare), git_timeout=20)
    reindexer = Reindexer(settings, local_embedder, lock_only())
    assert reindexer.refresh() is not None
    assert "(ok)" in reindexer.status()
    repo.bare.rename(tmp_path / "moved.git")  # the repository is gone
    assert reindexer.refresh() is None
    with open_db(db).conn as conn:
        (since,) = conn.execute("SELECT max(started) FROM runs").fetchone()
    assert reindexer.refresh() is None and reindexer.refresh() is None
    status = reindexer.status()
    assert "(ok)" not in status and f"failing since {since}" in status
    assert "could not pull" in status and "last good run" in status
    engine = Engine(db, local_embedder)
    home = json.dumps(home_view("UADMIN", True, SqliteState(open_db(db)), engine))
    assert "*ok*" not in home and "*failing*" in home and f"since {since}" in home
    assert "could not pull" in home
    with open_db(db).conn as conn:  # one row for the whole streak, not one per try
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    (tmp_path / "moved.git").rename(repo.bare)
    assert reindexer.refresh() is not None
    assert "(ok)" in reindexer.status() and "failing" not in reindexer.status()


# -- 11. only the asker (or an admin) hands an answer on; ids are checked ------------------------


def test_only_the_asker_or_an_admin_can_hand_an_answer_on(make_harness, enrolled_db, caplog):
    import logging

    from tests.standins.slack_harness import wait

    caplog.set_level(logging.WARNING)
    h = make_harness(db=enrolled_db)
    state = h.state
    private = record_bravo_question(state, "my private vault question", "bravo/vault.md", user="U1")
    h.click("U2", str(private), action_id="ask_person")  # someone else's DM answer
    [note] = wait(lambda: [p for p in ephemerals(h) if p["user"] == "U2"], what="U2 told")
    assert "only the person who asked" in note["text"].lower()
    assert not [p for p in h.mock.posts() if "private vault" in (p.get("text") or "")]
    assert state.get_answer(private)["handoff"] is None
    # a 👎 from someone else offers them nothing to press
    h.click("U2", f"not_helpful:{private}")
    h.click("UADMIN", str(private), action_id="ask_person")  # an admin may
    [sent] = wait(lambda: [p for p in h.mock.posts() if p["channel"] == "U0BRAVO"], what="a DM")
    assert "private vault" in sent["text"] and "<@UADMIN>" in sent["text"]
    assert not [p for p in ephemerals(h) if p["user"] == "U2" and p.get("blocks")]
    # ids that are no answer id: ignored, never an error
    for value in ("9" * 40, "²", "-1", "0x10", " 1", "1" * 19):
        h.click("U1", value, action_id="ask_person")
        h.click("U1", f"helpful:{value}")
    mine = record_bravo_question(state, "mine", "bravo/vault.md", user="U1")
    h.click("U1", str(mine), action_id="ask_person")
    wait(lambda: len([p for p in h.mock.posts() if p["channel"] == "U0BRAVO"]) == 2, what="2nd")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def ephemerals(h) -> list[dict]:
    return [r.form for r in h.mock.calls("/api/chat.postEphemeral")]


# -- 12. signed but malformed bodies get 400 -------------------------------------------------------

MALFORMED = [
    (b"[1, 2, 3]", "application/json"),
    (b'{"type": "event_callback", "event": "str"}', "application/json"),
    (
        b'{"type": "event_callback", "event": {"type": "app_mention", "user": ["x"]}}',
        "application/json",
    ),
    (b"{not json", "application/json"),
    (b'"just a string"', "application/json"),
    (b"payload=%7Bbroken", "application/x-www-form-urlencoded"),
    (b"payload=%5B1%5D", "application/x-www-form-urlencoded"),
    (
        b"payload=%7B%22type%22%3A%22block_actions%22%2C%22actions%22%3A%22x%22%7D",
        "application/x-www-form-urlencoded",
    ),
]


@pytest.mark.parametrize("body, content_type", MALFORMED)
def test_a_signed_malformed_body_gets_400_not_a_traceback(make_harness, caplog, body, content_type):
    import logging

    caplog.set_level(logging.WARNING)
    h = make_harness()
    status, text = h.send_http(body, content_type)
    assert status == 400, (status, text)
    assert "Traceback" not in text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    # and the bot still answers
    from tests.standins.slack_harness import answer_in, mention

    h.event(mention("How many times is a failed webhook retried?"), "EvM1")
    answer_in(h.mock, "C1")
