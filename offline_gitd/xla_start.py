"""What XLA must be told before JAX starts, in one call for every entry point (the command line and
the Python API): XLA reads ``XLA_FLAGS`` once, when its first backend starts."""

from __future__ import annotations

from offline_gitd.cpu_devices import request_cpu_devices
from offline_gitd.gpu_determinism import request_deterministic_gpu


def prepare_xla() -> None:
    """Deterministic GPU programs (docs/bounds.md#determinism) and one CPU device per core
    (docs/offline.md#seeds), each unless the user chose otherwise."""
    request_deterministic_gpu()
    request_cpu_devices()
