"""Local stand-ins for the services fieldguide talks to (Slack, Claude, Voyage, PostgreSQL) and a
real `fieldguide serve` replica, shared by the tests and the benchmarks."""
