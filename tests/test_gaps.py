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
from tests.standins.gap_topics import ANSWERED, TOPICS


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
    # --since is read as audit's is (bot/since.py): a time ago, or a clear usage error
    assert main(["gaps", "--db", examples_db, "--since", "1h", "--json"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["gaps", "--db", examples_db, "--since", "yesterday"])
    assert "Invalid value for '--since': 'yesterday' is neither" in capsys.readouterr().err


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
