"""Seeds in one program against one seed, and Gi-TD against TD, per torso (docs/benchmarks.md#seeds-in-one-program).

Run by hand (speed is never asserted by a test):

    .venv/bin/python benchmarks/seeds.py              # N = 5 seeds, every torso
    .venv/bin/python benchmarks/seeds.py --torsos nature --rounds 7

For each torso (Nature CNN, batch 32, uint8 84x84x4; a MinAtar-sized CNN, batch 32, uint8
10x10x4, one 3x3 conv with 16 channels then FC 128; the 256x256 MLP, batch 256) and each critic (td
and gitd with K = 5, CQL), it prints ms per gradient step for 1 seed and for N seeds vmapped in one
program, the ratio, and N sequential single-seed steps (N times the one-seed figure) for comparison;
then gitd / td in time and in FLOPs (XLA's cost analysis of the compiled step). The four programs
of a torso are timed side by side, in interleaved rounds, and each figure is the median (and the
best) over the rounds, so load from other processes falls on all of them alike.

Targets on CPU: N seeds <= 4x one seed (parity, N x, where one seed already runs at the matrix
product peak) and never slower than N in a row; gitd / td at most its FLOP ratio.
``--flax-conv`` times the torsos with ``flax.linen.Conv``, the convolution before patches.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.learners.drivers import choose_driver
from offline_gitd.networks import torsos
from offline_gitd.networks.conv import Conv
from offline_gitd.networks.torsos import scale_observation

sys.path.insert(0, str(Path(__file__).parent))
from train_step import chunk_timer, make_family, random_batches  # noqa: E402 - the CQL family of benchmarks/train_step.py


class MinAtarCNN(nn.Module):
    """The MinAtar network (Young and Tian 2019): one 3x3 conv, 16 channels, VALID, then FC 128."""

    @nn.compact
    def __call__(self, obs: jnp.ndarray) -> jnp.ndarray:
        x = nn.relu(torsos.Conv(16, (3, 3), padding="VALID")(scale_observation(obs)))
        return nn.relu(nn.Dense(128)(x.reshape(x.shape[:-3] + (-1,))))


# label -> (setup as train_step's SETUPS tuples, torso module replacing the named one, updates per call)
TORSOS = {
    "nature": (("nature", (84, 84, 4), np.uint8, 32, (256, 256)), None, 4),
    "minatar": (("minatar", (10, 10, 4), np.uint8, 32, (256, 256)), MinAtarCNN(), 50),
    "mlp": (("mlp", (8,), np.float32, 256, (256, 256)), None, 50),
}
KINDS = ("td", "gitd")


def step_flops(family, setup: tuple) -> float:
    """FLOPs of one single-seed step, from XLA's cost analysis of the compiled program."""
    state = jax.vmap(family.init)(jax.vmap(jax.random.PRNGKey)(jnp.arange(1)))
    batch = random_batches(np.random.default_rng(0), setup, 1, 1)[0]
    cost = jax.jit(jax.vmap(family.step)).lower(state, batch).compile().cost_analysis()
    return float((cost[0] if isinstance(cost, list) else cost)["flops"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="N, the seeds in one program")
    parser.add_argument("--torsos", default=",".join(TORSOS))
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per torso")
    parser.add_argument("--flax-conv", action="store_true", help="time flax.linen.Conv instead of the package's Conv")
    args = parser.parse_args()
    torsos.Conv = nn.Conv if args.flax_conv else Conv
    n = args.seeds
    print(f"backend: {jax.default_backend()}, devices: {jax.devices()}, conv: {torsos.Conv.__module__}.Conv")
    print("ms per gradient step (CQL, K = 5 for gitd), median (best) of interleaved rounds")
    header = (
        f"{'torso':8s}{'critic':7s}{'driver':7s}{'1 seed':>16s}{f'{n} seeds':>18s}{'ratio':>7s}{f'{n} in a row':>12s}"
    )
    print(header)
    summary = []
    for label in args.torsos.split(","):
        setup, module, chunk = TORSOS[label]
        driver = choose_driver("auto", "mlp" if label == "mlp" else label)
        families = {kind: make_family(kind, setup, module) for kind in KINDS}
        timers = {(kind, s): chunk_timer(families[kind], setup, driver, s, chunk) for kind in KINDS for s in (1, n)}
        times = {key: [] for key in timers}
        for _ in range(args.rounds):
            for key, run_chunk in timers.items():
                times[key].append(run_chunk())
        med = {key: statistics.median(v) for key, v in times.items()}
        for kind in KINDS:
            one, many = (kind, 1), (kind, n)
            print(
                f"{label:8s}{kind:7s}{driver:7s}{med[one]:9.2f} ({min(times[one]):5.2f})"
                f"{med[many]:10.2f} ({min(times[many]):6.2f}){med[many] / med[one]:7.2f}{n * med[one]:12.2f}"
            )
        flops = {kind: step_flops(families[kind], setup) for kind in KINDS}
        summary.append(
            (label, med[("gitd", 1)] / med[("td", 1)], med[("gitd", n)] / med[("td", n)], flops["gitd"] / flops["td"])
        )
    print(f"\ngitd / td{'':3s}{'time, 1 seed':>14s}{f'time, {n} seeds':>16s}{'FLOPs':>8s}")
    for label, one, many, flop_ratio in summary:
        print(f"{label:12s}{one:14.2f}{many:16.2f}{flop_ratio:8.2f}")


if __name__ == "__main__":
    main()
