"""What a question asks, apart from what the asker brought (router/reading.py), and the decision
that reads it: the asker's own words are no evidence against the docs."""

from router import reading


def test_the_askers_material_is_told_from_the_prose():
    q = (
        "uv sync fails with python 3.12.5 on my project\n\n"
        "Hi, when I run `sync --frozen` in /home/me/src it reverts to x.x.x. Perhaps the lock"
        " changed?\n\n```\nerror: failed to parse pyproject.toml\n```\n"
        "> Resolved 12 packages in 3ms\n\n"
        "How do I pin MY_TOKEN so it stays? thanks"
    )
    r = reading.read(q)
    for own in ("3.12.5", "sync --frozen", "/home/me/src", "x.x.x", "MY_TOKEN"):
        assert own in r.material and own not in r.prose, own
    assert "failed to parse" not in r.prose and "Resolved 12 packages" not in r.prose
    assert r.sentences[0] == "uv sync fails with python on my project"
    # what it asks: the opening sentence and each one ending in a question mark
    assert r.asking == (
        "uv sync fails with python on my project Perhaps the lock changed?"
        " How do I pin so it stays?"
    )


def test_a_one_line_question_is_read_whole():
    r = reading.read("How do I rotate a webhook signing secret?")
    assert r.asking == r.prose == "How do I rotate a webhook signing secret?" and not r.material
    assert reading.read("whats the `--dry-run` flag for").prose == "whats the flag for"


def pasted_log(chars: int) -> str:
    """A raw log, as pasted into a message: no code fence, one event a line."""
    lines: list[str] = []
    n = 0
    while sum(len(line) + 1 for line in lines) < chars:
        n += 1
        lines.append(
            f"2026-11-26T10:{n % 60:02}:{(7 * n) % 60:02}.{(37 * n) % 1000:03}Z INFO worker-{n % 9}"
            f" delivered event evt_{1_000_000 + 7919 * n} to endpoint status={(500, 200)[n % 2]}"
            f" attempt={n % 8 + 1}"
        )
    return "\n".join(lines)


def test_the_question_after_a_long_paste_is_read(examples_db):
    """Over 4,000 characters of log, then the question: the bound keeps the sentences that ask,
    so the answer is the one the question alone gets, not one about a log timestamp."""
    from bot import api
    from router.answer import ABSTAIN

    question = "How many times is a failed webhook retried, and over how long?"
    assert reading.bounded(question, 4000) == question
    alone = api.ask(question, examples_db)
    for text in (f"{pasted_log(4200)}\n\n{question}", f"{pasted_log(60_000)}\n\n{question}"):
        assert reading.bounded(text, 4000) == question
        ans = api.ask(text, examples_db)
        assert ans.decision == alone.decision != ABSTAIN and "8 attempts" in ans.text
        assert [s.doc for s in ans.sources] == [s.doc for s in alone.sources]
