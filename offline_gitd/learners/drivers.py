"""Drivers: how many vmapped-over-seeds updates run per call into compiled code (DESIGN §5).

* ``scan``: a ``lax.scan`` over M pre-sampled batches per call. Fastest where the loop body
  compiles well (GPU; MLP torsos on CPU): one dispatch for M updates.
* ``loop``: the jitted update called M times from Python. XLA on CPU compiles convolutions inside
  ``scan``/``while`` bodies into slow plain loops (JAX issue 12868; REFERENCE "Dependencies"), so
  convolutional torsos on CPU use this. Dispatch is asynchronous and metrics stay on the device
  until the chunk ends, so neither driver waits on the host per step.

Both take states and batches with a leading seed axis and return the new state and the chunk's
metrics stacked over steps ([M, seeds, ...]), read by the host once per chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp

DRIVERS = ("auto", "scan", "loop")
Step = Callable[[Any, Any], tuple[Any, dict[str, Any]]]


def choose_driver(requested: str, torso: str, backend: str | None = None) -> str:
    """``auto`` -> ``loop`` for convolutional torsos on CPU, ``scan`` everywhere else."""
    if requested != "auto":
        return requested
    backend = backend or jax.default_backend()
    return "loop" if backend == "cpu" and torso != "mlp" else "scan"


def make_chunk_runner(step: Step, driver: str) -> Callable[[Any, Any], tuple[Any, dict[str, Any]]]:
    """A function ``(state, batches) -> (state, metrics)`` running ``len(batches)`` updates.

    ``batches`` is a pytree with leaves [M, seeds, ...] for ``scan`` and an iterable of pytrees
    with leaves [seeds, ...] for ``loop``.
    """
    seeded_step = jax.vmap(step)
    if driver == "scan":
        return jax.jit(lambda state, batches: jax.lax.scan(seeded_step, state, batches), donate_argnums=0)
    if driver == "loop":
        jitted = jax.jit(seeded_step, donate_argnums=0)

        def run(state: Any, batches: Iterable[Any]) -> tuple[Any, dict[str, Any]]:
            metrics = []
            for batch in batches:
                state, aux = jitted(state, batch)
                metrics.append(aux)
            return state, jax.tree.map(lambda *xs: jnp.stack(xs), *metrics)

        return run
    raise ValueError(f"unknown driver {driver!r}; choose one of {', '.join(DRIVERS)}")
