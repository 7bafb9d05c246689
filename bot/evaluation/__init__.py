"""`fieldguide eval`: retrieval scoring (`retrieval.py`) and the whole ask path (`answers.py`)."""
