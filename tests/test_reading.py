"""What a question asks, apart from what the asker brought (router/reading.py), and the decision
that reads it: the asker's own words are no evidence against the docs (issue 33)."""

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
