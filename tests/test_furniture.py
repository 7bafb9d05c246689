"""Answers keep what answers: page furniture (page numbers, running headers and
footers) is found by statistics over the corpus and never quoted, while content said twice stays
quotable; a procedure's steps, a table's answering rows with its header and a list's items are
quoted whole."""

import re

from index.furniture import Counts, most_pages, normal, page_number
from index.indexer import index_folder
from index.mapped import open_searcher
from router import offline
from router.answer import ABSTAIN, occurs_in
from router.engine import Engine
from router.offline import SKIPPED_ROWS
from router.pipeline import Pipeline
from router.units import units_of
from tests.conftest import EXAMPLES, write_docs

# A TV manual as a PDF converter leaves it: every page opens with the running header, which runs
# into the page's first paragraph, and closes with the running footer and the page number; a
# step and a sentence run on across a page break.
HEADER = "AURORA QX SERIES OWNER'S GUIDE"
FOOTER = "Aurora Electronics Support Edition"
PAGES = [
    """## Picture

The picture mode sets brightness, contrast and colour for what you watch. Choose Standard for
most rooms, Movie for a dark room and Vivid for a bright shop window.""",
    """Motion smoothing inserts frames between the frames of a fast scene. Turn it off for films
to keep their cinema look.

## Sound

The equalizer adjusts the balance of bass and treble for each sound mode.
When the sound stops, check that the TV is not muted.
Unplug the TV for 30 seconds, then plug it in again.""",
    """## Pairing the remote

To pair the remote with the TV:

1. Point the remote at the TV from less than one metre away.
2. Press and hold the Back and Play buttons together for three seconds.
3. Wait until the TV shows the message that the remote is paired.
4. Press any button of the remote to check that the TV answers it.
5. If the TV does not answer, replace the batteries of the remote and start again.""",
    """## Sleep timer

The sleep timer turns the TV off after the time you choose. Open Settings, then General, then""",
    """Sleep Timer, and choose from 30 to 180 minutes.

## Troubleshooting

| Problem | Solution |
|---|---|
| No picture | Check that the power cable is plugged in. |
| Sound is distorted | Lower the volume or reset the equalizer in the Sound menu. |
| Remote does not work | Replace the batteries of the remote. |""",
    """## Network

When the wireless network drops, check the lights of your router first.
Unplug the TV for 30 seconds, then plug it in again.""",
    """## Software update

The TV looks for a software update every night while it is in standby and installs it before
the next start.""",
    """## Energy saving

Energy saving lowers the brightness of the screen when the room is dark and turns the screen
off when nothing has been watched for four hours.""",
]


def manual() -> str:
    pages = [
        f"{HEADER}\n{body}\n{FOOTER}\n- {61 + i} -\n" for i, body in enumerate(PAGES)
    ]  # the header runs into the page's first line, no blank line between
    return "---\ntitle: Aurora TV user guide\nintent: tv\n---\n# Aurora TV user guide\n\n" + (
        "\n".join(pages)
    )


FAQ = """---
title: Warranty
intent: tv
---
# Warranty

The warranty covers the screen and the remote for two years from the date of purchase.
"""


def build(tmp_path, local_embedder):
    docs = write_docs(tmp_path / "docs", {"manual.md": manual(), "warranty.md": FAQ})
    db = tmp_path / "tv.db"
    index_folder(db, docs, local_embedder)
    return str(db)


def test_page_numbers_are_furniture_by_definition_code_punctuation_is_not():
    for line in ["- 63 -", "63", "12 / 40", "[ 7 ]"]:
        assert page_number(line), line
    for line in ["}", "],", "Page 12", "Step 3: press OK", ""]:
        assert not page_number(line), line
    assert normal("  Page 12   of 40 ") == normal("page 13 of 41") == "page 0 of 0"


def test_most_pages_is_a_binomial_test_with_no_verdict_on_four_pages_or_fewer():
    assert [most_pages(n) for n in (1, 4, 5, 8, 45)] == [2, 5, 5, 7, 29]
    # every line of a one-page corpus is on all of its pages, and still no furniture
    counts = Counts()
    counts.add("a.md", "A", ["A"], "Unplug the TV.\nUnplug the TV.\nPlug it in again.", 0)
    assert not counts.result().line("Unplug the TV.")


def test_copies_of_a_page_are_one_page():
    """Forty copies of a doc are one piece of content, not forty pages sharing their lines: their
    lines are no furniture; a footer on most of the distinct pages still is."""
    counts = Counts()
    copied = "Rotate keys every 90 days.\nRevoke a leaked key at once."
    for n in range(40):
        counts.add(f"copy-{n:02}.md", "Keys", ["Keys"], copied, 0)
    topics = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
    ]
    for topic in topics:
        counts.add(f"{topic}.md", topic, [topic], f"The {topic} topic.\nAcme footer", 0)
    furniture = counts.result()
    assert not furniture.line("Rotate keys every 90 days.")
    assert furniture.line("Acme footer")  # on 10 of the 11 distinct pages


def test_the_running_header_and_footer_are_found_by_statistics(tmp_path, local_embedder):
    db = build(tmp_path, local_embedder)
    _, searcher = open_searcher(db, local_embedder.name)
    corpus = searcher.furniture
    assert corpus.line(HEADER) and corpus.line(FOOTER) and corpus.line("- 99 -")
    # a content line on two pages is no furniture
    assert not corpus.line("Unplug the TV for 30 seconds, then plug it in again.")
    hits = searcher.search("sound network picture remote timer", None, k=100)
    units = [u for h in hits for u in units_of(h, corpus)]
    quoted = [u.text for u in units]
    assert not any(HEADER in t or FOOTER in t or page_number(t[:6]) for t in quoted), quoted
    # without the corpus's statistics, the header runs into a page's first sentence
    assert any(HEADER in u.text for h in hits for u in units_of(h))
    assert quoted.count("Unplug the TV for 30 seconds, then plug it in again.") == 2
    # the sentence cut by a page break: each side quotable, verbatim, without the furniture
    assert "Sleep Timer, and choose from 30 to 180 minutes." in quoted
    assert all(occurs_in(u.text, u.hit.chunk["text"]) for u in units)


def test_answers_over_a_converted_manual_never_quote_its_furniture(tmp_path, local_embedder):
    p = Pipeline(Engine(build(tmp_path, local_embedder), local_embedder))
    for question, expected in [
        ("Which picture mode should I choose for a dark room?", "Movie for a dark room"),
        ("How long can the sleep timer run?", "from 30 to 180 minutes"),
        ("How long do I unplug the TV when the network drops?", "Unplug the TV for 30 seconds"),
        ("When does the TV install a software update?", "while it is in standby"),
    ]:
        ans = p.answer(question)
        assert ans.decision != ABSTAIN, question
        assert expected in ans.text, ans.text
        assert HEADER not in ans.text and FOOTER not in ans.text, ans.text
        assert not any(f"- {n} -" in ans.text for n in range(61, 69)), ans.text
        assert ans.citations and all(c.verified for c in ans.citations)


def test_a_procedure_is_quoted_whole_and_a_table_row_with_its_header(tmp_path, local_embedder):
    p = Pipeline(Engine(build(tmp_path, local_embedder), local_embedder))
    steps = [line for line in PAGES[2].split("\n") if line[:2] in {f"{n}." for n in range(1, 6)}]
    for question in [
        "How do I pair the remote with the TV?",
        "Which buttons do I hold to pair the remote?",  # a step answers: its procedure comes
    ]:
        ans = p.answer(question)
        assert ans.decision != ABSTAIN, question
        quoted = [line[2:] for line in ans.text.split("\n") if line.startswith("> ")]
        assert [line for line in quoted if line in steps] == steps, ans.text
    # the extraction step alone: whether this small manual answers is the decision's to say
    question = "The sound is distorted, what can I do?"
    searcher = p.engine.loaded().searcher
    vec, _ = p.engine.embed_query(question)
    hits = searcher.search(question, vec, k=3)
    passages = "\n".join(
        x.text
        for x in offline.extract(
            question, vec, hits, searcher.bm25, local_embedder, searcher.furniture
        )
    )
    assert "| Problem | Solution |" in passages
    assert "| Sound is distorted | Lower the volume" in passages
    # a table that fits the quote's budget is quoted whole: no row left out
    assert "| Remote does not work |" in passages


def table_rows(text: str) -> list[str]:
    return [m.strip() for m in re.findall(r"^> (\|.*\|)\s*$", text, re.M)]


def test_a_quoted_table_keeps_its_rows_or_marks_those_it_skips(examples_db, local_embedder):
    pipeline = Pipeline(Engine(examples_db, local_embedder))
    grace = pipeline.answer("How long is the grace period when rotating a key?")
    rows = table_rows(grace.text)
    assert rows[0].startswith("| Grace period")
    for kept in ("| 1 hour |", "| 24 hours | Default", "| 7 days |"):
        assert any(r.startswith(kept) for r in rows) or SKIPPED_ROWS in rows, grace.text
    retry = pipeline.answer("What is the retry schedule of a failed delivery?")
    source = (EXAMPLES / "webhooks/delivery-and-retries.md").read_text(encoding="utf-8")
    shown = table_rows(retry.text)
    for before, after in zip(shown, shown[1:], strict=False):
        if SKIPPED_ROWS in (before, after) or before.startswith("|--") or after.startswith("|--"):
            continue
        # two rows shown one after the other stand one after the other in the docs
        assert source.index(after) == source.index(before) + len(before) + 1, retry.text
