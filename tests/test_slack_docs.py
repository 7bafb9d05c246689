"""The Slack app as Slack documents it: slack/manifest.yaml uses only the manifest's documented keys
and is an agent app (the agent messaging experience, the only kind Slack lets new apps be), every
event it subscribes to is a documented one whose scopes it requests; docs/slack.md documents the
scopes it requests, and the files the manifest's comments name exist."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

# The manifest's documented keys (docs.slack.dev's app manifest reference, as @slack/web-api's
# Manifest type spells it out): each key maps to the keys documented under it (None: a value).
LIST = None
MANIFEST_KEYS: dict = {
    "_metadata": {"major_version": None, "minor_version": None},
    "display_information": {
        "name": None,
        "description": None,
        "long_description": None,
        "background_color": None,
    },
    "features": {
        "agent_view": {"agent_description": None, "suggested_prompts": LIST, "actions": LIST},
        "app_home": {
            "home_tab_enabled": None,
            "messages_tab_enabled": None,
            "messages_tab_read_only_enabled": None,
        },
        "assistant_view": {"assistant_description": None, "suggested_prompts": LIST},
        "bot_user": {"display_name": None, "always_online": None},
        "shortcuts": LIST,
        "slash_commands": LIST,
        "unfurl_domains": LIST,
    },
    "oauth_config": {
        "redirect_urls": LIST,
        "scopes": {"bot": LIST, "user": LIST, "bot_optional": LIST, "user_optional": LIST},
        "token_management_enabled": None,
    },
    "settings": {
        "allowed_ip_address_ranges": LIST,
        "event_subscriptions": {
            "bot_events": LIST,
            "user_events": LIST,
            "request_url": None,
            "metadata_subscriptions": LIST,
        },
        "incoming_webhooks": {"incoming_webhooks_enabled": None},
        "interactivity": {
            "is_enabled": None,
            "message_menu_options_url": None,
            "request_url": None,
        },
        "org_deploy_enabled": None,
        "socket_mode_enabled": None,
        "token_rotation_enabled": None,
        "function_runtime": None,
    },
    "functions": LIST,
}
SLASH_COMMAND_KEYS = {"command", "description", "should_escape", "url", "usage_hint"}
AGENT_DESCRIPTION_LIMIT = 300  # characters
# The events fieldguide listens to, with the scopes each requires (docs.slack.dev's event
# reference pages): assistant_thread_* are sent to apps made on assistant_view only.
EVENT_SCOPES = {
    "app_mention": {"app_mentions:read"},
    "app_home_opened": set(),
    "app_context_changed": {"assistant:write"},
    "message.channels": {"channels:history"},
    "message.groups": {"groups:history"},
    "message.im": {"im:history"},
    "message.mpim": {"mpim:history"},
    "assistant_thread_started": set(),
    "assistant_thread_context_changed": set(),
}


def manifest() -> dict:
    return yaml.safe_load((ROOT / "slack" / "manifest.yaml").read_text())


def undocumented(value, documented, where: str = "") -> list[str]:
    """The keys of `value` that the manifest reference does not document under `where`."""
    if not isinstance(documented, dict) or not isinstance(value, dict):
        return []
    found = []
    for key, inner in value.items():
        if key not in documented:
            found.append(f"{where}{key}")
        else:
            found += undocumented(inner, documented[key], f"{where}{key}.")
    return found


def test_the_manifest_is_an_agent_app_made_of_documented_keys():
    m = manifest()
    assert undocumented(m, MANIFEST_KEYS) == []
    assert all(set(c) <= SLASH_COMMAND_KEYS for c in m["features"]["slash_commands"])
    agent = m["features"]["agent_view"]
    assert 0 < len(agent["agent_description"]) <= AGENT_DESCRIPTION_LIMIT
    assert "assistant_view" not in m["features"]  # new apps can only be agent apps
    assert m["features"]["app_home"]["messages_tab_enabled"] is True  # where agents talk


def test_every_subscribed_event_is_documented_and_its_scopes_requested():
    m = manifest()
    events = m["settings"]["event_subscriptions"]["bot_events"]
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    assert set(events) <= set(EVENT_SCOPES), set(events) - set(EVENT_SCOPES)
    for event in events:
        assert EVENT_SCOPES[event] <= scopes, (event, EVENT_SCOPES[event] - scopes)
    # the agent experience's events, and none of the retired assistant panel's
    assert {"app_home_opened", "app_context_changed", "message.im"} <= set(events)
    assert not {e for e in events if e.startswith("assistant_thread")}


def test_documented_scopes_are_the_manifests():
    requested = manifest()["oauth_config"]["scopes"]["bot"]
    doc = (ROOT / "docs" / "slack.md").read_text()
    section = doc.split("\n## Scopes\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([a-z_.]+:[a-z_.]+|commands)` \|", section, re.M)
    assert sorted(documented) == sorted(requested)
    assert len(documented) == len(set(documented))


def test_files_the_manifest_names_exist():
    text = (ROOT / "slack" / "manifest.yaml").read_text()
    named = re.findall(r"\(((?:bot|index|router)/[\w/]+\.py)\)", text)
    assert named and all((ROOT / p).is_file() for p in named), named
