"""Drivers: how many updates of every seed run per call into compiled code (docs/architecture.md#a-run-is-a-function-of-its-config).

* ``scan``: a ``lax.scan`` over M pre-sampled batches per call. Fastest where the loop body
  compiles well (GPU; MLP torsos on CPU): one dispatch for M updates.
* ``loop``: the jitted update called M times from Python. XLA on CPU compiles convolutions inside
  ``scan``/``while`` bodies into slow plain loops (JAX GitHub issue #12868; docs/offline.md#drivers), so
  the torsos with XLA convolutions on CPU (Nature, IMPALA; MinAtar online) use this. Dispatch is
  asynchronous and metrics stay on the device until the chunk ends, so neither driver waits on the
  host per step.

Both take states and batches with a leading seed axis and return the new state and the chunk's
metrics stacked over steps ([M, seeds, ...]), read by the host once per chunk.

How the seeds share the work is chosen once per backend and torso (:func:`choose_seed_strategy`,
docs/benchmarks.md#seeds-in-one-program):

* ``vmap``: the step vectorised over the seed axis; per-seed weights turn every product into a
  batched one. The choice on accelerators, where a batched product fills the device better.
* ``per-seed``: each seed's own single-seed step, at one seed's efficiency. ``loop`` calls the
  one compiled single-seed step once per seed and update; ``scan`` writes the step out once per
  seed inside the scanned program. The choice for the Nature and IMPALA torsos on the CPU, where
  one seed's products already run at a good fraction of the matrix-product peak and vmapped
  per-seed weights turn convolutions into grouped convolutions (or, as patches, batched products)
  that XLA's CPU backend runs slower than the seeds one after another. The seeds still share one
  compile, one data pipeline and one evaluation loop.

Which XLA options the step is compiled with is chosen once per backend
(:func:`choose_compiler_options`, docs/benchmarks.md#compiler-options): on the CPU, YNNPACK computes
single matrix products only, and XLA's own kernels the convolutions and everything else.

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
from offline_gitd.choices import DRIVERS, SEED_STRATEGIES

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


# torsos whose convolutions dominate the step: on the CPU each seed runs its own step, with XLA's convolution
CONV_HEAVY_TORSOS = ("nature", "impala", "impala-gap")


def choose_driver(requested: str, torso: str, backend: str | None = None, *, chunks: bool = False) -> str:
    """``auto`` -> ``loop`` for convolutional torsos on CPU, ``scan`` everywhere else; with
    ``chunks`` (the offline loop's hundreds of updates per call) the MinAtar torso is scanned too.

    The MinAtar torso computes its convolution as patches times a matrix on the CPU
    (:mod:`offline_gitd.networks.conv`), so its step has no XLA convolution to keep out of a scan
    body: scanned over an offline chunk it ran 1.03-1.37x faster for 1 and 5 seeds than called once
    per update (docs/benchmarks.md#the-update-itself). The online loop runs one update per env step,
    where the scan gains nothing and stacking its one batch on the host every step cost 3-8%.
    """
    if requested != "auto":
        return requested
    if (backend or jax.default_backend()) != "cpu" or torso == "mlp":
        return "scan"
    return "scan" if chunks and torso == "minatar" else "loop"


def choose_seed_strategy(requested: str, torso: str | None, backend: str | None = None) -> str:
    """``auto`` -> ``per-seed`` for the large convolutional torsos on the CPU, ``vmap`` everywhere else
    (measured side by side: docs/benchmarks.md#seeds-in-one-program)."""
    if requested not in SEED_STRATEGIES:
        raise ValueError(f"unknown seed strategy {requested!r}; choose one of {', '.join(SEED_STRATEGIES)}")
    if requested != "auto":
        return requested
    return "per-seed" if (backend or jax.default_backend()) == "cpu" and torso in CONV_HEAVY_TORSOS else "vmap"


# The pinned jaxlib (0.10.2) hands a CPU program's matrix products, convolutions and some elementwise
# and reduction fusions to YNNPACK. Measured side by side on 2 cores (docs/benchmarks.md#compiler-options):
# YNNPACK's convolutions made one Nature CNN step 1.2x (td) to 1.5x (gitd) slower than XLA's own;
# restricted to single matrix products, YNNPACK ran the Nature step 1.10x (td) and 1.05x (gitd)
# faster than without it, 5 vmapped MLP td seeds 1.13-1.15x and 5 Gym FC 50-50 gitd seeds 1.16x faster
# than the default build, and no other program measured (MinAtar, IMPALA, CQL-SAC, one MLP seed)
# slower than the default. NO_YNNPACK, the option before, is kept for the benchmarks' comparisons.
YNNPACK_DOTS_ONLY = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}
NO_YNNPACK = {"xla_cpu_experimental_ynn_fusion_type": ""}


def choose_compiler_options(backend: str | None = None) -> dict[str, Any]:
    """XLA options every compiled training step is built with: YNNPACK for single products on the CPU,
    XLA's defaults elsewhere (a fresh dict, so a caller's edits stay its own)."""
    return dict(YNNPACK_DOTS_ONLY) if (backend or jax.default_backend()) == "cpu" else {}


def split_seeds(tree: Any) -> tuple[Any, ...]:
    """A pytree with a leading seed axis -> one pytree per seed."""
    (n,) = {leaf.shape[0] for leaf in jax.tree.leaves(tree)}
    return tuple(jax.tree.map(lambda x, i=i: x[i], tree) for i in range(n))


def join_seeds(trees: tuple[Any, ...]) -> Any:
    """One pytree per seed -> a pytree with a leading seed axis."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


class SeedMap(NamedTuple):
    """A step mapped over seeds, with the state's layout inside the chunk.

    step: ``(states, *args) -> (states, metrics)``, metrics with a leading seed axis.
    split: the runner's state (leading seed axis) -> ``states`` as ``step`` carries them.
    join: the inverse of ``split``.

    ``vmap`` carries the stacked state. ``per-seed`` carries a tuple of per-seed states, split once
    per chunk: were each update to slice its seed out of the stacked state and stack the results
    back, every update would copy the whole state (for the Nature CNN, ~27 MB per seed with the
    target network and Adam's moments), which cost more than the seeds' shared program saved.
    """

    step: Callable[..., tuple[Any, Any]]
    split: Callable[[Any], Any]
    join: Callable[[Any], Any]


def over_seeds(fn: Callable, strategy: str, in_axes: tuple[int | None, ...] = (0, 0)) -> SeedMap:
    """``fn(state, *args) -> (state, metrics)`` applied to every seed, as :class:`SeedMap`.

    ``in_axes`` as for ``jax.vmap``, 0 or ``None`` (an argument shared by every seed); the state's is 0.
    """
    if strategy == "vmap":
        return SeedMap(jax.vmap(fn, in_axes=in_axes), lambda state: state, lambda state: state)

    def unrolled(states: tuple[Any, ...], *args: Any) -> tuple[tuple[Any, ...], Any]:
        per_seed = [split_seeds(arg) if axis == 0 else (arg,) * len(states) for arg, axis in zip(args, in_axes[1:])]
        if any(len(arg) != len(states) for arg in per_seed):
            raise ValueError(f"arguments mapped over seeds disagree with the {len(states)} states on their number")
        outs = [fn(state, *seed_args) for state, *seed_args in zip(states, *per_seed, strict=True)]
        return tuple(out[0] for out in outs), join_seeds(tuple(out[1] for out in outs))

    if strategy == "per-seed":
        return SeedMap(unrolled, split_seeds, join_seeds)
    raise ValueError(f"unknown seed strategy {strategy!r}; choose vmap or per-seed")


def make_chunk_runner(
    step: Step, driver: str, seeds: str = "vmap", options: dict[str, Any] | None = None
) -> Callable[[Any, Any], tuple[Any, dict[str, Any]]]:
    """A function ``(state, batches) -> (state, metrics)`` running ``len(batches)`` updates.

    ``batches`` is a pytree with leaves [M, seeds, ...] for ``scan`` and an iterable of pytrees
    with leaves [seeds, ...] for ``loop``; ``seeds`` is the seed strategy (:func:`choose_seed_strategy`),
    ``options`` the XLA options the step is compiled with (:func:`choose_compiler_options`).
    """
    seeded = over_seeds(step, seeds)
    options = options or None  # jax.jit's "no options"
    if driver == "scan":

        def scanned(state: Any, batches: Any) -> tuple[Any, dict[str, Any]]:
            states, metrics = jax.lax.scan(seeded.step, seeded.split(state), batches)
            return seeded.join(states), metrics

        return jax.jit(scanned, donate_argnums=0, compiler_options=options)
    if driver == "loop" and seeds == "per-seed":
        # the single-seed program once per seed: the same seeds written out in one program ran
        # about 1.15x slower on the CPU (docs/benchmarks.md#seeds-in-one-program)
        one_seed = jax.jit(step, donate_argnums=0, compiler_options=options)
        split, join = jax.jit(split_seeds), jax.jit(join_seeds)

        def run_per_seed(state: Any, batches: Iterable[Any]) -> tuple[Any, dict[str, Any]]:
            metrics = []
            states = split(state)
            for batch in batches:
                outs = [one_seed(s, b) for s, b in zip(states, split(batch), strict=True)]
                states = tuple(out[0] for out in outs)
                metrics.append(join(tuple(out[1] for out in outs)))
            return join(states), jax.tree.map(lambda *xs: jnp.stack(xs), *metrics)

        return run_per_seed
    if driver == "loop":
        jitted = jax.jit(seeded.step, donate_argnums=0, compiler_options=options)

        def run(state: Any, batches: Iterable[Any]) -> tuple[Any, dict[str, Any]]:
            metrics = []
            for batch in batches:
                state, aux = jitted(state, batch)
                metrics.append(aux)
            return state, jax.tree.map(lambda *xs: jnp.stack(xs), *metrics)

        return run
    raise ValueError(f"unknown driver {driver!r}; choose one of {', '.join(DRIVERS)}")


def make_update_then_act(
    step: Step,
    act: Callable[..., Any],
    driver: str,
    options: dict[str, Any] | None = None,
    act_in_axes: tuple[int | None, ...] = (0, 0),
) -> Callable[..., tuple[Any, dict[str, Any], Any]]:
    """The online loop's work between two env steps as one compiled call (docs/online.md#one-call-per-env-step):
    ``(state, batches, *act_args) -> (state, metrics, actions)`` runs the env step's updates on every
    seed (vmapped), then the next env step's policy ``act(state, *act_args)`` per seed on the updated
    state, so the host dispatches one program and waits once per env step instead of dispatching
    the update, stacking its metrics and then acting in calls of their own.

    ``batches``: leaves [M, seeds, ...] for ``scan``; a tuple of M pytrees with leaves [seeds, ...]
    for ``loop``, written out in the program (the M a UTD ratio gives is small and fixed, so few
    programs are compiled; convolutional steps stay out of ``scan`` bodies as :func:`choose_driver`
    says). ``act_in_axes``: ``jax.vmap``'s for ``(state, *act_args)``.
    """
    seeded = jax.vmap(step)
    acting = jax.vmap(act, in_axes=act_in_axes)
    if driver == "scan":

        def fused(state: Any, batches: Any, *act_args: Any) -> tuple[Any, dict[str, Any], Any]:
            state, metrics = jax.lax.scan(seeded, state, batches)
            return state, metrics, acting(state, *act_args)

    elif driver == "loop":

        def fused(state: Any, batches: Any, *act_args: Any) -> tuple[Any, dict[str, Any], Any]:
            metrics = []
            for batch in batches:
                state, aux = seeded(state, batch)
                metrics.append(aux)
            return state, jax.tree.map(lambda *xs: jnp.stack(xs), *metrics), acting(state, *act_args)

    else:
        raise ValueError(f"unknown driver {driver!r}; choose one of {', '.join(DRIVERS)}")
    return jax.jit(fused, donate_argnums=0, compiler_options=options or None)


def make_frame_chunk_runner(
    step: Step, driver: str, stack: int, shared_pool: bool, seeds: str = "vmap", options: dict[str, Any] | None = None
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
    options = options or None  # jax.jit's "no options"
    if driver == "scan":
        seeded = over_seeds(
            lambda state, pool, refs: step(state, expand_frame_refs(pool, refs, stack)), seeds, (0, pool_axis, 0)
        )

        def scanned(state: Any, pool: Any, refs: FrameRefs) -> tuple[Any, dict[str, Any]]:
            states, metrics = jax.lax.scan(
                lambda carry, refs_t: seeded.step(carry, pool, refs_t), seeded.split(state), refs
            )
            return seeded.join(states), metrics

        jitted_chunk = jax.jit(scanned, donate_argnums=0, compiler_options=options)
        return lambda state, chunk: jitted_chunk(state, chunk.pool, chunk.refs)
    if driver == "loop":
        expand = jax.jit(jax.vmap(expand_frame_refs, in_axes=(pool_axis, 0, None)), static_argnums=2)
        run_batches = make_chunk_runner(step, "loop", seeds, options)

        def run(state: Any, chunk: FrameChunk) -> tuple[Any, dict[str, Any]]:
            batches = (
                expand(chunk.pool, FrameRefs(*(field[t] for field in chunk.refs)), stack)
                for t in range(len(chunk.refs.pad))
            )
            return run_batches(state, batches)

        return run
    raise ValueError(f"unknown driver {driver!r}; choose one of {', '.join(DRIVERS)}")
