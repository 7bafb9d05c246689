from pathlib import Path

import pytest

from index.indexer import index_folder
from index.loader import DocError, load_intents_yaml, parse_doc, walk_docs
from tests.conftest import write_docs


def test_front_matter_fields():
    doc = parse_doc(
        "auth/oauth.md",
        b"""---
title: OAuth setup
intent: authentication
subcategory: oauth
related_intents: [api, troubleshooting]
version: 2
url: https://docs.example.com/auth/oauth
---
# Something else

Body.
""",
    )
    assert (doc.title, doc.intent, doc.subcategory, doc.version) == (
        "OAuth setup",
        "authentication",
        "oauth",
        "2",
    )
    assert doc.related_intents == ["api", "troubleshooting"]
    assert doc.url == "https://docs.example.com/auth/oauth"
    assert doc.text[doc.body_start :].startswith("# Something else")


def test_no_front_matter_takes_first_heading_and_general_intent():
    doc = parse_doc(
        "glossary.md", b"Some intro\n\n```\n# not this\n```\n\n## Glossary of terms\n\ntext\n"
    )
    assert doc.title == "Glossary of terms"
    assert doc.intent == "general"
    assert doc.body_start == 0


def test_title_falls_back_to_file_name():
    assert parse_doc("getting-started.md", b"just text, no heading\n").title == "getting started"


def test_related_intents_as_comma_string():
    doc = parse_doc(
        "a.md", b"---\nintent: api\nrelated_intents: billing, webhooks\n---\n# A\ntext\n"
    )
    assert doc.related_intents == ["billing", "webhooks"]


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "empty file"),
        (b"   \n\n", "empty file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
        (b"# Caf\xe9\n", "not UTF-8"),
        (b"---\ntitle: [unclosed\nintent: api\n---\n# A\ntext\n", "malformed front matter"),
        (b"---\n- a\n- b\n---\n# A\ntext\n", "front matter is not a mapping"),
        (b"---\ntitle: Only metadata\n---\n\n", "no content after the front matter"),
        (b"---\nintent: [a, b]\n---\n# A\ntext\n", "'intent' must be a single name"),
    ],
)
def test_bad_files_give_one_line_reason(data, reason):
    with pytest.raises(DocError) as e:
        parse_doc("bad.md", data)
    assert reason in str(e.value)
    assert "\n" not in str(e.value)


def test_windows_line_endings_and_bom():
    doc = parse_doc(
        "w.md", "\ufeff---\r\ntitle: Win\r\nintent: api\r\n---\r\n# Win\r\n\r\nBody\r\n".encode()
    )
    assert (doc.title, doc.intent) == ("Win", "api")


def test_intents_yaml(tmp_path):
    write_docs(
        tmp_path,
        {
            "intents.yaml": (
                "api:\n  description: The REST API\n  examples:\n    - How do I paginate?\n"
                "billing: Plans\n"
            )
        },
    )
    info = load_intents_yaml(tmp_path)
    assert info["api"].description == "The REST API" and info["api"].examples == [
        "How do I paginate?"
    ]
    assert info["billing"].description == "Plans"
    assert load_intents_yaml(tmp_path / "missing") == {}


def test_symlinks_are_followed_only_inside_the_docs_folder(tmp_path):
    from index.loader import walk_docs

    (tmp_path / ".env").write_text("SLACK_BOT_TOKEN=xoxb-secret\n")
    docs = write_docs(tmp_path / "docs", {"a.md": "# A\ntext\n", "sub/b.md": "# B\ntext\n"})
    (docs / "notes.md").symlink_to("../.env")  # the leak of the issue
    (docs / "alias.md").symlink_to("a.md")  # inside: the doc it lands on, once, at its own path
    (docs / "gone.md").symlink_to("missing.md")
    (docs / "self.md").symlink_to("self.md")
    (docs / "again").symlink_to(".")  # a folder inside: walked where it is
    (docs / "outside").symlink_to(tmp_path)
    (docs / "mirror").symlink_to("sub")  # a folder inside: its docs at their own paths
    (docs / "hidden").symlink_to(".git")
    (docs / ".git").mkdir()
    (docs / ".git" / "c.md").write_text("# C\n")
    walk = walk_docs(docs)
    assert [p.relative_to(docs).as_posix() for p in walk.files] == ["a.md", "sub/b.md"]
    reasons = {s["path"]: s["reason"] for s in walk.skipped}
    assert set(reasons) == {"notes.md", "gone.md", "self.md", "outside", "hidden"}
    assert "outside the docs folder" in reasons["notes.md"]
    assert "outside the docs folder" in reasons["outside"]
    assert "does not exist" in reasons["gone.md"]
    assert "loop" in reasons["self.md"]
    assert "hidden" in reasons["hidden"]


def test_a_folder_link_is_judged_by_where_it_lands_in_any_walk_order(tmp_path, local_embedder):
    """A link to a folder walked after it (`aaa -> zzz`) or before it (`zzz -> aaa`) adds no doc
    and no second path: each doc is indexed once, at its real path, and a scope's folder holds
    the docs that live in it, not those a link inside it points to."""
    from bot.scopes import parse_scopes
    from router.engine import Engine
    from router.pipeline import Pipeline

    secret = "# Payroll\n\nThe payroll export runs at 02:00 with the key PX-77.\n"
    for link, target in (("billing/aaa", "zzz"), ("billing/zzz", "aaa"), ("zoo/mm", "aaa")):
        root = tmp_path / link.replace("/", "-")
        files: dict[str, str | bytes] = {
            "billing/plans.md": "---\nintent: billing\n---\n# Plans\n\nThe Pro plan is $20.\n",
            f"{target}/payroll.md": f"---\nintent: hr\n---\n{secret}",
            "zoo/other.md": "# Other\n\nAnything.\n",
        }
        docs = write_docs(root / "docs", files)
        (docs / link).symlink_to(Path("..") / target)
        walk = walk_docs(docs)
        paths = [p.relative_to(docs).as_posix() for p in walk.files]
        assert paths == sorted(["billing/plans.md", f"{target}/payroll.md", "zoo/other.md"])
        assert walk.skipped == []
        db = root / "i.db"
        summary = index_folder(db, docs, local_embedder)
        assert sorted(summary.added) == paths  # once each, whichever is walked first
        scopes = parse_scopes(
            "channels: {CBILLING: {folders: [billing/]}}", {"billing", "hr", "general"}, paths
        )
        billing = scopes.by_key["CBILLING"]
        answer = Pipeline(Engine(str(db), local_embedder)).answer(
            "When does the payroll export run?", scope=billing
        )
        assert all(h["doc"].startswith("billing/") for h in answer.trace.hits), link
        assert "PX-77" not in answer.text


def test_a_symlink_to_a_secret_is_not_indexed_and_is_named(tmp_path, capsys):
    from bot.cli import main

    (tmp_path / ".env").write_text("SLACK_BOT_TOKEN=xoxb-secret\n")
    docs = write_docs(tmp_path / "docs", {"a.md": "# A\n\nAlpha.\n"})
    (docs / "notes.md").symlink_to("../.env")
    db = str(tmp_path / "i.db")
    assert main(["index", str(docs), "--db", db, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "added 1" in out and "skipped 1" in out
    assert "skipped notes.md: symbolic link to a file outside the docs folder" in out
    assert main(["search", "SLACK_BOT_TOKEN", "--db", db, "--json"]) == 0
    assert "xoxb-secret" not in capsys.readouterr().out


def test_intent_names_are_short_slugs():
    def intent(value: str) -> str:
        return parse_doc("a.md", f"---\nintent: {value}\n---\n# A\ntext\n".encode()).intent

    assert intent("API") == "api" and intent(" billing_v2 ") == "billing_v2"
    assert intent('""') == "general"
    with pytest.raises(DocError, match="not a valid intent name.*e.g. 'getting-started'"):
        intent("Getting Started")
    with pytest.raises(DocError) as e:
        intent("x" * 100_000)
    assert "100,000 characters" in str(e.value) and len(str(e.value)) < 250


def test_a_huge_intent_is_rejected_and_named_in_the_summary(tmp_path, local_embedder):
    from index.indexer import index_folder

    docs = write_docs(
        tmp_path / "docs",
        {"ok.md": "# Ok\n\nFine.\n", "huge.md": f"---\nintent: {'x' * 100_000}\n---\n# H\n\nh\n"},
    )
    summary = index_folder(tmp_path / "i.db", docs, local_embedder)
    assert summary.added == ["ok.md"]
    [skipped] = summary.skipped
    assert skipped["path"] == "huge.md" and "not a valid intent name" in skipped["reason"]


@pytest.mark.parametrize(
    "front_matter, reason",
    [
        ("intent: [a, b]", "'intent' must be a single name"),
        ("a: &a [1, 2]\nb: [" + ", ".join(["*a"] * 51) + "]", "more than 50 YAML aliases"),
        ("deep: " + "[" * 5000 + "]" * 5000, "nested deeper than 20 levels"),
    ],
)
def test_front_matter_schema(front_matter, reason):
    with pytest.raises(DocError) as e:
        parse_doc("a.md", f"---\n{front_matter}\n---\n# A\ntext\n".encode())
    assert reason in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "front_matter, field, reason",
    [
        ("url: javascript:alert(1)", "url", "not an http(s) link"),
        ("url: https://example.com/a b", "url", "not an http(s) link"),
        ("url: https://example.com/<script>", "url", "not an http(s) link"),
        ("url: https://docs.example/\u202egnp.exe", "url", "invisible characters"),
        ("url: [https://example.com]", "url", "'url' must be text, got a list"),
        (f"title: {'t' * 201}", "title", "'title' is 201 characters (at most 200)"),
        ("version: {a: 1}", "version", "'version' must be text, got a mapping"),
        ("related_intents: 7", "related_intents", "must be a list, got int"),
        ("related_intents: [Two Words]", "related_intents", "not a valid intent name"),
        ("owner: <script>x</script>", "owner", "is not an owner"),
        ("owner: [U1]", "owner", "got a list"),
        ("reviewed: last week", "reviewed", "must be a date such as 2026-03-01"),
        ("reviewed: 2999-01-01", "reviewed", "'reviewed' 2999-01-01 is in the future"),
        ("review_every: often", "review_every", "'often' is not a duration of a day or more"),
        ("review_every: 3h", "review_every", "is not a duration of a day or more"),
        ("watches: {a: 1}", "watches", "must be a path or a list of them, got a mapping"),
        ("watches: [../secrets]", "watches", "is not a path inside the repository"),
        ("watches: [-upload-pack]", "watches", "is not a path inside the repository"),
        (f"watches: [{', '.join(['a'] * 21)}]", "watches", "has 21 paths (at most 20)"),
    ],
)
def test_a_bad_optional_field_is_left_out_with_a_warning(front_matter, field, reason):
    """One bad optional field costs the field, never the doc's content."""
    doc = parse_doc("a.md", f"---\nintent: api\n{front_matter}\n---\n# A\ntext\n".encode())
    [warning] = doc.warnings
    assert reason in warning and warning.endswith("the field is left out"), warning
    assert "\n" not in warning and doc.intent == "api" and doc.title == "A"
    assert getattr(doc, field) in (None, [], "A")  # the title falls back to the heading


def test_owners_and_freshness_fields_are_read():
    doc = parse_doc(
        "a.md",
        b"---\nowner: Alice Ng\nreviewed: 2026-01-15\nreview_every: 12w\n"
        b"watches: [src/billing/, /api/openapi.yaml]\n---\n# A\ntext\n",
    )
    assert (doc.owner, doc.reviewed, doc.review_every) == ("Alice Ng", "2026-01-15", "12w")
    assert doc.watches == ["src/billing", "api/openapi.yaml"] and not doc.warnings
    for written, stored in (
        ("'<@U0ALICE>'", "U0ALICE"),
        ("SAM", "SAM"),
        ("'@docs-team'", "@docs-team"),
    ):
        assert parse_doc("a.md", f"---\nowner: {written}\n---\n# A\nt\n".encode()).owner == stored
    from index.loader import is_slack_owner

    assert is_slack_owner("U0ALICE") and is_slack_owner("#docs") and not is_slack_owner("SAM")


def test_long_headings_make_bounded_titles():
    assert len(parse_doc("a.md", f"# {'w' * 5000}\n\ntext\n".encode()).title) == 200


@pytest.mark.parametrize(
    "yaml_text, reason",
    [
        ("api:\n  examples: How do I paginate?\n", "'api' examples must be a list of questions"),
        ("api:\n  description: [a, b]\n", "'api' description must be text, got a list"),
        (f"api: {'d' * 2001}\n", "'api' description is 2,001 characters"),
        ("Two Words: x\n", "not a valid intent name"),
        (
            'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
            "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
            "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
            "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n",
            "more than 50 YAML aliases",
        ),
        ("- a\n- b\n", "must map each intent name"),
    ],
)
def test_intents_yaml_schema(tmp_path, yaml_text, reason):
    write_docs(tmp_path, {"intents.yaml": yaml_text})
    with pytest.raises(DocError) as e:
        load_intents_yaml(tmp_path)
    assert reason in str(e.value) and "\n" not in str(e.value)


def test_intents_yaml_link_outside_is_not_read(tmp_path):
    (tmp_path / "secret.yaml").write_text("api: the secret\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "intents.yaml").symlink_to("../secret.yaml")
    with pytest.raises(DocError, match="outside the docs folder"):
        load_intents_yaml(tmp_path / "docs")


def test_unknown_related_intents_are_warnings(tmp_path, local_embedder):
    from index.indexer import index_folder

    docs = write_docs(
        tmp_path / "docs",
        {
            "a.md": "---\nintent: api\nrelated_intents: [billing, biling]\n---\n# A\n\nAlpha.\n",
            "b.md": "---\nintent: billing\n---\n# B\n\nBeta.\n",
        },
    )
    summary = index_folder(tmp_path / "i.db", docs, local_embedder)
    assert summary.warnings == [{"path": "a.md", "warning": "related intent 'biling' is unknown"}]
    assert len(summary.added) == 2


def test_the_shared_eval_sets_and_the_examples_pass_the_schema():
    from index.loader import walk_docs
    from tests.conftest import EXAMPLES, SHARED_EVAL

    roots = [EXAMPLES, *sorted(p / "docs" for p in SHARED_EVAL.glob("*") if (p / "docs").is_dir())]
    for root in roots:
        walk = walk_docs(root)
        assert walk.files and walk.skipped == []
        for path in walk.files:
            parse_doc(path.relative_to(root).as_posix(), path.read_bytes())  # raises if rejected
        load_intents_yaml(root)


def test_front_matter_closing_lines_and_body_offset():
    # python-frontmatter splits it; the body's offset into the file is kept for the chunks
    for md in ("---\ntitle: A\n...\n# H\n\ntext\n", "---  \ntitle: A\n---\n# H\n\ntext\n"):
        doc = parse_doc("a.md", md.encode())
        assert doc.title == "A" and doc.text[doc.body_start :] == "# H\n\ntext\n"
    # an opening line without a closing one is no front matter: the whole file is the body
    doc = parse_doc("b.md", b"---\n# H\n\ntext\n")
    assert doc.body_start == 0 and doc.title == "H"


def alias_bomb(levels: int = 20, leaf: int = 1000) -> str:
    """An intents.yaml whose first example holds `levels` anchors, each a list of the one before
    twice (2 aliases a level, under the 50-alias limit): read whole, 2**levels copies of a
    `leaf`-letter string. The example is no question, so the loader's message is where it
    would be printed whole."""
    chain = [f"&l0 {'x' * leaf}"] + [f"&l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, levels)]
    return f"api:\n  description: the API\n  examples:\n    - [{', '.join(chain)}]\n"


def test_an_alias_bomb_is_refused_in_bounded_memory(tmp_path):
    """In a process that may use 600 MB of address space at most: the 23 KB file would read as
    a gigabyte; it is refused in one line, with nothing expanded."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    write_docs(tmp_path, {"intents.yaml": alias_bomb()})
    also = "\n".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, 20))
    write_docs(tmp_path / "fm", {"a.md": f"---\na0: &a0 {'y' * 1000}\n{also}\n---\n# A\n\nt\n"})
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (600 << 20, 600 << 20))\n"
        "from pathlib import Path\n"
        "from index.loader import DocError, load_intents_yaml, parse_doc\n"
        "for load in (lambda: load_intents_yaml(Path(sys.argv[1])),"
        " lambda: parse_doc('a.md', Path(sys.argv[1], 'fm', 'a.md').read_bytes())):\n"
        "    try:\n        load()\n    except DocError as e:\n        print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-500:]
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and all("YAML aliases" in line for line in lines), lines
    assert lines[0].startswith("intents.yaml reads as over 4 times its own size")
    assert lines[1].startswith("front matter reads as over 4 times its own size")


def test_a_few_aliases_are_read_and_a_bad_example_is_shown_short(tmp_path):
    write_docs(
        tmp_path,
        {"intents.yaml": "o: &o U0OWNER\napi:\n  owner: *o\nbilling:\n  owner: *o\n"},
    )
    assert {k: v.owner for k, v in load_intents_yaml(tmp_path).items()} == {
        "o": None,
        "api": "U0OWNER",
        "billing": "U0OWNER",
    }
    write_docs(tmp_path, {"intents.yaml": "api:\n  examples: [[" + "x, " * 10_000 + "x]]\n"})
    with pytest.raises(DocError) as e:
        load_intents_yaml(tmp_path)
    assert "examples must be questions (text), got ['x', 'x', 'x', 'x', ...]" in str(e.value)


def test_a_doc_with_a_bad_link_keeps_its_content(examples_db, tmp_path, capsys):
    """Through the command line: the doc is indexed, the field named in a warning, and its
    section answers."""
    import json
    import shutil

    from bot.cli import main
    from tests.conftest import EXAMPLES

    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES, docs)
    (docs / "pelican.md").write_text(
        "---\nintent: troubleshooting\nurl: 'https://wiki.example.com/pelican gateway'\n---\n"
        "# Pelican gateway\n\n## What do I do when the pelican gateway is down?\n\n"
        "Restart the pelican gateway with `tide gateway restart --pelican`, then page the"
        " on-call engineer in #pelican-ops if it is still down after five minutes.\n"
    )
    assert main(["index", str(docs), "--db", examples_db, "--replace"]) == 0
    out = capsys.readouterr().out
    assert "added 1" in out and "skipped 0" in out
    assert "warning pelican.md: front matter 'url'" in out and "the field is left out" in out
    q = "What do I do when the pelican gateway is down?"
    assert main(["ask", q, "--db", examples_db, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["decision"] != "ABSTAIN" and "tide gateway restart" in answer["text"]
