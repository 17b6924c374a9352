"""Each local sweep run on cores of its own (docs/sweeps.md#runs-pinned-to-cores).

Why: XLA's CPU thread pool spreads a run over every core the process may use, so two runs side by
side on a 2-core machine keep evicting each other's threads and caches. Pinned to one core each,
two MinAtar online runs (40,000 env steps, 5 vmapped seeds) finished in 72 s instead of 88 s
(docs/sweeps.md#runs-pinned-to-cores). The operating system's scheduler cannot know that a run's
threads belong together; the sweep can.

How: a run claims ``count`` of the cores it may use (``os.sched_getaffinity``, which already
honours a container's or a job's CPU set) by taking a non-blocking ``flock`` on one file per core in
a per-user folder of the machine's temporary directory, and keeps the locks while it runs. The
kernel drops a lock when its holder exits, so a killed run frees its cores without anyone cleaning
up, and two sweeps on one machine never share a core. A run that finds too few free cores runs
unpinned (and says so in its log) rather than wait: pinning is for speed, never a condition.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def default_lock_dir() -> Path:
    """One folder per user and machine: cores are a machine's, not a sweep's."""
    return Path(tempfile.gettempdir()) / f"offline_gitd-cores-{os.getuid()}"


def claim_cores(count: int, lock_dir: Path | None = None) -> tuple[list[int], list[IO[bytes]]] | None:
    """Lock ``count`` free cores among those this process may run on; ``None`` when fewer are free.

    Returns the cores and the open lock files, which hold the claim until they are closed (or the
    process exits)."""
    if count < 1:
        raise ValueError(f"a run needs at least one core, asked for {count}")
    lock_dir = lock_dir or default_lock_dir()
    lock_dir.mkdir(parents=True, exist_ok=True)
    cores: list[int] = []
    held: list[IO[bytes]] = []
    for core in sorted(os.sched_getaffinity(0)):
        if len(cores) == count:
            break
        handle = (lock_dir / f"core-{core}.lock").open("ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        cores.append(core)
        held.append(handle)
    if len(cores) < count:
        for handle in held:
            handle.close()
        return None
    return cores, held


@contextlib.contextmanager
def pinned_cores(count: int, lock_dir: Path | None = None) -> Iterator[list[int] | None]:
    """Run the body on ``count`` cores of its own; yields them, or ``None`` when it runs unpinned.

    Must be entered before JAX starts its CPU backend: the thread pool XLA creates then inherits the
    affinity, and threads started earlier keep theirs. The process's affinity is restored on exit
    (a Ray worker may be reused by a later task)."""
    if not hasattr(os, "sched_setaffinity"):  # macOS: no affinity to set; the run goes unpinned
        yield None
        return
    before = os.sched_getaffinity(0)
    claim = claim_cores(count, lock_dir)
    if claim is None:
        yield None
        return
    cores, held = claim
    try:
        os.sched_setaffinity(0, cores)
        yield cores
    finally:
        os.sched_setaffinity(0, before)
        for handle in held:
            handle.close()


@contextlib.contextmanager
def claimed_cores(pin: bool, count: int) -> Iterator[list[int] | None]:
    """What a sweep task runs on: ``None`` when not asked to pin, else the claimed cores, ``[]``
    when too few were free (the task runs unpinned and says so)."""
    if not pin:
        yield None
        return
    with pinned_cores(count) as cores:
        yield cores or []
