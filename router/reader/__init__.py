"""Readers: how far a section says what a question asks, read from the two together
(score.py)."""
