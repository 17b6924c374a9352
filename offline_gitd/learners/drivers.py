"""Drivers: how many vmapped-over-seeds updates run per call into compiled code (docs/architecture.md#a-run-is-a-function-of-its-config).

* ``scan``: a ``lax.scan`` over M pre-sampled batches per call. Fastest where the loop body
  compiles well (GPU; MLP torsos on CPU): one dispatch for M updates.
* ``loop``: the jitted update called M times from Python. XLA on CPU compiles convolutions inside
  ``scan``/``while`` bodies into slow plain loops (JAX GitHub issue #12868; docs/offline.md#drivers), so
  convolutional torsos on CPU use this. Dispatch is asynchronous and metrics stay on the device
  until the chunk ends, so neither driver waits on the host per step.

Both take states and batches with a leading seed axis and return the new state and the chunk's
metrics stacked over steps ([M, seeds, ...]), read by the host once per chunk.

Frame data can instead arrive as a :class:`FrameChunk`: a pool of frames plus
:class:`~offline_gitd.batch.FrameRefs` into it, from which the compiled step builds its frame
stacks (docs/offline.md#feeding-the-device: each sample's distinct frames move once, or never when the pool is the whole
store kept on the device).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from offline_gitd.batch import FrameRefs, expand_frame_refs
from offline_gitd.choices import DRIVERS

Step = Callable[[Any, Any], tuple[Any, dict[str, Any]]]


class FrameChunk(NamedTuple):
    """M updates' frame batches for every seed, as references into a pool of frames.

    pool: uint8 [P, H, W] shared by every seed (the store kept on the device) or [seeds, P, H, W]
        (each seed's frames of this chunk, gathered on the host).
    refs: :class:`~offline_gitd.batch.FrameRefs` with leaves [M, seeds, B, ...].
    lease: a host-gathered pool's claim on its reusable buffer
        (:class:`~offline_gitd.offline.host_pools.PoolLease`), released by the feed's runner
        once the chunk has run; ``None`` for the store kept on the device. Not a pytree leaf.
    """

    pool: Any
    refs: FrameRefs
    lease: Any = None


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


def make_frame_chunk_runner(
    step: Step, driver: str, stack: int, shared_pool: bool
) -> Callable[[Any, FrameChunk], tuple[Any, dict[str, Any]]]:
    """:func:`make_chunk_runner` for :class:`FrameChunk` input: every update first builds its
    :class:`~offline_gitd.batch.Batch` from the pool on the device.

    ``shared_pool``: one pool for all seeds (not vmapped) rather than one per seed. The
    references are small host arrays: the compiled call takes them as arguments, which costs less
    than a ``device_put`` per field (the ``loop`` driver passes each update its own slice).

    ``scan`` builds the batches inside the scanned step. ``loop`` (convolutional torsos on CPU)
    builds each batch in a call of its own and hands it to the very step :func:`make_chunk_runner`
    compiles: fused into the step, XLA's CPU backend let the frame gathers slow the gitd step by
    about 20% (1 and 5 seeds, measured side by side), while a separate call costs about 1 ms per
    seed-batch.
    """
    pool_axis = None if shared_pool else 0
    if driver == "scan":
        seeded_step = jax.vmap(
            lambda state, pool, refs: step(state, expand_frame_refs(pool, refs, stack)), in_axes=(0, pool_axis, 0)
        )

        def scanned(state: Any, pool: Any, refs: FrameRefs) -> tuple[Any, dict[str, Any]]:
            return jax.lax.scan(lambda carry, refs_t: seeded_step(carry, pool, refs_t), state, refs)

        jitted_chunk = jax.jit(scanned, donate_argnums=0)
        return lambda state, chunk: jitted_chunk(state, chunk.pool, chunk.refs)
    if driver == "loop":
        expand = jax.jit(jax.vmap(expand_frame_refs, in_axes=(pool_axis, 0, None)), static_argnums=2)
        run_batches = make_chunk_runner(step, "loop")

        def run(state: Any, chunk: FrameChunk) -> tuple[Any, dict[str, Any]]:
            batches = (
                expand(chunk.pool, FrameRefs(*(field[t] for field in chunk.refs)), stack)
                for t in range(len(chunk.refs.pad))
            )
            return run_batches(state, batches)

        return run
    raise ValueError(f"unknown driver {driver!r}; choose one of {', '.join(DRIVERS)}")
