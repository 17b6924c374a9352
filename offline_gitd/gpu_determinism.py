"""Same seed, same result on a GPU too: XLA's deterministic options, asked for before JAX starts
(docs/bounds.md#determinism).

JAX's CPU backend is deterministic. Its GPU backend is not by default: measured on an H100, two
``offline_gitd train`` runs with the same seed ended with 30 of their 32 state arrays different
(largest difference 0.17), and a run stopped and resumed differed from the straight run as much.
With ``--xla_gpu_deterministic_ops=true`` and ``--xla_gpu_exclude_nondeterministic_ops=true`` both
came out bit-identical (``benchmarks/determinism.py``). XLA reads ``XLA_FLAGS`` once, when the first
backend starts, so the entry points (the command line, the Python API) call
:func:`request_deterministic_gpu` before anything compiles. The options are harmless on the CPU.

A user who sets ``xla_gpu_deterministic_ops`` in ``XLA_FLAGS`` keeps their choice; setting
``OFFLINE_GITD_NONDETERMINISTIC=1`` leaves XLA's defaults, and the determinism, to XLA.
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
