"""What the benchmarks share: the CQL families and random batches they time, the timers, and
interleaved rounds with their medians (docs/benchmarks.md).

Every script of ``benchmarks/`` runs as a module from the repository's root
(``python -m benchmarks.NAME``), so it imports this module, the package and the tests' own data
writers (``tests.rlu_shards``) by name, with no change to the import path.

Side by side, not one after the other: a machine shared with other work changes speed within
minutes, so the programs compared are timed in rounds, each round running every program once,
and the median over the rounds is reported (:func:`interleaved`). A figure is only ever compared
with figures of the same rounds.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Hashable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig
from offline_gitd.learners.drivers import choose_compiler_options, choose_seed_strategy, make_chunk_runner
from offline_gitd.learners.family import make_discrete_family, seed_states

SETUPS = {
    # label -> (torso, obs shape, obs dtype, batch size, mlp widths)
    "nature": ("nature", (84, 84, 4), np.uint8, 32, (256, 256)),
    "mlp": ("mlp", (8,), np.float32, 256, (256, 256)),
    # the paper's offline Gym network (FC 50 - FC 50, batch 32): small enough that per-call
    # overhead, not arithmetic, bounds one seed, which is where seeds in one program pay most
    "gym-mlp": ("mlp", (8,), np.float32, 32, (50, 50)),
}
# updates per timed call: enough that one call lasts well over a millisecond
DEFAULT_CHUNK = {"nature": 20, "mlp": 200, "gym-mlp": 2000}
N_ACTIONS = 6


def random_batches(rng: np.random.Generator, setup: str | tuple, seeds: int, count: int) -> list[Batch]:
    """``count`` random batches with a leading seed axis; ``setup`` is a label of SETUPS or such a tuple."""
    _, shape, dtype, batch, _ = SETUPS[setup] if isinstance(setup, str) else setup

    def obs() -> np.ndarray:
        if dtype == np.uint8:
            return rng.integers(0, 256, size=(seeds, batch, *shape), dtype=np.uint8)
        return rng.normal(size=(seeds, batch, *shape)).astype(np.float32)

    return [
        Batch(
            obs=obs(),
            action=rng.integers(0, N_ACTIONS, size=(seeds, batch)).astype(np.int32),
            reward=rng.normal(size=(seeds, batch)).astype(np.float32),
            discount=np.full((seeds, batch), 0.99, np.float32),
            next_obs=obs(),
            weight=np.ones((seeds, batch), np.float32),
        )
        for _ in range(count)
    ]


def make_family(kind: str, setup: str | tuple, torso_module: nn.Module | None = None):
    """The CQL family of ``setup``; ``torso_module`` replaces the named torso (a network not in the package)."""
    torso, shape, dtype, _, widths = SETUPS[setup] if isinstance(setup, str) else setup
    critic = CriticConfig(kind=kind, K=None if kind in ("td", "tdrc") else 5, T=2000)
    family = make_discrete_family(
        critic,
        N_ACTIONS,
        np.zeros((1, *shape), dtype),
        torso="mlp" if torso_module is not None else torso,
        mlp_hidden=widths,
        head_hidden=512,
        lr=5e-5,
        adam_eps=3.125e-4,
        cql_alpha=0.1,
    )
    if torso_module is not None:
        family = dataclasses.replace(family, net=dataclasses.replace(family.net, torso=torso_module))
    return family


def chunk_timer(
    family,
    setup: str | tuple,
    driver: str,
    seeds: int,
    chunk: int,
    strategy: str = "auto",
    cpu_time: list | None = None,
    options: dict | None = None,
) -> Callable[[], float]:
    """A function that runs one chunk of ``chunk`` updates of ``seeds`` seeds in one program (seed
    strategy ``strategy``) and returns its wall time per update in ms, appending the process's CPU
    time per update to ``cpu_time`` if given; the chunk that compiles is run here, untimed. ``options``:
    the XLA options the step is compiled with, by default those the package picks for the backend."""
    state = seed_states(family, jnp.arange(seeds))
    options = choose_compiler_options() if options is None else options
    strategy = choose_seed_strategy(strategy, (SETUPS[setup] if isinstance(setup, str) else setup)[0])
    run = make_chunk_runner(family.step, driver, strategy, options)
    pool = random_batches(np.random.default_rng(0), setup, seeds, chunk)
    batches = (
        jax.device_put(jax.tree.map(lambda *xs: np.stack(xs), *pool)) if driver == "scan" else jax.device_put(pool)
    )
    box = [state]

    def run_chunk() -> float:
        started, cpu_started = time.perf_counter(), time.process_time()
        box[0], aux = run(box[0], batches)
        jax.block_until_ready((box[0], aux))
        if cpu_time is not None:
            cpu_time.append((time.process_time() - cpu_started) / chunk * 1000)
        return (time.perf_counter() - started) / chunk * 1000

    run_chunk()
    if cpu_time is not None:
        cpu_time.clear()
    return run_chunk


def interleaved(
    timers: Mapping[Hashable, Callable[[], float]], rounds: int, before_round: Callable[[], None] | None = None
) -> dict[Hashable, list[float]]:
    """``rounds`` rounds, each calling every timer once in order (after ``before_round``, if given):
    each timer's values, one a round."""
    times: dict[Hashable, list[float]] = {key: [] for key in timers}
    for _ in range(rounds):
        if before_round is not None:
            before_round()
        for key, timer in timers.items():
            times[key].append(timer())
    return times


def medians(times: Mapping[Hashable, list[float]]) -> dict[Hashable, float]:
    """The median of each timer's rounds."""
    return {key: statistics.median(values) for key, values in times.items()}


def median_best(values: list[float], digits: int = 2) -> str:
    """``"median (best)"``, the way every table of docs/benchmarks.md writes a timing."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f})"


def load() -> str:
    """The 1-, 5- and 15-minute load averages, printed at a run's start and end."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def step_flops(family, setup: tuple) -> float:
    """FLOPs of one single-seed step, from XLA's cost analysis of the compiled program."""
    state = seed_states(family, jnp.arange(1), compiled=False)
    batch = random_batches(np.random.default_rng(0), setup, 1, 1)[0]
    cost = jax.jit(jax.vmap(family.step)).lower(state, batch).compile().cost_analysis()
    return float((cost[0] if isinstance(cost, list) else cost)["flops"])


def matmul_timer(size: int = 1024) -> tuple[Callable[[], float], float]:
    """A timer of one f32 ``jnp.dot`` of two size x size matrices (ms) and its FLOPs: the peak to compare with."""
    a = jax.random.normal(jax.random.PRNGKey(0), (size, size), jnp.float32)
    dot = jax.jit(jnp.dot)
    dot(a, a).block_until_ready()

    def run() -> float:
        started = time.perf_counter()
        for _ in range(4):
            dot(a, a).block_until_ready()
        return (time.perf_counter() - started) / 4 * 1000

    return run, 2.0 * size**3
