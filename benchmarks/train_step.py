"""Speed of one CQL gradient step per critic and driver, and of seeds in one program.

Run by hand on a quiet machine (speed is never asserted by a test):

    .venv/bin/python benchmarks/train_step.py                 # everything
    .venv/bin/python benchmarks/train_step.py --torso mlp     # only the MLP rows

Prints ms per gradient step for each critic with CQL (Nature CNN, batch 32, uint8 84x84x4 frames;
MLP 2x256, batch 256) under both drivers (``loop``: the jitted step called per batch; ``scan``:
``lax.scan`` over a chunk of batches per call), the ratio of each critic to td, and the throughput
of 8 seeds vmapped in one program against 8 single-seed programs run one after the other.
Targets on 2 CPU cores (issue 4): td-CQL Nature CNN <= 35 ms, gitd/td <= 1.75, 8 seeds >= 3x.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.batch import Batch
from offline_gitd.critics import CRITIC_KINDS, CriticConfig
from offline_gitd.learners.drivers import make_chunk_runner
from offline_gitd.learners.family import make_discrete_family

SETUPS = {
    # torso name -> (obs shape, obs dtype, batch size, mlp widths)
    "nature": ((84, 84, 4), np.uint8, 32, (256, 256)),
    "mlp": ((8,), np.float32, 256, (256, 256)),
}
N_ACTIONS = 6


def random_batches(rng: np.random.Generator, torso: str, seeds: int, count: int) -> list[Batch]:
    shape, dtype, batch, _ = SETUPS[torso]

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


def make_family(kind: str, torso: str):
    shape, dtype, batch, widths = SETUPS[torso]
    critic = CriticConfig(kind=kind, K=None if kind in ("td", "tdrc") else 5, T=2000)
    return make_discrete_family(
        critic,
        N_ACTIONS,
        np.zeros((1, *shape), dtype),
        torso=torso,
        mlp_hidden=widths,
        head_hidden=512,
        lr=5e-5,
        adam_eps=3.125e-4,
        cql_alpha=0.1,
    )


def ms_per_step(kind: str, torso: str, driver: str, seeds: int, chunk: int, repeats: int) -> float:
    """Median wall time per update over ``repeats`` chunks, after one compiling chunk."""
    family = make_family(kind, torso)
    state = jax.jit(jax.vmap(family.init))(jax.vmap(jax.random.PRNGKey)(jnp.arange(seeds)))
    run = make_chunk_runner(family.step, driver)
    rng = np.random.default_rng(0)
    pool = random_batches(rng, torso, seeds, chunk)
    device_pool = [jax.device_put(b) for b in pool]
    stacked = jax.device_put(jax.tree.map(lambda *xs: np.stack(xs), *pool))
    batches = stacked if driver == "scan" else device_pool
    times = []
    for i in range(repeats + 1):
        started = time.perf_counter()
        state, aux = run(state, batches)
        jax.block_until_ready((state, aux))
        if i:  # the first chunk compiles
            times.append((time.perf_counter() - started) / chunk * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torso", choices=["nature", "mlp", "both"], default="both")
    parser.add_argument("--critics", default=",".join(CRITIC_KINDS))
    parser.add_argument("--chunk", type=int, default=0, help="updates per timed call (default: 20 CNN, 200 MLP)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torsos = ["nature", "mlp"] if args.torso == "both" else [args.torso]
    critics = args.critics.split(",")
    print(f"backend: {jax.default_backend()}, devices: {jax.devices()}")
    for torso in torsos:
        chunk = args.chunk or (20 if torso == "nature" else 200)
        _, _, batch, _ = SETUPS[torso]
        print(f"\n{torso} torso, batch {batch}, CQL, K = 5 for itd/gitd: ms per gradient step")
        print(f"{'critic':8s}{'loop':>10s}{'scan':>10s}{'loop/td':>10s}{'scan/td':>10s}")
        results = {}
        for kind in critics:
            results[kind] = {d: ms_per_step(kind, torso, d, 1, chunk, args.repeats) for d in ("loop", "scan")}
        for kind in critics:
            row = results[kind]
            base = results.get("td", row)
            print(
                f"{kind:8s}{row['loop']:10.2f}{row['scan']:10.2f}"
                f"{row['loop'] / base['loop']:10.2f}{row['scan'] / base['scan']:10.2f}"
            )
    if "mlp" in torsos:
        print("\n8 seeds in one program vs 8 sequential programs (MLP, scan driver)")
        for kind in critics:
            one = ms_per_step(kind, "mlp", "scan", 1, 200, args.repeats)
            eight = ms_per_step(kind, "mlp", "scan", 8, 200, args.repeats)
            print(
                f"{kind:8s} one seed {one:6.2f} ms/step; 8 seeds {eight:6.2f} ms/step -> "
                f"throughput {8 * one / eight:4.2f}x sequential"
            )


if __name__ == "__main__":
    main()
