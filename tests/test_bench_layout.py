"""bench/ holds the product's benchmarks only: `make bench` runs what bench/README.md lists, no
experiment scripts are kept, and no bench script imports the tests (only their service stand-ins,
tests/standins/)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_make_bench_runs_what_the_readme_lists():
    make = (ROOT / "Makefile").read_text()
    benches = re.search(r"^BENCHES :=((?:.*\\\n)*.*)$", make, re.M)
    assert benches
    ran = benches.group(1).replace("\\\n", " ").split()
    listed = re.findall(
        r"^\| `\.venv/bin/python bench/(\w+)\.py", (ROOT / "bench" / "README.md").read_text(), re.M
    )
    assert ran == listed
    assert all((ROOT / "bench" / f"{name}.py").is_file() for name in ran)


def test_bench_holds_no_experiments_and_imports_no_tests():
    scripts = sorted((ROOT / "bench").glob("*.py"))
    assert scripts and not [p.name for p in scripts if p.name.startswith("_")]
    for p in scripts:
        test_imports = re.findall(r"^\s*(?:from|import) (tests\b[\w.]*)", p.read_text(), re.M)
        assert all(m.startswith("tests.standins.") for m in test_imports), p.name


def test_every_bench_imports_what_exists():
    """A bench's imports name modules that exist: the project's packages, its fellow scripts
    (harness.py) and installed libraries; a renamed helper breaks no bench silently."""
    import importlib.util
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        for p in sorted((ROOT / "bench").glob("*.py")):
            for name in re.findall(
                r"^(?:from ([\w.]+) import|import ([\w.]+))", p.read_text(), re.M
            ):
                module = (name[0] or name[1]).split(".")[0]
                assert importlib.util.find_spec(module), f"{p.name} imports {module}"
    finally:
        sys.path.remove(str(ROOT / "bench"))
