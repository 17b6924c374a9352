"""Seeds over the CPU's cores: one vmapped program against the seeds in groups, one per CPU device
(docs/benchmarks.md#seeds-over-the-cores).

Run by hand (speed is never asserted by a test):

    .venv/bin/python -m benchmarks.seed_groups                      # every torso, 1, 5 and 10 seeds
    .venv/bin/python -m benchmarks.seed_groups --torsos minatar --rounds 7

For the package's MinAtar CNN (batch 32), the 256x256 MLP (batch 256) and the paper's Gym network
(FC 50-50, batch 32), td and gitd (K = 5, CQL), it times the scanned chunk runner the offline loop
uses (offline_gitd/learners/drivers.py) on N seeds as one program on one device, and the same
runner over groups of seeds, one per CPU device (offline_gitd/learners/seed_groups.py, as
``offline_gitd train`` runs it), in interleaved rounds. It prints ms per update, median (best), the
speed-up, and N seeds over one seed for both; then the rate of each program in GFLOP/s (XLA's cost
analysis of one seed's step, times the seeds, over the best time) as a share of an f32 ``jnp.dot``
peak timed on all cores in the same rounds. The process asks for one CPU device per core, as the
command line does.
"""

from __future__ import annotations

import argparse
import os
import time

from offline_gitd.xla_start import request_cpu_devices

request_cpu_devices()  # before JAX starts

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.harness import SETUPS, interleaved, make_family, matmul_timer, medians, random_batches, step_flops  # noqa: E402
from offline_gitd.learners.drivers import choose_compiler_options, make_chunk_runner  # noqa: E402
from offline_gitd.learners.family import seed_states  # noqa: E402
from offline_gitd.learners.seed_groups import over_devices  # noqa: E402

# label -> (setup, updates per timed call)
TORSOS = {
    "minatar": (("minatar", (10, 10, 4), np.uint8, 32, (256, 256)), 100),
    "mlp": (SETUPS["mlp"], 100),
    "gym-mlp": (SETUPS["gym-mlp"], 1000),
}


def timer(family, setup: tuple, seeds: int, chunk: int, grouped: bool):
    """A function running one chunk of ``chunk`` updates of ``seeds`` seeds, returning ms per update."""
    run = make_chunk_runner(family.step, "scan", "vmap", choose_compiler_options())
    if grouped:
        run = over_devices(run, jax.devices("cpu"))
    state = seed_states(family, jnp.arange(seeds))
    pool = random_batches(np.random.default_rng(0), setup, seeds, chunk)
    batches = jax.tree.map(lambda *xs: np.stack(xs), *pool)  # host arrays, as the feed hands them over
    box = [state]

    def run_chunk() -> float:
        started = time.perf_counter()
        box[0], aux = run(box[0], batches)
        jax.block_until_ready((box[0], aux))
        return (time.perf_counter() - started) / chunk * 1000

    run_chunk()  # compiles
    return run_chunk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torsos", default=",".join(TORSOS))
    parser.add_argument("--seeds", default="5,10", help="N, the seed counts timed beside one seed")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    counts = [int(n) for n in args.seeds.split(",")]
    print(f"cores: {os.cpu_count()}, CPU devices: {len(jax.devices('cpu'))}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    peak_timer, peak_flops = matmul_timer()
    peak_times: list[float] = []
    rates: list[tuple] = []
    for label in args.torsos.split(","):
        setup, chunk = TORSOS[label]
        timers = {}
        for kind in ("td", "gitd"):
            family = make_family(kind, setup)
            timers[(kind, 1, False)] = timer(family, setup, 1, chunk, False)
            for n in counts:
                for grouped in (False, True):
                    timers[(kind, n, grouped)] = timer(family, setup, n, chunk, grouped)
        times = interleaved(timers, args.rounds, before_round=lambda: peak_times.append(peak_timer()))
        flops = {kind: step_flops(make_family(kind, setup), setup) for kind in ("td", "gitd")}
        rates += [(label, *key, flops[key[0]] * key[1] / min(times[key]) / 1e6) for key in timers]
        med = medians(times)
        print(f"\n{label}: ms per update, median (best) of {args.rounds} interleaved rounds")
        print(f"{'critic':7s}{'seeds':>6s}{'one program':>20s}{'groups':>20s}{'speed-up':>10s}{'x 1 seed':>16s}")
        for kind in ("td", "gitd"):
            one = med[(kind, 1, False)]
            print(f"{kind:7s}{1:6d}{one:11.3f} ({min(times[(kind, 1, False)]):6.3f})")
            for n in counts:
                whole, groups = (kind, n, False), (kind, n, True)
                print(
                    f"{kind:7s}{n:6d}{med[whole]:11.3f} ({min(times[whole]):6.3f}){med[groups]:11.3f} "
                    f"({min(times[groups]):6.3f}){med[whole] / med[groups]:9.2f}x"
                    f"{med[whole] / one:8.2f}{med[groups] / one:8.2f}"
                )
    peak = peak_flops / min(peak_times) / 1e6
    print(f"\nmatmul peak (f32 1024x1024 jnp.dot, all cores, best of the rounds): {peak:.1f} GFLOP/s")
    print("GFLOP/s of each program (one seed's step FLOPs x seeds / best time), share of the peak:")
    for label, kind, n, grouped, rate in rates:
        program = "groups" if grouped else "one program"
        print(f"{label:9s}{kind:6s}{n:4d} seeds, {program:12s}{rate:8.1f} GFLOP/s = {rate / peak:4.0%}")
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
