"""Where an answer's [n] marks go (router/marks.py): after the words their citation supports,
never inside a code block or a table, never at the start of the next paragraph."""

from markdown_it import MarkdownIt

from router.answer import Citation
from router.marks import marked
from tests.standins.claude import FakeClaude
from tests.test_pipeline import SIGNATURE_Q, make_pipeline

GFM = MarkdownIt("commonmark").enable("table")


def cite(n: int, verified: bool = True) -> Citation:
    return Citation(n, "d", "s", "u", "text", verified)


def test_a_mark_after_a_code_block_goes_on_the_words_before_it():
    text = marked(
        [
            (
                "Set the alias in your config:\n\n```toml\n[tool_alias]\nnu = 'aqua:nu'\n```",
                [cite(1)],
            ),
            ("\n\nThen run `mise install`.\n\n", [cite(2)]),
            ("It installs everything.", [cite(2), cite(3, verified=False)]),
        ]
    )
    assert text == (
        "Set the alias in your config:[1]\n\n```toml\n[tool_alias]\nnu = 'aqua:nu'\n```\n\n"
        "Then run `mise install`.[2]\n\nIt installs everything.[2]"
    )
    fences = [t for t in GFM.parse(text) if t.type == "fence"]
    assert [f.content for f in fences] == ["[tool_alias]\nnu = 'aqua:nu'\n"]  # closed, as written


def test_a_block_of_code_or_a_table_alone_gets_its_marks_on_the_next_line():
    table = "| option | default |\n|---|---|\n| `jobs` | 4 |"
    text = marked(
        [
            ("Run it.", [cite(1)]),
            ("\n\n```sh\nmise run build\n```", [cite(2)]),
            ("\n\n", []),
            (table, [cite(3)]),
            ("\n\nOr set it in the config:\n\n" + table, [cite(4)]),
        ]
    )
    assert text == (
        "Run it.[1]\n\n```sh\nmise run build\n```\n[2]\n\n"
        f"{table}\n[3]\n\nOr set it in the config:[4]\n\n{table}"
    )
    shown = " ".join(t.content for t in GFM.parse(text) if t.type in ("inline", "fence"))
    # each mark is read as text (a mark after a row would be a cell GFM drops), each row whole
    assert all(f"[{n}]" in shown for n in range(1, 5)) and shown.count("`jobs`") == 2


def test_claudes_cited_code_block_reaches_the_answer_whole(examples_db, local_embedder, stub):
    reply = [
        ("Send the signature header:\n\n```sh\ncurl -H 'X-Sig: …' https://x\n```", [(0, 0, 1)]),
        ("\n\nThat is all.", [(0, 0, 1)]),
    ]
    stub.route("/v1/messages", FakeClaude(answer=reply))
    ans = make_pipeline(examples_db, local_embedder, stub).answer(SIGNATURE_Q)
    assert ans.text == (
        "Send the signature header:[1]\n\n```sh\ncurl -H 'X-Sig: …' https://x\n```\n\n"
        "That is all.[1]"
    )


def test_marks_after_code_stand_apart_and_are_not_repeated():
    """Words that run on from a closing fence start a paragraph (CommonMark would not close the
    fence there); a mark on the line after code ends its paragraph; code whose marks the words
    before it carry adds none, and only the new ones when they carry some."""
    text = marked(
        [
            ("Define it:\n\n```toml\nx = 1\n```", [cite(6)]),
            (" Task `env` is its own.\n", [cite(1)]),
            ("For example:", [cite(10)]),
            ("\n```sh\na\n```\n```sh\nb\n```", [cite(10), cite(29)]),
            ("\nThen run it.", [cite(3)]),
            ("\n```sh\nc\n```", [cite(3)]),
        ]
    )
    assert text == (
        "Define it:[6]\n\n```toml\nx = 1\n```\n\nTask `env` is its own.[1]\nFor example:[10]"
        "\n```sh\na\n```\n```sh\nb\n```\n[29]\n\nThen run it.[3]\n```sh\nc\n```"
    )
    tokens = GFM.parse(text)
    assert [t.content for t in tokens if t.type == "fence"] == ["x = 1\n", "a\n", "b\n", "c\n"]
    assert "Then run it.[3]" in [t.content for t in tokens if t.type == "inline"]
