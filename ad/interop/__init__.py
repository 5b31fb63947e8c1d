"""Converters between learning-history datasets and other offline-RL dataset formats (Minari).

Each converter imports its third-party library inside its functions, so importing this package is cheap.
"""
