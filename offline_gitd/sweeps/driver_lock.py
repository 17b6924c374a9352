"""One driver per sweep folder (docs/locks.md).

Two ``offline_gitd sweep`` commands on one ``--out`` (a second terminal, a script run twice, a
cluster job requeued while its first instance still runs) would run every run twice into the same
run directories. The driver holds ``OUT/.driver.lock`` (the run directories' own lock, see
:mod:`offline_gitd.rundir.lock`) from before it reads the sweep's state until it ends; a second
driver says in one line who drives the sweep and how to watch it, and exits non-zero. A driver
that was killed leaves a lock its successor takes over with one line.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from offline_gitd.errors import UsageError
from offline_gitd.rundir.lock import holding

DRIVER_LOCK_FILE = ".driver.lock"


def status_command(spec: Path, out: Path) -> str:
    """The command that shows a sweep's live state without touching it."""
    return f"offline_gitd sweep {shlex.quote(str(spec))} --out {shlex.quote(str(out))} --status --watch"


@contextmanager
def sole_driver(spec: Path, out: Path) -> Iterator[None]:
    """Drive the sweep in ``out`` for the block, or refuse in one line while another driver
    lives. A folder this call had to create is removed again if the sweep is refused before
    writing anything, so a refusal leaves nothing behind."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    hint = f"one driver per sweep; watch it with: {status_command(spec, out)}"
    with holding(out.absolute() / DRIVER_LOCK_FILE, f"sweep {out}", hint=hint):
        yield
