"""User-facing errors.

Anything a user can fix (a bad path, a wrong column type, an unknown preset) is
raised as :class:`UserError`. The CLI prints its message without a traceback and
exits with code 2. Programming errors stay ordinary exceptions.
"""
from __future__ import annotations


class UserError(Exception):
    """An error caused by user input, with a message that says what to do."""


class SchemaError(UserError):
    """A history file does not match the learning-history schema."""
