"""Local stand-ins for the services fieldguide talks to, by service — the Messages API
(claude.py), Voyage (voyage.py), Slack's Web API (slack.py) and Socket Mode (socket_mode.py) on one
HTTP stub server (server.py), PostgreSQL (pgserver.py), git over HTTP (githttp.py) — and the real
Bolt app or `fieldguide serve` driven against them (slack_harness.py, fleet.py). Shared by the
tests and the benchmarks; not part of the wheel."""
