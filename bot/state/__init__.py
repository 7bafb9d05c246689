"""What outlives one answer: the audit trail, feedback, Slack event claims, rate limits and the
reindex lock, on SQLite (`sqlite.py`, the default) or PostgreSQL for a fleet (`postgres.py`)."""
