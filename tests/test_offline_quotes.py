"""Offline answers quote text, never markup or navigation: admonition markers and block delimiters
of docs converted from AsciiDoc, MkDocs / Docusaurus / GitHub admonitions, images, link lists,
breadcrumbs and page chrome stay out of every quote, the text they mark stays in, and every quote
is still a verbatim piece of its chunk. Chrome and lists of cross-references are found by the
corpus's statistics (index/furniture.py), so the docs here are pages of one site, each ending
with its chrome, beside the pages their navigation lists link to."""

import re

from index.chunker import block_spans, chunk_doc
from index.furniture import count
from index.indexer import index_folder
from index.loader import parse_doc
from index.search import Hit
from router import offline
from router.answer import ABSTAIN, occurs_in
from router.engine import Engine
from router.pipeline import Pipeline
from router.units import furniture, sentences, units_of
from tests.conftest import write_docs

# what a converter from AsciiDoc leaves in markdown (as in the OpenShift docs)
ASCIIDOC = """---
title: Pruning deployments
---
# Pruning deployment resources

:product-title: OpenShift
[[pruning-deployments]]
ifdef::openshift-enterprise[]
You can prune resources associated with deployments that are no longer required.
endif::[]

[NOTE]
----
To also prune replica sets associated with Deployment objects, use the --replica-sets flag.
----

1. To actually perform the prune operation, add the --confirm flag:

```terminal
$ oc adm prune deployments --orphans --keep-complete=5 --confirm
```

You must run the prune command as a cluster administrator.

[IMPORTANT]
====
Pruning deployments cannot be undone once it has run.
====
![Pruning workflow diagram]
The pruner keeps the five most recent complete deployments by default.

```terminal
$ oc create token build-robot
```

* Rebooting a node gracefully
* Creating service accounts

# Additional resources

* Adding a replication repository to the web console
* Configuring the image pruner
* If you prune often, see Image pruning for the schedule that suits a busy registry.

## Network for the guest machines

* Dedicated physical adapter or virtual function
* Shared Ethernet Adapter of the I/O server

## .spec.imagePullSecrets

Description::
ImagePullSecrets lists the secrets used to pull images. More info: https://kubernetes.io/docs/concepts/containers/images#specifying-imagepullsecrets
Type:: array
"""

MKDOCS = """# Caching

[![Build](https://ci.example.com/badge.svg)](https://ci.example.com)

!!! warning "Cache size"
    The cache keeps at most 512 MB on disk and evicts the oldest entries first.

???+ tip
    Set CACHE_DIR to move the cache to a bigger disk.

:::note
Docusaurus admonitions clear the cache of a site when it is rebuilt.
:::

{{< note >}}
Hugo notes keep the cache between two builds of a site.
{{< /note >}}

<!-- generated, do not edit -->
<img src="cache.png" alt="How the cache fills up">
***
The cache is shared by every worker on the machine.

**See also**

* Cache eviction policies
* Sizing the cache disk

##### Related topics

- Worker pools and their limits
"""

GITHUB = """Home > Guides > Access tokens

# Access tokens

> [!NOTE]
> Access tokens expire after 90 days unless you renew them.

> [!WARNING]
> Never paste an access token into a public issue.

:warning: Renewing an access token keeps all of its scopes.

To change the menu, open
Settings
>
Tokens
and press Renew.

## See also

- [Creating an access token](create.md)
- [Revoking an access token](revoke.md)

[Edit this page](https://example.com/edit) | [Report a problem](https://example.com/issue)

Was this page helpful?
"""

# the pages the navigation lists link to: their titles are what a list of cross-references lists
LINKED = [
    "Cache eviction policies",
    "Sizing the cache disk",
    "Worker pools and their limits",
    "Adding a replication repository to the web console",
    "Configuring the image pruner",
]
# the site's chrome, at the end of every page
CHROME = "\n[Edit this page](https://example.com/edit)\n\nWas this page helpful?\n"
DOCS: dict[str, str | bytes] = {
    "pruning.md": ASCIIDOC + CHROME,
    "caching.md": MKDOCS + CHROME,
    "tokens.md": GITHUB,
    **{
        f"linked-{i}.md": f"# {title}\n\nThis page is about {title.lower()}, at length.\n{CHROME}"
        for i, title in enumerate(LINKED)
    },
}
MARKUP = re.compile(
    r"\[(NOTE|IMPORTANT|TIP|WARNING|CAUTION)\]|\[!\w+\]|-{4}|={4}|\*{3}|!\[|!!!|\?\?\?|:::"
    r"|<!--|<img|^>|::|\{\{|\[!\[|\[\[|:product"
)
NAVIGATION = [
    "Cache eviction policies",
    "Sizing the cache disk",
    "Worker pools and their limits",
    "Rebooting a node gracefully",
    "Creating service accounts",
    "Adding a replication repository",
    "Configuring the image pruner",
    "Home > Guides",
    "Creating an access token",
    "Edit this page",
    "Was this page helpful",
]


def records() -> list[dict]:
    """Each chunk of the docs, its record as the index stores it."""
    out = []
    for name in sorted(DOCS):
        text = DOCS[name]
        doc = parse_doc(name, text.encode() if isinstance(text, str) else text)
        for c in chunk_doc(doc):
            out.append(
                {
                    "id": c.id,
                    "doc": c.doc,
                    "title": doc.title,
                    "heading_path": c.heading_path,
                    "text": c.text,
                    "start": c.start,
                }
            )
    return out


def hits_of() -> list[Hit]:
    """Each chunk of the docs as a search hit."""
    hits = []
    for i, record in enumerate(records()):

        def fetch(rows: list[int], r: dict = record) -> list[dict]:
            return [r]

        hits.append(Hit(i, 1.0, 1.0, 1.0, "general", i, fetch))
    return hits


def test_no_unit_quotes_markup_or_navigation_and_each_is_verbatim():
    corpus = count(records())
    units = [u for h in hits_of() for u in units_of(h, corpus)]
    texts = [u.text for u in units]
    for u in units:
        assert occurs_in(u.text, u.hit.chunk["text"]), u.text
        if u.kind != "code":
            assert not MARKUP.search(u.text), u.text
        assert not any(n in u.text for n in NAVIGATION), u.text
        assert not u.text.startswith("https://"), u.text
    # what the markers mark is content, and quotable on its own
    for content in [
        "You can prune resources associated with deployments that are no longer required.",
        "To also prune replica sets associated with Deployment objects, use the --replica-sets"
        " flag.",
        "Pruning deployments cannot be undone once it has run.",
        "The pruner keeps the five most recent complete deployments by default.",
        "The cache keeps at most 512 MB on disk and evicts the oldest entries first.",
        "Set CACHE_DIR to move the cache to a bigger disk.",
        "Docusaurus admonitions clear the cache of a site when it is rebuilt.",
        "Hugo notes keep the cache between two builds of a site.",
        "The cache is shared by every worker on the machine.",
        "Access tokens expire after 90 days unless you renew them.",
        "Never paste an access token into a public issue.",
        # an emoji shortcode is no AsciiDoc attribute entry: its line is kept (the emoji alone
        # is furniture)
        "Renewing an access token keeps all of its scopes.",
        "ImagePullSecrets lists the secrets used to pull images.",
        # a menu path inside a paragraph is no blockquote, it is reflowed onto one line
        "To change the menu, open Settings > Tokens and press Renew.",
    ]:
        assert content in texts, content
    # in a navigation section, a sentence is still content
    assert (
        "* If you prune often, see Image pruning for the schedule that suits a busy registry."
        in texts
    )
    # a list that is all its section says is content, even when it reads like link titles
    assert "* Dedicated physical adapter or virtual function" in texts
    # a procedure's steps, without their lead-in lost, are still items
    assert any(t.startswith("1. To actually perform the prune operation") for t in texts)


def test_markup_lines_end_the_block_they_stand_in():
    text = "Some text here.\n[NOTE]\n----\nA note.\n----\nMore text.\n"
    blocks = [[text[s:e] for s, e in lines] for _, lines in block_spans(text)]
    assert blocks == [["Some text here."], ["A note."], ["More text."]]
    quote = "> [!TIP]\n> First line\n> second line.\n"
    assert [(k, [quote[s:e] for s, e in ls]) for k, ls in block_spans(quote)] == [
        ("quote", ["First line", "second line."])
    ]


def test_a_sentence_after_a_code_block_starts_its_own_line():
    hit = next(h for h in hits_of() if h.chunk["heading_path"] == ["Pruning deployment resources"])
    units = units_of(hit)
    code = next(u for u in units if u.kind == "code" and "--confirm" in u.text)
    after = next(u for u in units if u.text.startswith("You must run the prune command"))
    (passage,) = offline._passages([code, after])
    assert passage.text.endswith("```\nYou must run the prune command as a cluster administrator.")
    assert occurs_in(passage.text, hit.chunk["text"])


def cut(text: str) -> list[str]:
    return [text[s:e] for s, e in sentences(text, 0, len(text))]


def test_code_flattened_into_prose_is_not_cut_into_fragments():
    text = (
        'During high load you may receive an error: data: {"type": "error", "error": '
        '{"type": "overloaded_error", "message": "Overloaded"}} Retry later. Then call '
        "client . messages . create ( model = 1 ) again."
    )
    assert cut(text) == [
        "During high load you may receive an error: data:",
        '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
        "Retry later.",  # prose after the code is a sentence of its own
        "Then call client . messages . create ( model = 1 ) again.",
    ]
    # an unclosed bracket holds a sentence together only so far
    long = "Call f( " + "word " * 120 + "end. Next sentence."
    assert len(cut(long)) == 2


def test_a_colon_or_semicolon_running_on_in_lowercase_does_not_end_a_sentence():
    # cut there, "features, performance, and cost." was quoted alone, a fragment
    text = (
        "Define requirements: features, performance, and cost. Retries stop; the event is"
        " dropped. To add a case: Click Add."
    )
    assert cut(text) == [
        "Define requirements: features, performance, and cost.",
        "Retries stop; the event is dropped.",
        "To add a case:",  # a lead-in, which brings what it introduces
        "Click Add.",
    ]


def test_navigation_and_chrome_are_furniture_menu_paths_are_not():
    corpus = count(records())
    # a site's chrome is on every page: found by the statistics, whatever its words
    for line in ["Was this page helpful?", "[Edit this page](https://example.com/edit)"]:
        assert corpus.line(line), line
    assert not corpus.line("This page is about sizing the cache disk, at length.")
    for nav in [
        "https://kubernetes.io/docs/concepts/containers/images#specifying-imagepullsecrets",
        "* [Creating an access token](create.md)",
        "[Edit this page](https://x.test/edit) | [Report a problem](https://x.test/issue)",
        "Home > Guides > Access tokens",
        "Docs › Getting started › Install",
        "[← Previous: Installing](install.md)",
        "AWS CLI AWS CLI",
        "Boto3 (Python) Boto3 (Python)",
        "Python Python TypeScript TypeScript",
    ]:
        assert furniture(nav), nav
    for text in [
        "Settings > Picture > Picture Mode",
        "Open Settings > Sound > Equalizer to change it.",
        "See [Rate limits](rate-limits.md) for the limits of each plan.",
        "Next, run the installer and reboot.",
    ]:
        assert not furniture(text), text


# the end of a scraped page: its last sentence, the previous / next links rendered twice (once
# with the spaces lost), its contents rendered twice, and a tip rendered twice
SCRAPED_END = """To see code examples, check out the Classification Guide in the Cookbooks.
OverviewTicket Routingxlinkedin
OverviewTicket Routing
xlinkedin
When to use Claude for classification Establish your use case 1. Build a strong prompt
When to use Claude for classificationEstablish your use case1. Build a strong prompt
Power user tip : Combine XML tags with chain of thought. This creates structured prompts.
Power user tip: Combine XML tags with chain of thought.This creates structured prompts.
"""


def test_what_a_scraped_page_says_twice_is_left_out_or_quoted_once():
    chunk = {"id": "c", "doc": "d.md", "title": "Deploy", "heading_path": [], "text": SCRAPED_END}
    units = units_of(Hit(0, 1.0, 1.0, 1.0, "general", 0, lambda rows: [chunk]))
    quoted = " ".join(u.text for u in units)
    assert units[0].text.endswith("the Classification Guide in the Cookbooks.")
    assert "xlinkedin" not in quoted and "When to use" not in quoted  # menu and contents: out
    assert " ".join(u.text for u in units[1:]) == (  # the tip: its better-spaced copy, once
        "Power user tip : Combine XML tags with chain of thought. This creates structured prompts."
    )
    assert all(occurs_in(u.text, SCRAPED_END) for u in units)


def test_offline_answers_over_noisy_docs_are_clean_and_checked(tmp_path, local_embedder):
    db = tmp_path / "noisy.db"
    index_folder(db, write_docs(tmp_path / "docs", DOCS), local_embedder)
    p = Pipeline(Engine(str(db), local_embedder))
    for question, expected in [
        ("How do I also prune replica sets of Deployment objects?", "--replica-sets flag"),
        ("How much disk does the cache keep?", "512 MB"),
        ("When do access tokens expire?", "90 days"),
    ]:
        ans = p.answer(question)
        assert ans.decision != ABSTAIN, question
        assert expected in ans.text
        quoted = [line[2:] for line in ans.text.split("\n") if line.startswith("> ")]
        for line in quoted:
            assert not re.search(r"\[(NOTE|IMPORTANT)\]|\[!\w+\]|^-{4}|^={4}|!!!|!\[", line), line
            assert not re.match(r"```[ \t]+\S", line), line  # no text glued to a fence
        assert ans.citations and all(c.verified for c in ans.citations)
        chunks = {h["id"]: h["text"] for h in ans.trace.hits}
        assert all(any(occurs_in(c.cited_text, t) for t in chunks.values()) for c in ans.citations)


def test_html_entities_of_converted_docs_are_decoded_in_quotes_and_still_verified():
    chunk: dict = {
        "id": "c1",
        "title": "Driver Toolkit",
        "heading_path": ["Driver Toolkit"],
        "text": "The Driver Toolkit&#8217;s image holds the kernel packages. Run it as"
        " &lt;name&gt; in the &quot;drivers&quot; namespace.",
    }
    units = units_of(Hit(0, 1.0, 1.0, 1.0, "general", 0, lambda rows: [chunk]))
    assert [u.text for u in units] == [
        "The Driver Toolkit’s image holds the kernel packages.",
        'Run it as <name> in the "drivers" namespace.',
    ]
    assert all(occurs_in(u.text, chunk["text"]) for u in units)
    # a quote as Claude may give it (entities decoded) is found in the source as well
    assert occurs_in("Driver Toolkit’s image", chunk["text"])
    assert not occurs_in("Driver Toolkit's kernel", chunk["text"])


def test_a_run_of_label_lines_is_quoted_a_line_each():
    text = (
        "The pages below go from the broadest techniques to the most specialised ones.\n"
        "Be clear and direct\nUse examples (multishot)\nUse XML tags\nLong context tips\n\n"
        "To change it, open\nSettings\n>\nSound\n>\nEqualizer\nand move the sliders.\n\n"
        "Wrapped lines of one sentence\nstay one sentence when they\ndo not each start a label."
    )
    chunk: dict = {"id": "c", "title": "Guide", "heading_path": ["Guide"], "text": text}
    units = units_of(Hit(0, 1.0, 1.0, 1.0, "general", 0, lambda rows: [chunk]))
    assert [(u.kind, u.text) for u in units] == [
        (
            "sentence",
            "The pages below go from the broadest techniques to the most specialised ones.",
        ),
        ("item", "Be clear and direct"),
        ("item", "Use examples (multishot)"),
        ("item", "Use XML tags"),
        ("item", "Long context tips"),
        ("sentence", "To change it, open Settings > Sound > Equalizer and move the sliders."),
        (
            "sentence",
            "Wrapped lines of one sentence stay one sentence when they do not each start a label.",
        ),
    ]
