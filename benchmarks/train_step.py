"""Speed of one CQL gradient step per critic and driver, and of seeds in one program.

Run by hand on a quiet machine (speed is never asserted by a test):

    .venv/bin/python benchmarks/train_step.py                 # everything
    .venv/bin/python benchmarks/train_step.py --setup gym-mlp  # only the paper's Gym network

Prints ms per gradient step for each critic with CQL (Nature CNN, batch 32, uint8 84x84x4 frames;
MLP 2x256, batch 256; the Gym ablation's FC 50-50, batch 32) under both drivers (``loop``: the jitted step called per batch; ``scan``:
``lax.scan`` over a chunk of batches per call), the ratio of each critic to td, and the throughput
of 8 seeds vmapped in one program against 8 single-seed programs run one after the other.
Targets on 2 CPU cores : td-CQL Nature CNN <= 35 ms, gitd/td <= 1.75, 8 seeds >= 3x.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.batch import Batch
from offline_gitd.critic_registry import critic_names
from offline_gitd.critics import CriticConfig
from offline_gitd.learners.drivers import choose_compiler_options, choose_seed_strategy, make_chunk_runner
from offline_gitd.learners.family import make_discrete_family

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
    state = jax.jit(jax.vmap(family.init))(jax.vmap(jax.random.PRNGKey)(jnp.arange(seeds)))
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


def ms_per_step(kind: str, setup: str, driver: str, seeds: int, chunk: int, repeats: int) -> float:
    """Median wall time per update over ``repeats`` chunks, after one compiling chunk."""
    run_chunk = chunk_timer(make_family(kind, setup), setup, driver, seeds, chunk)
    return statistics.median(run_chunk() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", choices=[*SETUPS, "all"], default="all", help="which network(s) to time")
    parser.add_argument("--critics", default=",".join(critic_names()))
    parser.add_argument(
        "--chunk", type=int, default=0, help="updates per timed call (default: 20 CNN, 200 MLP, 2000 gym-mlp)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    setups = list(SETUPS) if args.setup == "all" else [args.setup]
    critics = args.critics.split(",")
    print(f"backend: {jax.default_backend()}, devices: {jax.devices()}")
    for setup in setups:
        torso, _, _, batch, widths = SETUPS[setup]
        chunk = args.chunk or DEFAULT_CHUNK[setup]
        shape = "" if torso == "nature" else f" {'x'.join(map(str, widths))}"
        print(f"\n{setup}: {torso}{shape} torso, batch {batch}, CQL, K = 5 for itd/gitd: ms per gradient step")
        print(f"{'critic':8s}{'loop':>10s}{'scan':>10s}{'loop/td':>10s}{'scan/td':>10s}")
        results = {}
        for kind in critics:
            results[kind] = {d: ms_per_step(kind, setup, d, 1, chunk, args.repeats) for d in ("loop", "scan")}
        for kind in critics:
            row = results[kind]
            base = results.get("td", row)
            print(
                f"{kind:8s}{row['loop']:10.2f}{row['scan']:10.2f}"
                f"{row['loop'] / base['loop']:10.2f}{row['scan'] / base['scan']:10.2f}"
            )
    for setup in (s for s in setups if SETUPS[s][0] == "mlp"):
        print(f"\n8 seeds in one program vs 8 sequential programs ({setup}, scan driver)")
        for kind in critics:
            chunk = args.chunk or DEFAULT_CHUNK[setup]
            one = ms_per_step(kind, setup, "scan", 1, chunk, args.repeats)
            eight = ms_per_step(kind, setup, "scan", 8, chunk, args.repeats)
            print(
                f"{kind:8s} one seed {one:6.2f} ms/step; 8 seeds {eight:6.2f} ms/step -> "
                f"throughput {8 * one / eight:4.2f}x sequential"
            )


if __name__ == "__main__":
    main()
