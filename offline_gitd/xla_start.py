"""What XLA must be told before JAX starts, in one module for every entry point (the command line,
the Python API, a sweep's task process): XLA reads ``XLA_FLAGS`` once, when its first backend
starts, so :func:`prepare_xla` runs before anything starts JAX.

**Deterministic GPU programs** (docs/bounds.md#determinism). JAX's CPU backend is deterministic.
Its GPU backend is not by default: measured on an H100, two ``offline_gitd train`` runs with the
same seed ended with 30 of their 32 state arrays different (largest difference 0.17), and a run
stopped and resumed differed from the straight run as much. With ``--xla_gpu_deterministic_ops=true``
and ``--xla_gpu_exclude_nondeterministic_ops=true`` both came out bit-identical
(``benchmarks/determinism.py``). The options are harmless on the CPU. A user who sets
``xla_gpu_deterministic_ops`` in ``XLA_FLAGS`` keeps their choice; setting
``OFFLINE_GITD_NONDETERMINISTIC=1`` leaves XLA's defaults, and the determinism, to XLA.

**One CPU device per core** (docs/offline.md#seeds). JAX's CPU backend shows one device, and a
program runs on one device at a time. A run's seeds share one vmapped program, whose products
(32-256 rows a seed) are too small for XLA to split well over the cores: measured on 2 cores, one
MinAtar seed's step keeps the second core 60-80% busy and still gains only 5% from it
(docs/benchmarks.md#the-update-itself). With one device per core the offline loop instead runs the
seeds in groups, a group per device, concurrently (:mod:`offline_gitd.learners.seed_groups`):
1.04-1.81x faster for 5 and 10 seeds on 2 cores, and bit for bit the same updates
(docs/benchmarks.md#seeds-over-the-cores). A user's own ``xla_force_host_platform_device_count``
in ``XLA_FLAGS`` is kept; ``OFFLINE_GITD_CPU_DEVICES=N`` asks for N devices (1: one device, as
JAX's default).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import MutableMapping

DETERMINISTIC_GPU_FLAGS = ("--xla_gpu_deterministic_ops=true", "--xla_gpu_exclude_nondeterministic_ops=true")
OPT_OUT = "OFFLINE_GITD_NONDETERMINISTIC"


def jax_backends_started() -> bool:
    """Has JAX already started a backend (after which ``XLA_FLAGS`` is no longer read)?"""
    if "jax" not in sys.modules:  # not even imported: nothing started, and importing it here would cost
        return False
    from jax._src import xla_bridge

    started = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(started()) if started is not None else bool(getattr(xla_bridge, "_backends", {}))


def request_deterministic_gpu(environ: MutableMapping[str, str] | None = None) -> bool:
    """Add XLA's deterministic GPU options to ``XLA_FLAGS`` unless the user chose otherwise.

    Returns whether the options were added. Too late (a backend already started, as when a Python
    user ran JAX code first) is a warning, not an error: the run is still correct, only not
    reproducible bit for bit on a GPU.
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    if environ.get(OPT_OUT, "") not in ("", "0") or "xla_gpu_deterministic_ops" in flags:
        return False
    if environ is os.environ and jax_backends_started():
        import jax

        if jax.default_backend() == "gpu":
            warnings.warn(
                "JAX started its GPU backend before offline_gitd could ask XLA for deterministic programs: "
                f"set XLA_FLAGS='{' '.join(DETERMINISTIC_GPU_FLAGS)}' before using JAX for runs that repeat "
                "bit for bit (docs/bounds.md#determinism)",
                stacklevel=2,
            )
        return False
    environ["XLA_FLAGS"] = " ".join([flags, *DETERMINISTIC_GPU_FLAGS]).strip()
    return True


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


def prepare_xla() -> None:
    """Deterministic GPU programs (docs/bounds.md#determinism) and one CPU device per core
    (docs/offline.md#seeds), each unless the user chose otherwise."""
    request_deterministic_gpu()
    request_cpu_devices()
