"""The Slack runtime: `fieldguide serve` (serve.py), the Bolt app and its listeners, the answer
workers and how answers look in Slack."""
