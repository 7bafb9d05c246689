"""docs/slack.md tells the truth about the Slack app: the scopes it documents are the ones
slack/manifest.yaml requests, and the files the manifest's comments name exist."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_documented_scopes_are_the_manifests():
    manifest = yaml.safe_load((ROOT / "slack" / "manifest.yaml").read_text())
    requested = manifest["oauth_config"]["scopes"]["bot"]
    doc = (ROOT / "docs" / "slack.md").read_text()
    section = doc.split("\n## Scopes\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([a-z_.]+:[a-z_.]+|commands)` \|", section, re.M)
    assert sorted(documented) == sorted(requested)
    assert len(documented) == len(set(documented))


def test_files_the_manifest_names_exist():
    text = (ROOT / "slack" / "manifest.yaml").read_text()
    named = re.findall(r"\(((?:bot|index|router)/[\w/]+\.py)\)", text)
    assert named and all((ROOT / p).is_file() for p in named), named
