"""What the project's own commands do to a machine: `make test` installs nothing outside .venv,
the README says what CI runs, and a skipped test says why without naming this machine's paths."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.skip_reasons import outside_paths

SYSTEM_INSTALLERS = re.compile(r"\b(apt-get|apt|dpkg|dnf|yum|apk|brew|sudo|pacman|zypper)\b")


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
@pytest.mark.parametrize("target", ["test", "test-all"])
def test_make_test_changes_no_system_package(tmp_path, target):
    """Every command `make test` would run on a fresh machine (no .venv yet), printed by a dry run:
    none installs a system package."""
    run = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "pip install" in run.stdout  # the dry run did print the setup
    assert not [line for line in run.stdout.splitlines() if SYSTEM_INSTALLERS.search(line)]


def test_the_readme_says_what_ci_runs():
    """Each make target .ci/run calls is named in the README, and `make test` is not said to be
    what CI runs."""
    called = re.findall(r"^make ([\w-]+)", (ROOT / ".ci" / "run").read_text(), re.M)
    assert {"lint", "test-all", "wheel-check"} <= set(called)
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert [t for t in called if f"`make {t}`" not in readme] == []
    assert "what .ci/run calls" not in readme


def test_paths_outside_the_repository_are_told_apart():
    assert outside_paths("/elsewhere/shared/eval/claude-docs/docs not present") == [
        "/elsewhere/shared/eval/claude-docs/docs"
    ]
    assert outside_paths("~/.cache is full") == ["~/.cache"]
    assert outside_paths(f"{ROOT / 'bench' / 'sets'} is empty") == []
    assert outside_paths("see https://example.com/a/b and bench/sets/x, 1/2 of them") == []


def test_a_skip_naming_a_path_outside_the_repository_fails(tmp_path):
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n"
        "def test_outside():\n"
        "    pytest.skip('/elsewhere/shared/eval not present')\n"
        "def test_in_words():\n"
        "    pytest.skip('the shared eval set is not beside this checkout')\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rA",
            "-p",
            "tests.skip_reasons",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_skips.py"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "1 failed, 1 skipped" in run.stdout, run.stdout
    assert "the skip reason names a path outside the repository (/elsewhere/shared/eval)" in (
        run.stdout
    )
