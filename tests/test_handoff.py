"""Hand-offs to a person: who owns an intent or a doc (the deployment decides, not a doc), and
who may hand an answer on (its asker, or an admin)."""

from __future__ import annotations

import json

import pytest

from index.indexer import index_folder
from tests.conftest import write_docs
from tests.test_teams import ALPHA_KEYS, BRAVO_VAULT

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
    # what the clicks' handling logs, through Bolt and the app (what it sends is asserted above);
    # an earlier test's app still winding down in this process logs to slack_sdk's client
    handled = [r for r in caplog.records if r.name.split(".")[0] != "slack_sdk"]
    assert not [r for r in handled if r.levelno >= logging.ERROR], caplog.text


def ephemerals(h) -> list[dict]:
    return [r.form for r in h.mock.calls("/api/chat.postEphemeral")]
