"""Page furniture by statistics: how many pages each line of a corpus is on, on
claude-docs, openshift-4.15 and examples, beside the threshold index/furniture.py draws from it
(a one-sided binomial test at 5% that the line is on most pages), and what it finds. The docs are
chunked as `fieldguide index` chunks them (no index or model needed).

    python bench/furniture.py
"""

from __future__ import annotations

import numpy as np
from harness import ROOT, SHARED, table, write_section

from index.chunker import chunk_doc
from index.furniture import FENCE, Counts, key, most_pages, normal
from index.loader import list_markdown, parse_doc

SETS = {
    "claude-docs": SHARED / "claude-docs" / "docs",
    "openshift-4.15": SHARED / "openshift-4.15" / "docs",
    "examples": ROOT / "examples" / "docs",
}
BINS = [(1, 1), (2, 2), (3, 4), (5, 9), (10, 49), (50, 99), (100, 499), (500, None)]


def measure(root) -> tuple[list, list[list]]:
    counts = Counts()
    shown: dict[int, str] = {}  # a line as written, by key, for the table of the top lines
    docs = 0
    for path in list_markdown(root):
        doc = parse_doc(path.relative_to(root).as_posix(), path.read_bytes())
        docs += 1
        for c in chunk_doc(doc):
            counts.add(doc.path, doc.title, c.heading_path, c.text, c.start)
            for line in c.text.split("\n"):
                if line.strip() and not FENCE.match(line):
                    shown.setdefault(key(normal(line)), " ".join(line.split())[:70])
    found = counts.result()
    keys, n = np.unique(np.frombuffer(counts.keys, dtype=np.int64), return_counts=True)
    pages = counts.pages
    bins = [int(((n >= lo) & (n <= (hi or n.max()))).sum()) for lo, hi in BINS]
    row = [docs, pages, len(keys), *bins, most_pages(pages), len(found.lines), len(found.titles)]
    top = np.argsort(-n, kind="stable")[:5]
    tops = [
        [shown.get(int(keys[i]), "?").replace("|", "\\|"), int(n[i]), f"{n[i] / pages:.1%}"]
        for i in top
    ]
    tops += [[shown.get(k, "?"), "found", ""] for k in found.lines.tolist() if k not in keys[top]]
    return row, tops


def main() -> None:
    rows, tops = [], []
    for name, root in SETS.items():
        row, top = measure(root)
        rows.append([name, *row])
        tops += [[name, *t] for t in top]
        print(name, row)
    bins = [f"on {lo}" if lo == hi else f"on {lo}-{hi}" if hi else f"on ≥{lo}" for lo, hi in BINS]
    body = f"""## Page furniture by statistics (`bench/furniture.py`)

`python bench/furniture.py` — how many pages each line of a corpus is on (index/furniture.py: a
page is a doc, cut further at its page-number lines; lines of code blocks and tables are not
counted; a line is whitespace-collapsed, lowercased, every run of digits one symbol). A line is
furniture when a one-sided binomial test rejects, at 5%, that it is on at most half of the
pages, of the corpus or of its own doc: the threshold column is the fewest pages that takes. The
columns "on k" count the distinct lines on k pages. Content reused in many docs (an AsciiDoc
module included in 61 openshift-4.15 docs, a shared prerequisite in 82) is on a few percent of
the pages at most; the lines on more are AsciiDoc markup and labels ("----", "[NOTE]", "Example
output"), of which the markup is on most pages, and the one line on most claude-docs pages is the
scraped "xlinkedin" (both already left out, as markup and as a one-word unit). claude-docs has
more pages than docs: its scraped steps are numbered on lines of their own ("1 1"), read as page
numbers (a conservative error: more pages only raise the threshold). No corpus here was
converted from PDF; tests/test_furniture.py has one (a running header and footer on each of 8
pages). Titles: distinct doc and section titles, which the offline quoter reads to tell a list
of cross-references.

{table(["corpus", "docs", "pages", "lines", *bins, "threshold", "furniture", "titles"], rows)}

The lines on most pages of each corpus (and every furniture line found):

{table(["corpus", "line", "pages", "share"], tops)}
"""
    write_section("page-furniture", body)


if __name__ == "__main__":
    main()
