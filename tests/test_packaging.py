"""The wheel a team installs: the product's packages, and none of the test stand-ins
(tests/standins/: fake Claude, Slack, Socket Mode, Voyage, PostgreSQL, git)."""

import shutil
import subprocess
import sys
import zipfile

from tests.conftest import ROOT


def test_the_wheel_holds_no_test_stand_ins(tmp_path):
    # the files git knows, as .ci/wheel-check builds it: no index or venv of the checkout
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    src = tmp_path / "src"
    for name in listed:
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path / "dist"), str(src)],
        check=True,
        capture_output=True,
    )
    [wheel] = (tmp_path / "dist").glob("fieldguide-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"bot", "router", "index", "prompts"}
    assert "bot/app.py" in names and "bot/slack/serve.py" in names
    assert not [n for n in names if "standins" in n or "/testing/" in n or "stubs" in n]
