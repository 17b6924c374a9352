"""One JAX CPU device per core, asked for before JAX starts, so that a run's seeds can use every core
(docs/offline.md#seeds).

JAX's CPU backend shows one device, and a program runs on one device at a time. A run's seeds share
one vmapped program, whose products (32-256 rows a seed) are too small for XLA to split well over
the cores: measured on 2 cores, one MinAtar seed's step keeps the second core 60-80% busy and still
gains only 5% from it (docs/benchmarks.md#the-update-itself). With one device per core the offline
loop instead runs the seeds in groups, a group per device, concurrently
(:mod:`offline_gitd.learners.seed_groups`): 1.04-1.81x faster for 5 and 10 seeds on 2 cores, and bit
for bit the same updates (docs/benchmarks.md#seeds-over-the-cores).

XLA reads ``XLA_FLAGS`` once, when the CPU backend starts, so the entry points (the command line,
the Python API) call :func:`request_cpu_devices` before anything starts JAX, next to
:func:`~offline_gitd.gpu_determinism.request_deterministic_gpu`. A user's own
``xla_force_host_platform_device_count`` in ``XLA_FLAGS`` is kept; ``OFFLINE_GITD_CPU_DEVICES=N``
asks for N devices (1: one device, as JAX's default).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
CHOICE = "OFFLINE_GITD_CPU_DEVICES"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def request_cpu_devices(environ: MutableMapping[str, str] | None = None) -> int | None:
    """Ask XLA for one CPU device per usable core (or ``OFFLINE_GITD_CPU_DEVICES``), unless the user
    set the device count in ``XLA_FLAGS`` or JAX's CPU backend already started.

    Returns the count asked for, or ``None`` where nothing was added. Too late is silent: the seeds
    then share one device, as before, and the updates are the same.
    """
    from offline_gitd.gpu_determinism import jax_backends_started

    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    if DEVICE_COUNT_FLAG.lstrip("-") in flags or environ.get("JAX_NUM_CPU_DEVICES"):
        return None
    choice = environ.get(CHOICE, "").strip()
    if choice and not (choice.isdigit() and int(choice) >= 1):
        from offline_gitd.errors import UsageError

        raise UsageError(f"{CHOICE} must be a whole number of devices, at least 1; got {choice!r}")
    count = int(choice) if choice else usable_cores()
    if count <= 1 or (environ is os.environ and jax_backends_started()):
        return None
    environ["XLA_FLAGS"] = f"{flags} {DEVICE_COUNT_FLAG}={count}".strip()
    return count
