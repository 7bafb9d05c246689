"""One bot for many teams: channel scopes, doc owners, "Ask a person", the gaps report
and App Home — the real Bolt app over signed HTTP against the Slack mock."""

import json
import re
import shutil

import pytest

from bot.scopes import ScopeError, load_scopes
from index.indexer import index_folder
from index.store import open_db
from router.engine import Engine, Scope
from router.pipeline import Pipeline
from tests.conftest import EXAMPLES, write_docs
from tests.standins.slack import SlackMock
from tests.standins.slack_harness import Harness, answer_in, mention

SCOPES = """
channels:
  CBILLING: {intents: [billing]}
  "#platform": {folders: [api/]}
"""


def audit(h: Harness, channel: str) -> dict:
    [row] = [r for r in h.state.list_answers() if r["channel"] == channel]
    return row


# -- channel scopes --------------------------------------------------------------------------------


def test_a_scoped_channel_answers_from_its_scope_only_an_unscoped_one_from_all(
    make_harness, tmp_path
):
    path = tmp_path / "scopes.yaml"
    path.write_text(SCOPES)
    h = make_harness(channels={"CPLATFORM": "platform", "COTHER": "random"}, scopes=str(path))
    question = "How many times is a failed webhook retried?"
    h.event(mention(question, channel="CBILLING", ts="1700000001.000100"), "EvS1")
    h.event(mention(question, channel="CPLATFORM", ts="1700000002.000100"), "EvS2")
    h.event(mention(question, channel="C1", ts="1700000003.000100"), "EvS3")
    for channel in ("CBILLING", "CPLATFORM", "C1"):
        answer_in(h.mock, channel)
    billing, platform, everything = (audit(h, c) for c in ("CBILLING", "CPLATFORM", "C1"))
    assert billing["hits"] and all(x["doc"].startswith("billing/") for x in billing["hits"])
    assert platform["hits"] and all(x["doc"].startswith("api/") for x in platform["hits"])
    assert billing["routing"]["scope"] == "CBILLING (intents billing)"
    assert platform["routing"]["scope"] == "#platform (folders api/)"
    # unscoped: everything, and the webhooks docs answer it
    assert "scope" not in everything["routing"]
    assert everything["decision"] != "ABSTAIN"
    folders = {x["doc"].split("/")[0] for x in everything["hits"]}
    assert "webhooks" in folders and len(folders) > 1
    # the answer says which scope it searched
    [answer] = answer_in(h.mock, "CPLATFORM")
    context = json.dumps([b for b in answer["blocks"] if b["type"] == "context"])
    assert "searched: #platform (folders api/)" in context


def test_a_default_scope_covers_dms_and_unlisted_channels(make_harness, tmp_path):
    path = tmp_path / "scopes.yaml"
    path.write_text(SCOPES + "  default: {intents: [webhooks]}\n")
    h = make_harness(channels={"CPLATFORM": "platform"}, scopes=str(path))
    h.event(mention("What does error TW-1429 mean?", channel="C9"), "EvD1")
    answer_in(h.mock, "C9")
    row = audit(h, "C9")
    assert row["routing"]["scope"] == "default (intents webhooks)"
    assert all(x["doc"].startswith("webhooks/") for x in row["hits"])


def test_the_greeting_in_a_scoped_channel_suggests_its_own_questions(make_harness, tmp_path):
    """ "hi" suggests example questions of the intents the channel is routed among, none of
    another team's."""
    from tests.standins.slack_harness import wait

    path = tmp_path / "scopes.yaml"
    path.write_text(SCOPES)
    h = make_harness(channels={"CPLATFORM": "platform"}, scopes=str(path))
    h.event(mention("hi", channel="CBILLING", ts="1700000001.000100"), "EvG1")
    h.event(mention("hello", channel="CPLATFORM", ts="1700000002.000100"), "EvG2")

    def greeting(channel: str) -> str:
        return wait(
            lambda: next((p["text"] for p in h.mock.posts() if p.get("channel") == channel), ""),
            what=f"the greeting in {channel}",
        )

    billing, platform = greeting("CBILLING"), greeting("CPLATFORM")
    assert "How much does the Team plan cost?" in billing
    assert "rotate my API key" not in billing and "retry a failed webhook" not in billing
    # api/ holds the api intent's docs only
    assert "What is the maximum page size when listing deliveries?" in platform
    assert "rotate my API key" not in platform and "Team plan cost" not in platform


def test_a_channel_name_the_app_cannot_see_stops_start_up_with_its_name(make_harness, tmp_path):
    path = tmp_path / "scopes.yaml"
    path.write_text(SCOPES)
    with pytest.raises(ScopeError, match="#platform"):
        make_harness(channels={"COTHER": "random"}, scopes=str(path))


def test_a_bad_scopes_file_names_every_problem_at_once(tmp_path):
    path = tmp_path / "scopes.yaml"
    path.write_text(
        "channels:\n"
        "  CBILLING: {intents: [biling]}\n"
        "  '#platform': {folders: [apis/, ../up]}\n"
        "  'Not A Channel': {intents: [api]}\n"
        "  CEMPTY: {}\n"
        "  CODD: {intents: [api], owners: [x]}\n"
    )
    with pytest.raises(ScopeError) as e:
        load_scopes(path, {"billing", "api"}, ["api/overview.md", "billing/plans.md"])
    msg = str(e.value)
    for part in ("biling", "'apis/'", "'../up'", "'Not A Channel'", "'CEMPTY'", "'CODD'"):
        assert part in msg
    path.write_text("channels: &a [*a]\n")
    with pytest.raises(ScopeError, match="scopes file"):
        load_scopes(path, set(), [])


def test_ask_from_the_cli_in_a_channel_or_a_scope(examples_db, tmp_path, monkeypatch, capsys):
    from bot.cli import main

    path = tmp_path / "scopes.yaml"
    path.write_text(SCOPES)
    monkeypatch.setenv("FIELDGUIDE_SCOPES", str(path))
    monkeypatch.chdir(tmp_path)
    q = "How many times is a failed webhook retried?"
    assert main(["ask", "--db", examples_db, "--json", "--scope", "platform", q]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["routing"]["scope"] == "#platform (folders api/)"
    assert main(["ask", "--db", examples_db, "--channel", "CBILLING", q]) == 0
    assert "searched only the scope CBILLING (intents billing)" in capsys.readouterr().out
    assert main(["ask", "--db", examples_db, "--scope", "nope", q]) == 2
    assert "no scope 'nope'" in capsys.readouterr().err


# -- owners ----------------------------------------------------------------------------------------


def test_owners_are_read_checked_and_stored(tmp_path, local_embedder):
    from index.indexer import index_folder
    from index.loader import load_intents_yaml, parse_doc
    from index.store import load_intents, load_owners, owner_of

    doc = parse_doc("a.md", b"---\nowner: '<!subteam^S0BILL|billing-team>'\n---\n# A\n\ntext\n")
    assert doc.owner == "S0BILL"
    bad_owners = (("owner: '<bob>'", "'<bob>'"), ("owner: [U1]", "a list"), ("owner: '#Bad x'", ""))
    for bad, why in bad_owners:  # left out with a warning, the doc kept
        left = parse_doc("a.md", f"---\n{bad}\n---\n# A\n\ntext\n".encode())
        assert left.owner is None and re.search("front matter 'owner'.*" + why, left.warnings[0])
    docs = tmp_path / "docs"
    (docs / "billing").mkdir(parents=True)
    (docs / "billing" / "plans.md").write_text("---\nintent: billing\n---\n# Plans\n\nTeam plan.\n")
    (docs / "billing" / "refunds.md").write_text(
        "---\nintent: billing\nowner: U0REFUND\n---\n# Refunds\n\nRefunds take 5 days.\n"
    )
    (docs / "intents.yaml").write_text("billing: {description: money, owner: '#billing-docs'}\n")
    assert load_intents_yaml(docs)["billing"].owner == "#billing-docs"
    db = str(tmp_path / "i.db")
    index_folder(db, docs, local_embedder)
    from index.store import open_db

    conn = open_db(db)
    owners = load_owners(conn, doc_owners=True)  # FIELDGUIDE_DOC_OWNERS=on
    assert owner_of(owners, "billing/refunds.md", "billing") == "U0REFUND"
    assert owner_of(load_owners(conn), "billing/refunds.md", "billing") == "#billing-docs"
    assert owner_of(owners, "billing/plans.md", "billing") == "#billing-docs"
    assert [i["owner"] for i in load_intents(conn)] == ["#billing-docs"]
    (docs / "intents.yaml").write_text("billing: {description: money, owner: '<billing>'}\n")
    summary = index_folder(db, docs, local_embedder)
    assert "owner" in json.dumps(summary.__dict__, default=str)  # named in the run's report


# -- "Ask a person" --------------------------------------------------------------------------------


@pytest.fixture
def owned_db(examples_db, local_embedder, tmp_path):
    """The example index with owners: billing's docs → #billing-docs, webhooks' → a user group."""
    from index.indexer import index_folder

    docs = shutil.copytree(EXAMPLES, tmp_path / "owned-docs")
    text = (docs / "intents.yaml").read_text()
    text = text.replace("billing:\n", "billing:\n  owner: '#billing-docs'\n")
    text = text.replace("webhooks:\n", "webhooks:\n  owner: S0WEBHOOKS\n")
    (docs / "intents.yaml").write_text(text)
    sso = docs / "authentication" / "sso.md"  # one doc owned by a person
    sso.write_text(sso.read_text().replace("---\n", "---\nowner: U0SSO\n", 1))
    index_folder(examples_db, docs, local_embedder, replace=True)  # the same docs, owned: a swap
    return examples_db


def ephemerals(mock: SlackMock) -> list[dict]:
    return [r.form for r in mock.calls("/api/chat.postEphemeral")]


def test_ask_a_person_posts_once_to_the_owners_channel_and_is_recorded(make_harness, owned_db):
    from tests.standins.slack_harness import blocks_of, wait

    h = make_harness()
    question = "Can I pay my invoice with Dogecoin?"
    h.event(mention(question, channel="C1", ts="1700000010.000100"), "EvA1")
    [answer] = answer_in(h.mock, "C1")
    row = audit(h, "C1")
    assert row["decision"] in ("ABSTAIN", "PARTIAL")
    [button] = [e for b in answer["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert button["action_id"] == "ask_person" and button["value"] == str(row["id"])
    # two clicks (a double click, a second replica's delivery) and another user's: one hand-off
    # (only the asker, U1, or an admin may hand an answer on)
    for user in ("U1", "U1", "U2"):
        acked, _ = h.click(user, str(row["id"]), action_id="ask_person")
        assert acked
    told = wait(lambda: len(ephemerals(h.mock)) >= 3 and ephemerals(h.mock), what="3 notes")
    [sent] = [p for p in h.mock.posts() if p["channel"] == "#billing-docs"]
    assert question in sent["text"]
    assert "https://tidewater.slack.com/archives/C1/p1700000010000100" in sent["text"]
    assert "billing/" in sent["text"]  # the sections it looked at
    notes = sorted(t["text"] for t in told)
    assert sum(n.startswith("Sent to #billing-docs") for n in notes) == 1
    assert sum("already handed on" in n for n in notes) == 1
    assert sum(n.startswith("Only the person who asked") for n in notes) == 1
    assert {t["thread_ts"] for t in told} == {"1700000010.000100"}  # in the asker's thread
    assert audit(h, "C1")["handoff"] == "#billing-docs"
    assert not [b for b in blocks_of(sent) if b.get("type") == "actions"]


def test_a_hand_off_to_a_channel_the_bot_is_not_in_says_to_invite_it(make_harness, owned_db):
    """docs/slack.md: a hand-off is posted by the bot, so it must be invited to the owners'
    channel; when it is not, the asker is told exactly that, and the button may be pressed again."""
    from tests.standins.slack import slack_error
    from tests.standins.slack_harness import wait

    h = make_harness()
    h.event(mention("Can I pay my invoice with Dogecoin?", channel="C1"), "EvN1")
    answer_in(h.mock, "C1")
    row = audit(h, "C1")
    h.mock.fail("chat.postMessage", slack_error("not_in_channel"))
    h.click("U1", str(row["id"]), action_id="ask_person")
    [told] = wait(lambda: ephemerals(h.mock), what="the note")
    assert "#billing-docs" in told["text"] and "/invite @fieldguide" in told["text"]
    assert not audit(h, "C1")["handoff"]  # released: the button may be tried again


def test_a_thumbs_down_offers_a_person_and_a_group_owner_is_mentioned_in_the_thread(
    make_harness, owned_db
):
    from tests.standins.slack_harness import blocks_of, wait

    h = make_harness()
    h.event(mention("How do I rotate an API key?", channel="C1"), "EvB1")
    [answer] = answer_in(h.mock, "C1")
    row = audit(h, "C1")
    assert row["decision"] == "ANSWER"
    assert not [b for b in answer["blocks"] if b["type"] == "actions"]  # answered: no offer
    h.click("U1", f"not_helpful:{row['id']}")
    [offer] = wait(lambda: ephemerals(h.mock), what="the offer")
    assert offer["user"] == "U1" and offer["thread_ts"] == "1700000000.000100"
    [button] = [e for b in blocks_of(offer) if b["type"] == "actions" for e in b["elements"]]
    h.click("U1", button["value"], action_id="ask_person")
    [asked] = wait(
        lambda: [p for p in h.mock.posts() if "S0WEBHOOKS" in (p.get("text") or "")],
        what="the owners mentioned",
    )
    assert asked["channel"] == "C1" and asked["thread_ts"] == "1700000000.000100"
    assert asked["text"].startswith("<!subteam^S0WEBHOOKS>")
    assert audit(h, "C1")["handoff"] == "C1/1700000000.000100"


# -- App Home --------------------------------------------------------------------------------------


def home_opened(h: Harness, user: str, event_id: str) -> dict:
    from tests.standins.slack_harness import wait

    h.mock.home_views.pop(user, None)
    acked, _ = h.event({"type": "app_home_opened", "user": user, "tab": "home"}, event_id)
    assert acked
    return wait(lambda: h.mock.home_views.get(user), what=f"{user}'s Home tab")


def home_text(view: dict) -> str:
    return json.dumps(view["blocks"], ensure_ascii=False)


def test_app_home_shows_an_admin_the_index_the_week_and_the_gaps(make_harness):
    from router.answer import Answer
    from tests.standins.slack_harness import wait

    h = make_harness()
    state = h.state
    for i, decision in enumerate(["ANSWER"] * 4 + ["PARTIAL"] * 2 + ["ABSTAIN"] * 3):
        q = f"Can I pay with Bitcoin, question {i}?" if decision == "ABSTAIN" else f"q{i}"
        aid = state.record_answer(Answer(q, q, decision, "…"), {"channel": "C1"})
        if i < 3:
            state.record_feedback(aid, "U1", "helpful")
        elif i == 6:
            state.record_feedback(aid, "U1", "not_helpful")
    view = home_opened(h, "UADMIN", "EvH1")
    assert view["type"] == "home" and len(view["blocks"]) <= 100
    text = home_text(view)
    assert "24 docs · 226 chunks · last refresh" in text and "*ok*" in text
    assert "9 questions · 4 answered · 2 partial · 3 not in the docs · 👍 3 · 👎 1" in text
    assert "*Top gaps*" in text and "Bitcoin" in text
    [button] = [e for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert button["action_id"] == "home_reindex"
    # anyone else: how to ask, no figures, no button
    plain = home_text(home_opened(h, "U1", "EvH2"))
    assert "Mention me" in plain and "chunks" not in plain and "home_reindex" not in plain
    # the reindex button runs under the slash command's lock
    with state.reindex_lock() as mine:
        assert mine
        h.click("UADMIN", "", action_id="home_reindex")
        wait(
            lambda: [p for p in h.mock.posts() if "already running" in (p.get("text") or "")],
            what="the lock to be reported",
        )
    h.mock.home_views.clear()
    h.click("UADMIN", "", action_id="home_reindex")
    done = wait(
        lambda: [p for p in h.mock.posts() if "Reindexed in" in (p.get("text") or "")],
        what="the reindex",
    )
    assert done[0]["channel"] == "UADMIN"
    wait(lambda: h.mock.home_views.get("UADMIN"), what="the Home tab republished")
    h.click("U1", "", action_id="home_reindex")  # not an admin: nothing runs
    home_opened(h, "U1", "EvH9")  # handled after that click
    assert len([p for p in h.mock.posts() if "Reindexed in" in (p.get("text") or "")]) == 1


def test_app_home_shows_an_owner_their_intents(make_harness, owned_db):
    from router.answer import Answer, Trace

    with open_db(owned_db).conn as conn:  # authentication's owner, as intents.yaml would name
        conn.execute("UPDATE intents SET owner = 'U0AUTH' WHERE name = 'authentication'")
    h = make_harness()
    for intent, decision in [("authentication", "ANSWER"), ("authentication", "ABSTAIN")] + [
        ("billing", "ABSTAIN")
    ] * 3:
        ans = Answer(
            "q",
            "q",
            decision,
            "…",
            trace=Trace(route={"intents": [{"intent": intent, "score": 1}]}),
        )
        h.state.record_answer(ans, {"channel": "C1"})
    text = home_text(home_opened(h, "U0AUTH", "EvH3"))
    assert "(your intents: authentication)" in text
    assert "2 questions · 1 answered · 0 partial · 1 not in the docs" in text
    assert "home_reindex" not in text  # an owner, not an admin
    # owning a doc (authentication/sso.md's front matter) gives no intent's figures
    assert "questions ·" not in home_text(home_opened(h, "U0SSO", "EvH4"))


def test_views_publish_is_checked_as_slack_checks_it():
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    mock = SlackMock()
    try:
        client = WebClient(token="xoxb-test", base_url=mock.url + "/api/")
        ok = {"type": "home", "blocks": [{"type": "divider"}]}
        assert client.views_publish(user_id="U1", view=ok)["ok"]
        for bad in (
            {"type": "modal", "blocks": []},
            {"type": "home", "blocks": [{"type": "divider"}] * 101},
            {"type": "home", "blocks": [{"text": "no type"}]},
        ):
            with pytest.raises(SlackApiError, match="invalid_arguments"):
                client.views_publish(user_id="U1", view=bad)
        assert mock.home_views == {"U1": ok}
    finally:
        mock.close()


def test_ask_a_person_from_a_dm_goes_to_the_owner_by_dm(make_harness, examples_db):
    from tests.standins.slack_harness import dm, wait

    with open_db(examples_db).conn as conn:  # every doc owned by one person (as intents.yaml says)
        conn.execute("UPDATE intents SET owner = 'U0DOCS'")
    h = make_harness()
    h.event(dm("Can I pay my invoice with Dogecoin?"), "EvDM1")
    answer_in(h.mock, "D1")
    row = audit(h, "D1")
    assert row["decision"] in ("ABSTAIN", "PARTIAL")
    h.click("U1", str(row["id"]), action_id="ask_person")
    [sent] = wait(lambda: [p for p in h.mock.posts() if p["channel"] == "U0DOCS"], what="a DM")
    assert "Dogecoin" in sent["text"] and "(asked in a direct message)" in sent["text"]
    [told] = wait(lambda: ephemerals(h.mock), what="the asker told")
    assert told["text"].startswith("Sent to <@U0DOCS>") and told["channel"] == "D1"


def test_doctor_checks_the_scopes_file(examples_db, tmp_path, monkeypatch, capsys):
    from bot.cli import main

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "scopes.yaml"
    path.write_text(SCOPES)
    monkeypatch.setenv("FIELDGUIDE_SCOPES", str(path))
    assert main(["doctor", "--db", examples_db, "--docs", str(EXAMPLES)]) == 0
    out = capsys.readouterr().out
    assert "2 channel scopes, all known; #platform resolved with Slack when the bot starts" in out
    path.write_text("channels: {CXYZ: {intents: [nope]}}\n")
    assert main(["doctor", "--db", examples_db, "--docs", str(EXAMPLES)]) == 1
    assert "no doc of the index has intent nope" in capsys.readouterr().out


def test_channel_names_are_resolved_across_conversations_list_pages(tmp_path):
    from slack_sdk import WebClient

    from bot.scopes import parse_scopes

    mock = SlackMock()
    try:
        mock.channels = {f"C{n:06d}": f"team-{n}" for n in range(1500)}  # two pages of 1,000
        scopes = parse_scopes(SCOPES.replace("#platform", "#team-1234"), {"billing"}, ["api/a.md"])
        scopes.resolve(WebClient(token="xoxb-test", base_url=mock.url + "/api/"))
        found = scopes.for_channel("C001234")
        assert found is not None and found.name == "#team-1234"
        assert len(mock.calls("/api/conversations.list")) == 2
        assert scopes.for_channel("C000001") is None  # not listed, no default: everything
    finally:
        mock.close()


def test_home_tabs_are_built_off_bolts_threads_once_per_generation(make_harness, caplog):
    """Five opens of an admin's tab with 150 unanswered questions to read for gaps: built on the
    Home worker (never one of Bolt's listener threads), the gaps found once for this generation
    and these questions; a question and a click meanwhile are answered and acknowledged."""
    import logging

    from router.answer import Answer
    from tests.standins.slack_harness import wait

    caplog.set_level(logging.DEBUG, logger="bot.slack.home")
    h = make_harness()
    for i in range(150):
        q = f"Can I pay invoice {i} with Bitcoin or with gold coins?"
        h.state.record_answer(Answer(q, q, "ABSTAIN", "…"), {"channel": "C1"})
    answered = h.state.record_answer(Answer("q", "q", "ANSWER", "…"), {"channel": "C1"})
    for n in range(5):
        acked, _ = h.event({"type": "app_home_opened", "user": "UADMIN", "tab": "home"}, f"EvT{n}")
        assert acked
    h.event(mention("How many times is a failed webhook retried?"), "EvTQ")
    acked, _ = h.click("U1", f"helpful:{answered}")
    assert acked
    answer_in(h.mock, "C1")
    wait(lambda: h.state.get_answer(answered)["feedback"], what="the click stored")
    view = wait(lambda: h.mock.home_views.get("UADMIN"), what="the Home tab")
    assert "Bitcoin" in home_text(view)
    built = wait(
        lambda: [r for r in caplog.records if r.getMessage().startswith("Home tab for UADMIN")],
        what="the builds",
    )
    assert {r.threadName for r in built} == {"home-tabs"}

    # the same generation, no new question: the gaps are not read again
    def found() -> int:
        return sum(r.getMessage().startswith("Home tab gaps found") for r in caplog.records)

    def shows_all() -> bool:
        view = h.mock.home_views.get("UADMIN")
        return bool(view) and "152 questions" in home_text(view)

    h.event({"type": "app_home_opened", "user": "UADMIN", "tab": "home"}, "EvT8")
    wait(shows_all, what="a tab with every question")
    before = found()
    h.mock.home_views.clear()
    h.event({"type": "app_home_opened", "user": "UADMIN", "tab": "home"}, "EvT9")
    wait(lambda: h.mock.home_views.get("UADMIN"), what="the Home tab again")
    assert found() == before


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
