"""Seeds in one program against one seed, and Gi-TD against TD, per torso (docs/benchmarks.md#seeds-in-one-program).

Run by hand (speed is never asserted by a test):

    .venv/bin/python -m benchmarks.seeds              # N = 5 seeds, every torso
    .venv/bin/python -m benchmarks.seeds --torsos nature --rounds 7

For each torso (Nature CNN, batch 32, uint8 84x84x4; the package's MinAtar CNN,
offline_gitd/networks/minatar.py, batch 32, uint8 10x10x4, also timed with flax's own Dense as
before the products' gradient rule; the 256x256 MLP, batch 256) and each critic (td and gitd with
K = 5, CQL), it times one seed and N seeds in one program with each seed strategy
(``vmap``; ``per-seed``: each seed's own step, offline_gitd/learners/drivers.py), for a
convolutional torso with each convolution (XLA's own, ``flax.linen.Conv``; patches times a matrix,
offline_gitd/networks/conv.py) where it matters: one seed with either, N vmapped seeds with
patches, N per-seed steps with XLA's; and programs built with XLA's defaults, with YNNPACK for
single matrix products only (the package's CPU build) and without YNNPACK, side by side
(docs/benchmarks.md#compiler-options). It prints ms per step (median and best wall time, median
process CPU time, which other processes' load inflates far less), N seeds over the faster single
seed, and N single-seed steps in a row; then gitd / td in time and in FLOPs (XLA's cost analysis
of the compiled step), and one seed's GFLOP/s against an f32 ``jnp.dot`` peak timed in the same
rounds. The programs of a torso are timed side by side in interleaved rounds, so load from other
processes falls on all of them alike.

Targets on CPU: N seeds <= 4x one seed (parity, N x, where one seed already runs at the matrix
product peak) and never slower than N in a row; gitd / td at most its FLOP ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics

import flax.linen as nn
import jax
import numpy as np

from benchmarks.harness import chunk_timer, interleaved, make_family, matmul_timer, medians, step_flops
from offline_gitd.learners.drivers import (
    NO_YNNPACK,
    YNNPACK_DOTS_ONLY,
    choose_compiler_options,
    choose_driver,
    choose_seed_strategy,
)
from offline_gitd.networks import minatar as minatar_net
from offline_gitd.networks import torsos
from offline_gitd.networks.conv import Conv
from offline_gitd.networks.dense import Dense

# label -> (setup as train_step's SETUPS tuples, torso module replacing the named one, updates per call)
TORSOS = {
    "nature": (("nature", (84, 84, 4), np.uint8, 32, (256, 256)), None, 16),
    "minatar": (("minatar", (10, 10, 4), np.uint8, 32, (256, 256)), None, 50),
    "mlp": (("mlp", (8,), np.float32, 256, (256, 256)), None, 50),
}
KINDS = ("td", "gitd")


# label -> (label, seeds, strategy, conv, XLA options): the programs timed side by side. The options
# are OPTIONS' keys: XLA's defaults, YNNPACK for single products only (what choose_compiler_options,
# offline_gitd/learners/drivers.py, picks on the CPU) and no YNNPACK at all, so that the choice can be
# checked on every torso; an MLP has no convolution, so its programs differ only in the seeds, the
# strategy and the options.
PROGRAMS = {
    "nature": (
        ("1 seed, XLA conv", 1, "vmap", "xla", "default"),
        ("1 seed, XLA conv, no YNN", 1, "vmap", "xla", "none"),
        ("1 seed, XLA conv, YNN dots", 1, "vmap", "xla", "dots"),
        ("1 seed, patches", 1, "vmap", "patches", "default"),
        ("N vmap, patches", None, "vmap", "patches", "default"),
        ("N per-seed, XLA conv", None, "per-seed", "xla", "default"),
        ("N per-seed, XLA, no YNN", None, "per-seed", "xla", "none"),
        ("N per-seed, XLA, YNN dots", None, "per-seed", "xla", "dots"),
    ),
    "minatar": (
        ("1 seed, XLA conv", 1, "vmap", "xla", "default"),
        ("1 seed, patches", 1, "vmap", "patches", "default"),
        ("1 seed, flax Dense", 1, "vmap", "flax-dense", "default"),
        ("1 seed, patches, YNN dots", 1, "vmap", "patches", "dots"),
        ("N vmap, patches", None, "vmap", "patches", "default"),
        ("N vmap, patches, YNN dots", None, "vmap", "patches", "dots"),
        ("N per-seed, XLA conv", None, "per-seed", "xla", "default"),
    ),
    "mlp": (
        ("1 seed", 1, "vmap", "xla", "default"),
        ("1 seed, YNN dots", 1, "vmap", "xla", "dots"),
        ("N vmap", None, "vmap", "xla", "default"),
        ("N vmap, no YNN", None, "vmap", "xla", "none"),
        ("N vmap, YNN dots", None, "vmap", "xla", "dots"),
        ("N per-seed", None, "per-seed", "xla", "default"),
        ("N per-seed, YNN dots", None, "per-seed", "xla", "dots"),
    ),
}
OPTIONS = {"default": {}, "dots": YNNPACK_DOTS_ONLY, "none": NO_YNNPACK}
# conv -> (the convolution, the dense layer) the torsos are traced with. "flax-dense": the products'
# gradient by flax's own rule, as before offline_gitd/networks/dense.py (docs/benchmarks.md#the-update-itself).
CONVS = {"xla": (nn.Conv, Dense), "patches": (Conv, Dense), "flax-dense": (Conv, nn.Dense)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="N, the seeds in one program")
    parser.add_argument("--torsos", default=",".join(TORSOS))
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per torso")
    args = parser.parse_args()
    n = args.seeds
    print(f"backend: {jax.default_backend()}, devices: {jax.devices()}, cores: {os.cpu_count()}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        "ms per gradient step (CQL, K = 5 for gitd): median (best) wall time of interleaved rounds, [median CPU time]"
    )
    peak_timer, peak_flops = matmul_timer()
    peak_times: list[float] = []
    summary, rates = [], []
    for label in args.torsos.split(","):
        setup, module, chunk = TORSOS[label]
        torso = "mlp" if label == "mlp" else label
        driver = choose_driver("auto", torso)
        auto = choose_seed_strategy("auto", torso)
        package_options = next(key for key, value in OPTIONS.items() if value == choose_compiler_options())
        programs = [
            (f"{n} {name[2:]}" if name.startswith("N ") else name, seeds or n, strategy, conv, options)
            for name, seeds, strategy, conv, options in PROGRAMS[label]
        ]
        families, timers, cpu = {}, {}, {}
        for name, seeds, strategy, conv, options in programs:
            # read when the step is traced, which the timer does now
            torsos.Conv = minatar_net.Conv = CONVS[conv][0]
            minatar_net.Dense = CONVS[conv][1]
            for kind in KINDS:
                families[(kind, conv)] = make_family(kind, setup, module)
                cpu[(kind, name)] = []
                timers[(kind, name)] = chunk_timer(
                    families[(kind, conv)],
                    setup,
                    driver,
                    seeds,
                    chunk,
                    strategy,
                    cpu[(kind, name)],
                    OPTIONS[options],
                )
        times = interleaved(timers, args.rounds, before_round=lambda: peak_times.append(peak_timer()))
        med = medians(times)
        print(
            f"\n{label} (driver {driver}; the package's seed strategy here: {auto}; its XLA options: {package_options})"
        )
        print(f"{'critic':8s}{'program':24s}{'ms/step':>18s}{'CPU ms':>9s}{'x 1 seed':>10s}")
        for kind in KINDS:
            one = min((med[(kind, name)], name) for name, seeds, *_ in programs if seeds == 1)[1]
            for name, seeds, *_ in programs:
                key = (kind, name)
                ratio = (
                    f"{med[key] / med[(kind, one)]:10.2f}" if seeds == n else f"{'(best)' if name == one else '':>10s}"
                )
                print(
                    f"{kind:8s}{name:24s}{med[key]:9.2f} ({min(times[key]):6.2f})"
                    f"{statistics.median(cpu[key]):9.2f}{ratio}"
                )
            print(f"{kind:8s}{f'{n} in a row':24s}{n * med[(kind, one)]:9.2f}")
        flops = {kind: step_flops(families[(kind, "xla")], setup) for kind in KINDS}
        fast = {kind: min(med[(kind, name)] for name, seeds, *_ in programs if seeds == n) for kind in KINDS}
        single = {kind: min(med[(kind, name)] for name, seeds, *_ in programs if seeds == 1) for kind in KINDS}
        best = {kind: min(min(times[(kind, name)]) for name, seeds, *_ in programs if seeds == 1) for kind in KINDS}
        summary.append((label, single["gitd"] / single["td"], fast["gitd"] / fast["td"], flops["gitd"] / flops["td"]))
        rates += [(label, kind, flops[kind] / best[kind] / 1e6) for kind in KINDS]
    peak = peak_flops / min(peak_times) / 1e6
    print(f"\ngitd / td{'':3s}{'time, 1 seed':>14s}{f'time, {n} seeds':>16s}{'FLOPs':>8s}")
    for label, one, many, flop_ratio in summary:
        print(f"{label:12s}{one:14.2f}{many:16.2f}{flop_ratio:8.2f}")
    print(f"\nmatmul peak (f32 1024x1024 jnp.dot, best of the rounds): {peak:.1f} GFLOP/s")
    print("one seed's step (XLA cost analysis FLOPs / best time, the least disturbed by other load):")
    for label, kind, rate in rates:
        print(f"{label:12s}{kind:6s}{rate:8.1f} GFLOP/s = {rate / peak:5.0%} of the peak")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
