"""Checks on the paths a command will write, made before it does any work (docs/architecture.md#the-command-line-contract).

A run that trains for an hour and then cannot create its ``--out`` folder has lost the hour, and
``mkdir`` on a path that is a file fails with a traceback. Each check reads the file system only
and raises a one-line :class:`UsageError` naming the flag; creating the paths stays with the code
that writes into them.
"""

from __future__ import annotations

import os
from pathlib import Path

from offline_gitd.errors import UsageError


def _nearest_existing(path: Path) -> Path:
    """``path`` itself or its closest ancestor that exists (``.`` ends a relative path's parents)."""
    return next((candidate for candidate in (path, *path.parents) if candidate.exists()), Path("."))


def _check_creatable(path: Path, flag: str) -> None:
    """``path`` is absent: its nearest existing ancestor must be a writable directory."""
    base = _nearest_existing(path)
    if not base.is_dir():
        raise UsageError(f"{flag} {path}: {base} is a file, not a directory")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot create it, {base} is not writable")


def require_dir_target(path: str | os.PathLike[str], flag: str) -> Path:
    """A folder the command will create or write into: absent (and creatable) or a writable directory."""
    target = Path(path)
    if target.exists():
        if not target.is_dir():
            raise UsageError(f"{flag} {target}: exists and is not a directory")
        if not os.access(target, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {target}: directory is not writable")
    else:
        _check_creatable(target, flag)
    return target


def require_file_target(path: str | os.PathLike[str], flag: str) -> Path:
    """A file the command will (over)write: not a directory, and its folder creatable or writable."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{flag} {target}: is a directory, expected a file name")
    if target.exists():
        if not os.access(target, os.W_OK):
            raise UsageError(f"{flag} {target}: file is not writable")
    else:
        _check_creatable(target, flag)
    return target


def require_dir_if_present(path: str | os.PathLike[str] | None, flag: str) -> None:
    """A folder the command reads (a data root): absent is fine, a file in its place is not."""
    if path is None:
        return
    target = Path(path).expanduser()
    base = _nearest_existing(target)
    if not base.is_dir():
        raise UsageError(f"{flag} {target}: {base} is a file, not a directory")
