"""markdown-it-py as the indexer reads markdown: the block parser (CommonMark with GFM tables),
which headings start a section, and what a line of markup left by a converter looks like."""

from __future__ import annotations

import re
from collections.abc import Iterable

from markdown_it import MarkdownIt
from markdown_it.token import Token

SPLIT_LEVELS = 4  # H1-H4 start a chunk; H5/H6 stay inside their section
TITLE_PREFIX = 64 * 1024  # characters read for a doc's first heading
# A heading is a title: at most as long as a front-matter title (index/loader.py MAX_TITLE); a
# longer one is cut with a mark. Headings travel into every chunk's path, the search text, the
# quotes' attributions and each answer's sources: a 30,000-character one made an answer's
# sources 30,078 characters, which Slack refused.
MAX_HEADING = 200


def capped(title: str, limit: int = MAX_HEADING) -> str:
    """`title` in at most `limit` characters, cut at a word with "…" when longer."""
    if len(title) <= limit:
        return title
    cut = title[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + "…"


# block structure only: inline markup (emphasis, links) is not needed to cut a doc into blocks.
# GFM tables are found in the paragraphs markdown-it gives (`table_at`), not by its table rule:
# that rule makes three tokens of every cell, and a 4.9 MB table (100,000 columns, or 480,000
# rows of two) took 1-2 GB to cut into chunks; a paragraph is one token whatever its size.
BLOCKS = MarkdownIt("commonmark")
BLOCKS.disable(["inline", "text_join"])

# a GFM table's delimiter row ("| --- | :-: |", "---|---"), within a list or block quote too
DELIMITER_ROW = re.compile(r"[ \t>]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")


def _columns(row: str) -> int:
    row = row.strip().lstrip("> \t").strip()
    inner = row.removeprefix("|").removesuffix("|")
    return len(re.findall(r"(?<!\\)\|", inner)) + 1


def table_at(lines: Iterable[str]) -> int | None:
    """The index of the header row of the first GFM table in a paragraph's `lines` (a header
    row, then a delimiter row of as many columns, a pipe in it; the rows after it belong to
    the table up to the paragraph's end), or None."""
    previous = None
    for i, line in enumerate(lines):
        if (
            previous is not None
            and "|" in line
            and "-" in line
            and DELIMITER_ROW.fullmatch(line)
            and _columns(previous) == _columns(line)
        ):
            return i - 1
        previous = line
    return None


# A line that is markup, not text: it ends the paragraph or list it stands in and is never quoted
# (what it marks, an admonition's text, is): AsciiDoc block attributes and admonition labels
# ("[NOTE]", "[source,yaml]"), delimiters and rules ("----", "====", "***", "|==="), GitHub
# alerts ("> [!NOTE]"), MkDocs and Docusaurus admonitions ("!!! note", ":::tip"), images and
# badges, an HTML tag or comment, a Hugo / Jinja shortcode ("{{< note >}}"), a reStructuredText
# directive (".. note::"), a table-of-contents tag, or what an AsciiDoc converter left unprocessed
# (a preprocessor directive "ifdef::openshift[]", an attribute entry ":toc:", an anchor
# "[[install]]") alone on its line.
MARKUP_LINE = re.compile(
    r"""^\s*(?:
        \[[A-Za-z][^\[\]]{0,60}\]
        |([-=*_.+~])\1{2,} | (?:[-*_][ \t]*){3,} | \|===
        |\[![A-Za-z]+\][-+]?
        |(?:!!!|\?\?\?\+?)[ \t]*[A-Za-z]+.* | :::+.*
        |(?:\[?!\[[^\]]*\](?:\([^)]*\)|\[[^\]]*\])?\]?(?:\([^)]*\))?[ \t]*)+
        |<!--.*--> | </?[A-Za-z][^>]*>
        |\{\{[<%].*[%>]\}\} | \{%.*%\} | \.\.[ \t]+[\w-]+::.* | \[\[_?TOC_?\]\]
        |(?:ifn?def|ifeval|endif|include|toc)::\S*\[.*\]
        |:!?[\w-]+!?: | :\w+(?:-\w+)+:[ \t].* | \[\[[\w:.-]+\]\]
    )\s*$""",
    re.X,
)


def section_heading(tokens: list[Token], i: int, after_blank: bool) -> tuple[int, str] | None:
    """(level, title) when tokens[i] opens an H1-H4 heading that starts a section. A setext
    underline counts only under a single line that follows a blank line (or starts the doc), is
    not itself markup and does not end like a sentence: "[NOTE]" over "----", the text between
    AsciiDoc's "----" delimiters and a sentence over one are a converter's leftovers."""
    if tokens[i].type != "heading_open":
        return None
    level, title = int(tokens[i].tag[1]), tokens[i + 1].content.strip()
    if level > SPLIT_LEVELS or not title:
        return None
    if tokens[i].markup in ("=", "-") and (
        not after_blank or "\n" in title or title[-1] in ".:;" or MARKUP_LINE.match(title)
    ):
        return None
    return level, capped(title)


def first_heading(markdown: str) -> str | None:
    """The title of the first heading (ATX or setext, any level, by the rules above for setext),
    read from the first 64 KB (at a line's end): a doc's title when its front matter has none."""
    cut = markdown.rfind("\n", 0, TITLE_PREFIX) if len(markdown) > TITLE_PREFIX else len(markdown)
    tokens = BLOCKS.parse(markdown[: cut if cut > 0 else TITLE_PREFIX])
    prev_end = 0
    for i, token in enumerate(tokens):
        if token.level != 0 or token.nesting == -1 or token.map is None:
            continue
        first, last = token.map
        if token.type == "heading_open":
            title = tokens[i + 1].content.strip()
            setext = token.markup in ("=", "-")
            ok = not setext or section_heading(tokens, i, first == 0 or first > prev_end)
            if title and ok:
                return capped(title)
        prev_end = last
    return None
