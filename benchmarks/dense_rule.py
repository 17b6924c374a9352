"""The products' gradient rule against another checkout's and flax's, side by side (docs/benchmarks.md#the-update-itself).

Run by hand (speed is never asserted by a test):

    .venv/bin/python -m benchmarks.dense_rule --compare-with /path/to/other/checkout --rounds 7

Times the DQN and CQL updates of the MinAtar network (batch 32, uint8 10x10x4; one seed and N
seeds vmapped, the ``scan`` driver the package runs it with) and the CQL update of the 256x256 MLP
(batch 256, one seed) with the package's ``Dense`` (offline_gitd/networks/dense.py, the products'
gradient rule), with another checkout's ``networks/dense.py`` loaded as a module of its own (its
rule, everything else this tree's), and with ``flax.linen.Dense`` (no rule). The rules are
swapped by the names the networks read when the step is traced, so one process holds every
program and the rounds interleave: load from other processes falls on all alike. Prints ms per
update, median (best) of the rounds, and each rule's median over this tree's.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import flax.linen as nn
import numpy as np

from benchmarks.harness import chunk_timer, interleaved, make_family
from offline_gitd.learners import actor, bc, iql
from offline_gitd.learners.drivers import choose_driver
from offline_gitd.networks import conv, dense, heads, minatar, torsos

# every module that builds the package's Dense by name, and the one that calls its product
DENSE_USERS = (heads, minatar, torsos, actor, bc, iql)
# label -> (train_step's setup tuple, critic, CQL alpha (0: DQN), seeds, updates per timed call)
STEPS = {
    "minatar dqn, 1 seed": (("minatar", (10, 10, 4), np.uint8, 32, (256, 256)), "td", 0.0, 1, 100),
    "minatar cql, 1 seed": (("minatar", (10, 10, 4), np.uint8, 32, (256, 256)), "td", 0.1, 1, 100),
    "minatar cql gitd, 1 seed": (("minatar", (10, 10, 4), np.uint8, 32, (256, 256)), "gitd", 0.1, 1, 100),
    "minatar cql, N seeds": (("minatar", (10, 10, 4), np.uint8, 32, (256, 256)), "td", 0.1, None, 50),
    "mlp 256x256 cql, 1 seed": (("mlp", (8,), np.float32, 256, (256, 256)), "td", 0.1, 1, 100),
}


def load_dense(checkout: Path) -> ModuleType:
    """``checkout``'s offline_gitd/networks/dense.py as a module of its own name."""
    path = checkout / "offline_gitd" / "networks" / "dense.py"
    spec = importlib.util.spec_from_file_location("compared_dense", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no dense.py at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # flax's dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def use_rule(layer: Any, product: Any) -> None:
    """Make every network build ``layer`` and the patches convolution call ``product`` from now on."""
    for module in DENSE_USERS:
        module.Dense = layer
    conv.dense_product = product


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare-with", type=Path, default=None, help="another checkout's root")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=5, help="N, the seeds vmapped in one program")
    parser.add_argument("--no-flax", action="store_true", help="leave out flax.linen.Dense")
    args = parser.parse_args()
    rules: dict[str, tuple[Any, Any]] = {"this tree": (dense.Dense, dense.dense_product)}
    if args.compare_with:
        other = load_dense(args.compare_with.resolve())
        rules["compared"] = (other.Dense, other.dense_product)
    if not args.no_flax:
        # flax's layer; the convolution's product without a rule
        rules["flax Dense"] = (nn.Dense, lambda x, kernel: x @ kernel)
    print(
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; ms per update, median (best) wall and median CPU time"
    )
    timers, cpu = {}, {}
    for label, (setup, kind, alpha, seeds, chunk) in STEPS.items():
        for rule, (layer, product) in rules.items():
            use_rule(layer, product)  # read when the step is traced, which the timer does now
            family = dataclasses.replace(make_family(kind, setup), cql_alpha=alpha)
            driver = choose_driver("auto", setup[0], chunks=True)
            cpu[label, rule] = []
            timers[label, rule] = chunk_timer(
                family, setup, driver, seeds or args.seeds, chunk, cpu_time=cpu[label, rule]
            )
    use_rule(dense.Dense, dense.dense_product)
    times = interleaved(timers, args.rounds)
    print(f"{'step':28s}{'rule':12s}{'ms/update':>18s}{'/ this tree':>12s}{'CPU ms':>9s}{'/ this tree':>12s}")
    for label in STEPS:
        own, own_cpu = statistics.median(times[label, "this tree"]), statistics.median(cpu[label, "this tree"])
        for rule in rules:
            runs, median_cpu = times[label, rule], statistics.median(cpu[label, rule])
            median = statistics.median(runs)
            print(
                f"{label:28s}{rule:12s}{median:9.3f} ({min(runs):6.3f}){median / own:12.3f}"
                f"{median_cpu:9.3f}{median_cpu / own_cpu:12.3f}"
            )
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
