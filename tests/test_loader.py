import pytest

from index.loader import DocError, load_intents_yaml, parse_doc
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
