"""Peak memory of hostile inputs, before and after their fixes.

`python bench/hostile.py --inputs [REV]` (REV default 30a8556, main before the fix):
one `fieldguide ask` in a fresh process on the example docs' index, an ordinary question against
a question that is one 4,000-letter word; and `fieldguide index` of a docs folder holding one
file that is a single fenced code block of 10 MB (before and after) and 50 MB (after only: the
code before needs ~9 GB for it, more than this shared machine can spare; the issue's figure is
quoted). Section `hostile-inputs`. About 4 minutes.

`python bench/hostile.py --shapes [REV]` (REV default c75d3e9, main before it): peak
memory of `fieldguide index` of one doc at the size cap in each shape (prose, a table of 2
columns, a table of 100,000 columns) and of an intents.yaml alias bomb. Section `hostile-shapes`.
About 15 minutes on a quiet machine. `--reading [REV]`: the same docs read and chunked, without
the embedding (section `hostile-shapes-reading`, about 3 minutes).

`python bench/hostile.py [REV]`: peak memory of `fieldguide search` on a 3,200-chunk
index whose docs carry a long intent, before and after intents became small integer ids.

Before: the code this fix was merged onto (main before the merge: REV below), which accepts a
100,000-character intent and builds a fixed-width numpy string array of chunks x that length.
After: this tree, on the same docs with the longest valid intent (64 characters), and on the old
index itself (it still loads one: the names are validated only when a doc is indexed again).

    python bench/hostile.py [REV]     # REV: the "before" commit (default 57f47da^1)

Both index builds use the local model; the second reuses the first's embeddings (same texts).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from harness import ROOT, WORK, table, write_section

INPUTS = "--inputs" in sys.argv
SHAPES = "--shapes" in sys.argv or "--reading" in sys.argv
ARGS = [a for a in sys.argv[1:] if a not in ("--inputs", "--shapes", "--reading")]
REV = ARGS[0] if ARGS else ("c75d3e9" if SHAPES else "30a8556" if INPUTS else "57f47da^1")
DOCS, SECTIONS = 100, 32  # 3,200 chunks (the figure: 1.4 GB at 3,200 chunks)
QUESTION = "How is knob 4207 tuned?"
WRAPPER = (
    "import resource, subprocess, sys, time; t = time.perf_counter();"
    " r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL);"
    " print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, r.returncode,"
    " time.perf_counter() - t)"
)


def write_docs(root: Path, intent: str) -> Path:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "other.md").write_text("---\nintent: other\n---\n# Other\n\nSomething else.\n")
    for d in range(DOCS):
        body = "".join(
            f"## Section {s}\n\nWidget {d} part {s} is tuned by setting knob {d * 100 + s}.\n\n"
            for s in range(SECTIONS)
        )
        (root / f"doc{d:03}.md").write_text(f"---\nintent: {intent}\n---\n# Doc {d}\n\n{body}")
    return root


def checkout(rev: str, dest: Path) -> Path:
    """The source tree of `rev` of this repository (git archive: the work tree is not touched)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    archive = dest.with_suffix(".tar")
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), rev], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return dest


def fieldguide(src: Path, *argv: str) -> list[str]:
    """The command line that runs fieldguide from the source tree `src`."""
    return [
        sys.executable,
        "-c",
        f"import sys; sys.path.insert(0, {str(src)!r});"
        " from bot.cli import main; sys.exit(main(sys.argv[1:]))",
        *argv,
    ]


def peak_rss_mb(cmd: list[str], cwd: Path) -> int:
    return measure(cmd, cwd)[0]


def measure(cmd: list[str], cwd: Path) -> tuple[int, float]:
    """(peak RSS in MB, seconds) of `cmd` run in a fresh process."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith("FIELDGUIDE_")
    }
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, *cmd], cwd=cwd, env=env, capture_output=True, text=True
    )
    mb, code, seconds = out.stdout.split()
    assert code == "0", out.stderr
    return int(mb), float(seconds)


def code_block_docs(root: Path, megabytes: int) -> Path:
    """A docs folder holding one file: a heading, a line, and one fenced code block."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    line = "    configure_rotor(flange=17, gauge='tw-1429', retries=5)  # generated\n"
    block = line * (megabytes * 1_000_000 // len(line))
    (root / "generated.md").write_text(f"# Generated table\n\nOne huge block.\n\n```\n{block}```\n")
    return root


NOTE = (
    "The 4,000-letter word costs what an ordinary question costs (139 MB, 0.5 s; it cost 1.8 GB):"
    " a word over 40 letters is no English word and skips the spelling, stem, frequency and name"
    " checks (index/search.py MAX_WORD), search terms are 64 characters at most, the embedder's"
    " input 16 characters a token and the chunk text a question reads 20,000 characters. An index"
    " run of one code block stays well under 1 GB at 50 MB: the chunker cuts an oversize code block"
    " at lines and the embedder cuts a text before tokenising it."
)


def inputs() -> None:
    """Issue 27's worst inputs (see the module docstring)."""
    work = WORK / "hostile-inputs"
    work.mkdir(parents=True, exist_ok=True)
    before_src = checkout(REV, work / "before-src")
    db = work / "examples.db"
    db.unlink(missing_ok=True)
    subprocess.run(
        fieldguide(ROOT, "index", str(ROOT / "examples" / "docs"), "--db", str(db), "--quiet"),
        cwd=work,
        check=True,
    )
    ordinary, word = "How do I rotate the webhook signing secret?", "supercalifragilistic" * 200
    rows = []
    for label, src in ((f"before ({REV})", before_src), ("after", ROOT)):
        for what, question in (("ordinary question", ordinary), ("one 4,000-letter word", word)):
            mb, seconds = measure(fieldguide(src, "ask", question, "--db", str(db)), work)
            print(f"{label}, ask, {what}: {mb} MB, {seconds:.1f} s")
            rows.append([label, f"`ask`: {what}", mb, f"{seconds:.1f}"])
    for label, src, sizes in ((f"before ({REV})", before_src, (10,)), ("after", ROOT, (10, 50))):
        for size in sizes:
            docs = code_block_docs(work / f"docs-{size}mb", size)
            index_db = work / f"block-{size}.db"
            index_db.unlink(missing_ok=True)
            cmd = fieldguide(src, "index", str(docs), "--db", str(index_db), "--quiet")
            mb, seconds = measure(cmd, work)
            print(f"{label}, index, one {size} MB code block: {mb} MB, {seconds:.1f} s")
            rows.append([label, f"`index`: one {size} MB code block", mb, f"{seconds:.1f}"])
    rows.append(["before (the issue's probe)", "`index`: one 50 MB code block", 9000, "81"])
    write_section(
        "hostile-inputs",
        "## Hostile inputs: peak memory of one question and one index run\n\n"
        "Each command in a fresh process (the local model; the example docs' index for `ask`); "
        "peak RSS from `getrusage(RUSAGE_CHILDREN)`, wall time on this shared 2-core machine. "
        "`python bench/hostile.py --inputs`\n\n"
        + table(["code", "command and input", "peak RSS (MB)", "seconds"], rows)
        + "\n\n"
        + NOTE,
    )


def main() -> None:
    work = WORK / "hostile"
    work.mkdir(parents=True, exist_ok=True)
    before_src = checkout(REV, work / "before-src")
    old_docs = write_docs(work / "docs-long", "x" * 100_000)
    new_docs = write_docs(work / "docs-64", "i" * 64)
    old_db, new_db = work / "before.db", work / "after.db"
    for db in (old_db, new_db):
        db.unlink(missing_ok=True)
    print(f"indexing {DOCS * SECTIONS} chunks with the code of {REV} (100,000-character intent)")
    subprocess.run(
        fieldguide(before_src, "index", str(old_docs), "--db", str(old_db), "--quiet"),
        cwd=work,
        check=True,
    )
    shutil.copyfile(old_db, new_db)  # the same texts: its embeddings are reused
    subprocess.run(
        fieldguide(ROOT, "index", str(new_docs), "--db", str(new_db), "--quiet"),
        cwd=work,
        check=True,
    )
    rows = []
    for label, src, db in (
        (f"before ({REV}), 100,000-char intent", before_src, old_db),
        ("after, 64-char intent", ROOT, new_db),
        ("after, the old index (100,000-char intent)", ROOT, old_db),
    ):
        mb = peak_rss_mb(fieldguide(src, "search", QUESTION, "--db", str(db)), work)
        print(f"{label}: {mb} MB")
        rows.append([label, mb])
    write_section(
        "hostile",
        "## Long intents: peak memory of `fieldguide search`\n\n"
        f"{DOCS * SECTIONS:,} chunks in {DOCS} docs of one intent (+1 doc), local model, one "
        "`fieldguide search` in a fresh process; peak RSS from `getrusage(RUSAGE_CHILDREN)`. "
        "`python bench/hostile.py`\n\n" + table(["index and code", "peak RSS (MB)"], rows),
    )


# -- docs of every shape at the size cap, and an alias bomb in intents.yaml ----------

CAP_GB = 6  # the address space a "before" run may take here; past it, it is stopped
CAPPED = (
    "import resource, subprocess, sys, time; t = time.perf_counter();"
    f" cap = {CAP_GB} << 30;"
    " r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,"
    " preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)));"
    " print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, r.returncode,"
    " time.perf_counter() - t)"
)
SIZE = 4_900_000  # under the 5 MB cap on a doc


def capped(cmd: list[str], cwd: Path) -> tuple[str, float]:
    """(peak RSS in MB, or "over N GB" when the run was stopped at CAP_GB; seconds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIELDGUIDE_")}
    out = subprocess.run(
        [sys.executable, "-c", CAPPED, *cmd], cwd=cwd, env=env, capture_output=True, text=True
    )
    mb, code, seconds = out.stdout.split()
    return (mb if code == "0" else f"stopped at {CAP_GB} GB (exit {code})"), float(seconds)


def shape_docs(root: Path, shape: str) -> Path:
    """A docs folder of one doc of `shape` at SIZE characters (and, for `alias bomb`, a small doc
    beside an intents.yaml of 20 anchors, each twice the one before: read whole, a gigabyte)."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    intro = "# Shape\n\nOne doc of one shape.\n\n"
    if shape == "alias bomb":
        chain = [f"&l0 {'x' * 1000}"] + [f"&l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 20)]
        (root / "intents.yaml").write_text(
            f"api:\n  description: the API\n  examples:\n    - [{', '.join(chain)}]\n"
        )
        (root / "a.md").write_text("---\nintent: api\n---\n# A\n\nThe API answers.\n")
        return root
    if shape == "one table, 100,000 columns":
        head = "| " + " | ".join(f"c{i}" for i in range(100_000)) + " |\n"
        row = "| " + " | ".join("v" for _ in range(100_000)) + " |\n"
        text = intro + head + "|" + "---|" * 100_000 + "\n"
        text += row * ((SIZE - len(text)) // len(row))
    elif shape == "one table, 2 columns":
        text = intro + "| key | value |\n|---|---|\n"
        text += "| knob | 42 |\n" * ((SIZE - len(text)) // 14)
    else:  # prose: every sentence its own (a repeated one would be embedded once)
        parts, size, i = [intro], len(intro), 0
        while size < SIZE:
            i += 1
            parts.append(f"Gateway {i} restarts after rotation {i * 7 % 1009} on rack {i % 97}. ")
            parts.append("\n\n" if i % 12 == 0 else "")
            size += len(parts[-2]) + len(parts[-1])
        text = "".join(parts)
    (root / "shape.md").write_text(text)
    return root


SHAPE_NOTE = (
    "Before, a GFM table cost three markdown-it tokens a cell; tables are now found in"
    " markdown-it's paragraphs (one token whatever their size: index/markdown.py `table_at`),"
    " with the same chunks and blocks on examples, claude-docs and openshift-4.15. The alias"
    " bomb is refused before anything is built from it: what a YAML text reads as, aliases"
    " expanded, may be at most 4 times the text (counted without expanding: index/loader.py"
    " `expanded_size`), and a value in a message is cut while it is formatted (reprlib)."
)


def shapes() -> None:
    """Issue 42: `fieldguide index` of one doc at the size cap in each shape, and of an
    intents.yaml alias bomb, before (REV) and after, each in a fresh process."""
    work = WORK / "hostile-shapes"
    work.mkdir(parents=True, exist_ok=True)
    before_src = checkout(REV, work / "before-src")
    rows = []
    for shape in (
        "prose",
        "one table, 2 columns",
        "one table, 100,000 columns",
        "alias bomb",
    ):
        docs = shape_docs(work / "docs", shape)
        for label, src in ((f"before ({REV})", before_src), ("after", ROOT)):
            db = work / "shape.db"
            db.unlink(missing_ok=True)
            cmd = fieldguide(src, "index", str(docs), "--db", str(db), "--quiet")
            mb, seconds = capped(cmd, work)
            print(f"{label}, {shape}: {mb} MB, {seconds:.1f} s")
            rows.append([label, shape, mb, f"{seconds:.1f}"])
    write_section(
        "hostile-shapes",
        "## Docs of every shape at the size cap, and an alias bomb\n\n"
        f"`fieldguide index` of one doc of {SIZE:,} characters in each shape (the alias bomb: an"
        " intents.yaml whose first example holds 20 anchors, each a list of the one before"
        " twice, 1.4 KB, beside one small doc), each run in a fresh process with the local"
        " model; peak RSS from"
        f" `getrusage(RUSAGE_CHILDREN)`, a run stopped at {CAP_GB} GB of address space."
        f" `python bench/hostile.py --shapes`\n\n"
        + table(["code", "doc", "peak RSS (MB)", "seconds"], rows)
        + "\n\n"
        + SHAPE_NOTE,
    )


READ = (
    "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path;"
    " from index.chunker import chunk_doc; from index.loader import DocError, load_intents_yaml,"
    " parse_doc\nroot = Path(sys.argv[2])\ntry: load_intents_yaml(root)\nexcept DocError: pass\n"
    "for p in root.glob('*.md'): chunk_doc(parse_doc(p.name, p.read_bytes()), 2000)"
)


def reading() -> None:
    """What the fixes changed, without the embedding: each shape's docs read (intents.yaml
    loaded, each doc parsed and cut into chunks) in a fresh process, before and after."""
    work = WORK / "hostile-reading"
    work.mkdir(parents=True, exist_ok=True)
    before_src = checkout(REV, work / "before-src")
    rows = []
    for shape in ("prose", "one table, 2 columns", "one table, 100,000 columns", "alias bomb"):
        docs = shape_docs(work / "docs", shape)
        for label, src in ((f"before ({REV})", before_src), ("after", ROOT)):
            mb, seconds = capped([sys.executable, "-c", READ, str(src), str(docs)], work)
            print(f"{label}, {shape}: {mb} MB, {seconds:.1f} s", flush=True)
            rows.append([label, shape, mb, f"{seconds:.1f}"])
    write_section(
        "hostile-shapes-reading",
        "## Reading docs of every shape at the size cap, and an alias bomb\n\n"
        "What `index` does before it embeds: intents.yaml loaded, each doc parsed and cut into"
        f" chunks, in a fresh process; the docs of `--shapes` above ({SIZE:,} characters each);"
        f" peak RSS from `getrusage(RUSAGE_CHILDREN)`, a run stopped at {CAP_GB} GB of address"
        " space. `python bench/hostile.py --reading`\n\n"
        + table(["code", "doc", "peak RSS (MB)", "seconds"], rows)
        + "\n\n"
        + SHAPE_NOTE,
    )


if __name__ == "__main__":
    if "--reading" in sys.argv:
        reading()
    else:
        shapes() if SHAPES else inputs() if INPUTS else main()
