"""A pytest plugin (tests/conftest.py loads it): a skip whose reason names a path outside the
repository fails instead. Such a reason tells one machine's layout and nothing another reader can
use; a reason says what is missing in words, or by a path inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# an absolute path (not a URL's), or one under the home folder
PATH = re.compile(r"(?<![\w:/.~-])(?:~|/)/?[\w.+-]+(?:/[\w.+-]*)*")


def outside_paths(reason: str, root: Path = ROOT) -> list[str]:
    """The paths `reason` names outside `root`."""
    found = []
    for path in PATH.findall(reason):
        if path.startswith("~") or not Path(path).resolve().is_relative_to(root):
            found.append(path)
    return found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if named := outside_paths(reason):
            report.outcome = "failed"
            report.longrepr = (
                f"the skip reason names a path outside the repository ({', '.join(named)}):"
                f" {reason}"
            )
