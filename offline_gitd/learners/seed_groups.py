"""A run's seeds in groups, one group per CPU device, run concurrently (docs/benchmarks.md#seeds-over-the-cores).

A vmapped program over every seed keeps the CPU's cores only partly busy: its products are a few
dozen rows per seed, too small for XLA to split over the cores. With one JAX CPU device per core
(:func:`offline_gitd.xla_start.request_cpu_devices`), the chunk runner below gives each device a
contiguous group of seeds and dispatches the groups' programs back to back; each device runs its
own, so the groups run at once. A seed's updates do not depend on which group it is in: every seed
is its own slice of the vmapped step, and the grouped updates are the same bit for bit
(``tests/learners/test_seed_groups.py``).

The runner keeps the interface of :func:`~offline_gitd.learners.drivers.make_chunk_runner`: the
state comes in and goes out with all seeds stacked on the default device, so checkpoints,
evaluation and resume see one state as before. Splitting and joining it costs two copies of the
state per chunk, small beside a chunk's hundreds of updates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Runner = Callable[[Any, Any], tuple[Any, dict[str, Any]]]


def seed_groups(seeds: int, groups: int) -> list[slice]:
    """``seeds`` split into at most ``groups`` contiguous groups whose sizes differ by at most one."""
    bounds = np.linspace(0, seeds, min(groups, seeds) + 1).round().astype(int)
    return [slice(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def cpu_seed_devices(driver: str, strategy: str, backend: str | None = None) -> tuple[jax.Device, ...]:
    """The devices a chunk's seeds are spread over: every CPU device for the scanned, vmapped step on
    the CPU when there are several; none otherwise (one program, as before)."""
    if (backend or jax.default_backend()) != "cpu" or driver != "scan" or strategy != "vmap":
        return ()
    devices = tuple(jax.devices("cpu"))
    return devices if len(devices) > 1 else ()


def over_devices(run: Runner, devices: Sequence[jax.Device]) -> Runner:
    """``run`` (the scanned chunk runner: state [seeds, ...], batches [M, seeds, ...], metrics
    [M, seeds, ...]) applied to groups of seeds, a group per device, concurrently."""
    home = devices[0]

    def grouped(state: Any, batches: Any) -> tuple[Any, dict[str, Any]]:
        (seeds,) = {leaf.shape[0] for leaf in jax.tree.leaves(state)}
        groups = seed_groups(seeds, len(devices))
        if len(groups) == 1:
            return run(state, batches)
        # every group's inputs first: a slice queued on the home device after the home group's
        # program would wait for it, and the groups would run one after another
        inputs = [
            (
                jax.device_put(jax.tree.map(lambda x, g=group: x[g], state), device),
                jax.device_put(jax.tree.map(lambda x, g=group: x[:, g], batches), device),
            )
            for device, group in zip(devices, groups, strict=False)
        ]
        outs = [run(*group_inputs) for group_inputs in inputs]  # dispatched back to back, run at once

        def join(axis: int) -> Callable[..., jax.Array]:
            return lambda *parts: jnp.concatenate([jax.device_put(part, home) for part in parts], axis=axis)

        return (
            jax.tree.map(join(0), *(out[0] for out in outs)),
            jax.tree.map(join(1), *(out[1] for out in outs)),
        )

    return grouped
