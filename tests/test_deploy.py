"""What the container files must be for the engines teams run them with (no container engine runs
in the test suite: deploy/container-check.sh builds and runs the image where one does)."""

import re

import yaml

from tests.conftest import ROOT


def services() -> dict[str, dict]:
    """compose.yaml's services, anchors and merge keys resolved (as every compose tool reads
    them)."""
    return yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]


def test_compose_env_files_are_paths_as_podman_compose_reads_them():
    """Debian's podman-compose (1.0.3) joins each env_file entry to the project folder as a path:
    the long form (`- path: .env`, `required: false`) is a mapping there and crashed it with
    "TypeError: join() argument must be str…". The short form is read by Docker Compose too."""
    found = {name: s["env_file"] for name, s in services().items() if "env_file" in s}
    assert set(found) == {"bot", "indexer", "replica", "mcp", "mcp-replica"}
    for name, env_file in found.items():
        entries = [env_file] if isinstance(env_file, str) else env_file
        assert all(isinstance(e, str) for e in entries), (name, env_file)


def test_the_dockerfile_builds_one_image_and_warns_of_no_build_argument():
    text = (ROOT / "Dockerfile").read_text()
    # one stage: no export-stage image (torch, 2.3 GB) is left behind by the build
    assert len(re.findall(r"^FROM ", text, re.M)) == 1
    # buildah (podman build) warns of every ARG without a value that the build is not given
    # ("missing \"PIP_INDEX_URL\" build argument"): each has one, empty meaning pip's default
    args = re.findall(r"^ARG (\S+)", text, re.M)
    assert "PIP_INDEX_URL=" in args and "PIP_EXTRA_INDEX_URL=" in args
    assert [a for a in args if "=" not in a] == []
    # torch only in the scratch folder the same step removes; the runtime without bytecode
    assert 'rm -rf "$work"' in text and "--no-bytecode" in text
    assert "ENV PYTHONPYCACHEPREFIX=" in text
