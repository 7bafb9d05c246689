"""The reader: a pair cross-encoder scoring whether a section says what was asked."""
