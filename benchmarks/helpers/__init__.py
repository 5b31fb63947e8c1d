"""Helpers the tests and the benchmark scripts share, kept out of the installed packages: synthetic learning
histories, a tiny random LM, slow reference policies, the TextWorld per-game outcome tables and the export
and replay of a TextWorld run's adapters."""
