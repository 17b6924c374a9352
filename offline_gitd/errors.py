"""Errors that the CLI turns into a one-line message and a non-zero exit code.

Raise :class:`UsageError` (or a subclass) for anything the *user* can fix: a bad flag value, an
unknown dataset id, a config out of range. Everything else is a bug and keeps its traceback.
"""


class UsageError(Exception):
    """Bad input from the user; the CLI prints ``offline_gitd: error: <message>`` and exits 2."""


class ConfigError(UsageError, ValueError):
    """A configuration value out of range or of an unknown kind."""
