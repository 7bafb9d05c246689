"""`fieldguide gaps`: the questions the docs did not answer well, grouped into topics; the HTML
report checked in a real headless Chromium."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.cli import main
from bot.state.sqlite import SqliteState
from index.store import open_db
from router.answer import Answer

TOPICS = {
    "crypto": [
        "Can I pay with Bitcoin?",
        "Do you accept cryptocurrency for invoices?",
        "Is paying in Ethereum supported?",
        "Can we settle our bill using crypto?",
        "Any plans to take USDC stablecoin payments?",
        "Does Tidewater accept Bitcoin as a payment method?",
        "crypto payment option for the Team plan?",
        "Can I use a crypto wallet to pay my subscription?",
        "Will you support paying invoices in BTC?",
        "Is cryptocurrency an accepted way to pay?",
    ],
    "terraform": [
        "Is there a Terraform provider for Tidewater?",
        "How do I manage webhook endpoints with Terraform?",
        "Can I configure Tidewater using infrastructure as code?",
        "Do you have a Pulumi or Terraform integration?",
        "terraform module for endpoints?",
        "How to provision Tidewater resources from Terraform?",
        "Is there an official Terraform plugin?",
        "Can our Terraform HCL configs create Tidewater endpoints?",
        "Any IaC support, like a Terraform provider?",
        "Manage Tidewater config declaratively with Terraform?",
    ],
    "hipaa": [
        "Is Tidewater HIPAA compliant?",
        "Will you sign a BAA for HIPAA?",
        "Can we send protected health information (PHI) under HIPAA?",
        "Do you support HIPAA workloads?",
        "Is Tidewater suitable for healthcare data under HIPAA?",
        "Can I get a HIPAA business associate agreement?",
        "HIPAA compliance status?",
        "Are you certified for handling PHI and HIPAA data?",
        "Does the Enterprise plan include HIPAA compliance?",
        "Can a hospital use Tidewater for patient health records?",
    ],
}
ANSWERED = [
    "How many times is a failed webhook retried?",
    "What does error TW-1429 mean?",
    "How much does the Team plan cost?",
    "How do I rotate my API key?",
    "What is the maximum page size when listing deliveries?",
    "How do I verify a webhook signature?",
    "Can I replay events from the last two hours?",
    "How are refunds handled?",
    "Which Python package is the official SDK?",
    "How long is an OAuth access token valid?",
    "Can we log in to the dashboard with Okta?",
    "How do I only receive invoice events on one endpoint?",
]


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
    assert [t["count"] for t in top] == [10, 10, 10]
    assert out["unanswered"] == 30 and len(out["topics"]) == 3  # the answered ones are left out
    found = {topic_of[t["questions"][0]] for t in top}
    assert found == set(TOPICS)
    for t in top:
        assert 1 <= len(t["questions"]) <= 5
        assert {topic_of[q] for q in t["questions"]} == {topic_of[t["questions"][0]]}
        # the nearest doc, its intent and owner (none is set in the example docs)
        [(intent,)] = open_db(examples_db).execute(
            "SELECT intent FROM docs WHERE path = ?", [t["doc"]]
        )
        assert t["intent"] == intent and t["owner"] == ""
    assert main(["gaps", "--db", examples_db, "--json", "--intent", "nope"]) == 0
    assert json.loads(capsys.readouterr().out)["topics"] == []
    assert main(["gaps", "--db", examples_db, "--since", "2999-01-01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["topics"] == []


# -- the HTML report in a real browser -------------------------------------------------------------


def chromium() -> str:
    """Debian's chromium (`make chromium` installs it); skipped with the reason where it is
    missing, failed under CI (CI or FIELDGUIDE_REQUIRE_CHROMIUM=1 set)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    why = "chromium is not installed (make chromium: apt-get install chromium)"
    if os.environ.get("CI") or os.environ.get("FIELDGUIDE_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"the browser test is required here: {why}")
    pytest.skip(why)


def dump_dom(page: Path, profile: Path) -> str:
    """The page's DOM after its scripts ran, from headless Chromium."""
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
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_the_html_report_renders_with_its_plots_drawn_and_no_errors(examples_db, tmp_path, capsys):
    import re

    planted(examples_db)
    page = tmp_path / "gaps.html"
    assert main(["gaps", "--db", examples_db, "--html", str(page)]) == 0
    assert "in 3 topics" in capsys.readouterr().out
    html = page.read_text()
    # self-contained: nothing is fetched (no external script, style, font or image)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html
    dom = dump_dom(page, tmp_path / "profile")
    assert 'data-drawn="3"' in dom, dom[:2000]  # the three plots have a size and bars
    assert 'data-errors="yes"' not in dom and '<div id="errors"></div>' in dom
    assert dom.count('class="bar"') >= 3 + 1 + 3  # days x decisions, intents, gaps
    assert "HIPAA" in dom and "Terraform" in dom  # the top gaps are listed
    # the error check itself works: a page whose script fails is caught
    broken = tmp_path / "broken.html"
    broken.write_text(html.replace("</body>", "<script>notDefined();</script></body>"))
    dom = dump_dom(broken, tmp_path / "profile2")
    assert 'data-errors="yes"' in dom and "notDefined" in dom
