from index.chunker import chunk_doc
from index.loader import parse_doc


def chunks_of(md: str, max_chars: int = 2000, path: str = "doc.md"):
    doc = parse_doc(path, md.encode())
    return doc, chunk_doc(doc, max_chars)


def test_heading_paths_and_offsets():
    doc, chunks = chunks_of("""---
title: Auth guide
intent: authentication
---
# Auth guide

Intro.

## Login

How to log in.

### Errors

Error text.

#### Rare errors

Rare.

## Logout

Bye.
""")
    assert [c.heading_path for c in chunks] == [
        ["Auth guide"],
        ["Auth guide", "Login"],
        ["Auth guide", "Login", "Errors"],
        ["Auth guide", "Login", "Errors", "Rare errors"],
        ["Auth guide", "Logout"],
    ]
    for c in chunks:
        assert doc.text[c.start : c.end] == c.text
    assert chunks[2].search_text.startswith("Auth guide > Login > Errors\n\n")


def test_title_is_prepended_when_not_the_first_heading():
    _, chunks = chunks_of("---\ntitle: Rate limits\n---\n## Headers\n\nRetry-After.\n")
    assert chunks[0].search_text.startswith("Rate limits > Headers\n\n")


def test_hash_lines_inside_code_fences_are_not_headings():
    _, chunks = chunks_of("""# Setup

Run:

```bash
# install the CLI
pip install tide
## still a comment
```

~~~python
# a comment
````
not the end either
~~~

## Next

done
""")
    assert [c.heading_path for c in chunks] == [["Setup"], ["Setup", "Next"]]
    assert "# install the CLI" in chunks[0].text and "## still a comment" in chunks[0].text
    assert "not the end either" in chunks[0].text


def test_h5_stays_inside_its_section():
    _, chunks = chunks_of("# A\n\ntext\n\n##### Note\n\nmore\n")
    assert len(chunks) == 1 and "##### Note" in chunks[0].text


def test_heading_without_body_is_not_a_chunk():
    _, chunks = chunks_of("# A\n## B\n### C\n\ntext\n")
    assert [c.heading_path for c in chunks] == [["A", "B", "C"]]


def test_table_kept_whole():
    table = "\n".join(
        ["| code | meaning |", "|---|---|"] + [f"| TW-{i} | reason number {i} |" for i in range(30)]
    )
    _, chunks = chunks_of(
        "# Errors\n\n" + "Intro sentence. " * 60 + "\n\n" + table + "\n", max_chars=1200
    )
    holding = [c for c in chunks if "| TW-0 |" in c.text]
    assert len(holding) == 1 and "| TW-29 |" in holding[0].text


def test_huge_section_splits_at_sentences_with_overlap_and_code_at_lines():
    para = " ".join(f"Sentence number {i} is here." for i in range(300))
    code = "```python\n" + "".join(f"x = {i}  # keep\n" for i in range(200)) + "```"
    doc, chunks = chunks_of(f"# Big\n\n{para}\n\n{code}\n", max_chars=1000)
    assert len(chunks) > 5
    assert all(c.heading_path == ["Big"] for c in chunks)
    assert all(len(c.text) <= 1000 and doc.text[c.start : c.end] == c.text for c in chunks)
    # an oversize code block is cut at lines like any other block: every line kept, whole, and
    # each piece starts with the previous piece's last line
    code_chunks = [c for c in chunks if "x = " in c.text]
    assert len(code_chunks) > 2 and code_chunks[-1].text.endswith("```")
    lines = [line for c in code_chunks for line in c.text.splitlines() if line.startswith("x = ")]
    assert sorted(set(lines), key=lambda t: int(t.split()[2])) == [
        f"x = {i}  # keep" for i in range(200)
    ]
    for a, b in zip(code_chunks[1:], code_chunks[2:], strict=False):
        assert b.text.startswith(a.text.rsplit("\n", 1)[-1])
    prose = [c for c in chunks if "x = " not in c.text]
    # each piece starts with the previous piece's last sentence
    for a, b in zip(prose, prose[1:], strict=False):
        assert a.text.rsplit(". ", 1)[-1].rstrip(".") in b.text
    assert all(c.text.endswith(".") for c in prose)


def test_a_huge_code_block_is_cut_as_it_is_read():
    # a file that is one 1 MB code block was one chunk (and one embedding input)
    code = "```\n" + "print('a line of code')\n" * 40_000 + "```\n"
    doc, chunks = chunks_of(f"# Dump\n\n{code}", max_chars=2000)
    assert len(chunks) > 400 and all(len(c.text) <= 2000 for c in chunks)
    assert all(doc.text[c.start : c.end] == c.text for c in chunks)
    assert chunks[-1].end == len(doc.text.rstrip())


def test_setext_headings_split_sections():
    _, chunks = chunks_of(
        "Webhooks guide\n==============\n\nIntro.\n\nRetries\n-------\n\nFive times.\n\n"
        "### Backoff\n\nExponential.\n"
    )
    assert [c.heading_path for c in chunks] == [
        ["Webhooks guide"],
        ["Webhooks guide", "Retries"],
        ["Webhooks guide", "Retries", "Backoff"],
    ]


def test_asciidoc_delimiters_are_not_setext_headings():
    # "[NOTE]" over "----" and the text between AsciiDoc's delimiters are a converter's leftovers
    _, chunks = chunks_of(
        "# Pods\n\nIntro.\n\n[NOTE]\n----\nA pod is the smallest unit.\n----\n\nMore.\n"
    )
    assert [c.heading_path for c in chunks] == [["Pods"]]
    assert "A pod is the smallest unit." in chunks[0].text


def test_nested_lists_and_tables_are_blocks():
    items = "".join(f"- item {i}\n  - nested {i} with a few more words\n" for i in range(40))
    table = "| a | b |\n|---|---|\n" + "".join(f"| r{i} | v{i} |\n" for i in range(40))
    doc, chunks = chunks_of(f"# L\n\n{items}\n{table}", max_chars=700)
    assert len(chunks) > 3 and all(doc.text[c.start : c.end].strip() == c.text for c in chunks)
    # cut at lines: every piece starts at an item or a row, never inside one
    assert all(
        c.text.lstrip().startswith(("- item", "- nested", "| r", "# L", "| a")) for c in chunks
    )
    assert any("- item 39" in c.text for c in chunks) and any("| r39 |" in c.text for c in chunks)


def test_windows_line_endings_keep_offsets_into_the_file():
    md = "---\r\ntitle: W\r\n---\r\n# W\r\n\r\nfirst\r\n\r\n## Two\r\n\r\nsecond line\r\n"
    doc, chunks = chunks_of(md)
    assert [c.text for c in chunks] == ["# W\n\nfirst", "## Two\n\nsecond line"]
    for c in chunks:
        assert doc.text[c.start : c.end].replace("\r\n", "\n") == c.text


def test_ids_are_stable_and_local_to_the_edit():
    base = "# A\n\none\n\n## B\n\ntwo\n\n## C\n\nthree\n"
    _, first = chunks_of(base)
    _, again = chunks_of(base)
    _, edited = chunks_of(base.replace("two", "TWO"))
    assert [c.id for c in first] == [c.id for c in again]
    assert [a.id == b.id for a, b in zip(first, edited, strict=True)] == [True, False, True]
    assert len({c.id for c in first}) == len(first)


def test_a_setext_title_is_the_doc_title():
    doc, chunks = chunks_of("Webhooks guide\n==============\n\nIntro.\n", path="guide.md")
    assert doc.title == "Webhooks guide"
    assert chunks[0].search_text.startswith("Webhooks guide\n\n")


def wide_table(columns: int = 100_000, size: int = 4_900_000) -> str:
    """A doc of one GFM table `columns` wide, rows of one letter a cell up to `size`
    characters."""
    head = "| " + " | ".join(f"c{i}" for i in range(columns)) + " |\n"
    row = "| " + " | ".join("v" for _ in range(columns)) + " |\n"
    text = "# Wide\n\nOne wide table.\n\n" + head + "|" + "---|" * columns + "\n"
    return text + row * max(0, (size - len(text)) // len(row))


def test_a_table_of_100000_columns_is_chunked_in_bounded_memory(tmp_path):
    """4.9 MB of one table, in a process that may use 500 MB of address space: cut into chunks,
    each a table piece, the text kept."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    (tmp_path / "wide.md").write_text(wide_table())
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (500 << 20, 500 << 20))\n"
        "from index.chunker import chunk_doc\nfrom index.loader import parse_doc\n"
        "chunks = chunk_doc(parse_doc('wide.md', open(sys.argv[1], 'rb').read()), 2000)\n"
        "print(len(chunks), max(c.end - c.start for c in chunks), chunks[0].heading_path)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "wide.md")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-300:]
    count, longest, path = out.stdout.split(maxsplit=2)
    assert int(count) > 2000 and int(longest) <= 2000 and "Wide" in path


def test_tables_are_found_in_paragraphs_as_gfm_reads_them():
    from index.chunker import block_spans

    text = (
        "# T\n\nIntro line\n| a | b |\n|---|:-:|\n| 1 | 2 |\n\n"
        "Not a table\n| a | b |\n|---|\n\n- item\n\n  | x | y |\n  | - | - |\n  | 1 | 2 |\n"
    )
    kinds = [kind for kind, _ in block_spans(text)]
    assert kinds.count("table") == 2, kinds
