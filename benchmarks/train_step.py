"""Speed of one CQL gradient step per critic and driver, and of seeds in one program.

Run by hand on a quiet machine (speed is never asserted by a test):

    .venv/bin/python -m benchmarks.train_step                 # everything
    .venv/bin/python -m benchmarks.train_step --setup gym-mlp  # only the paper's Gym network

Prints ms per gradient step for each critic with CQL (Nature CNN, batch 32, uint8 84x84x4 frames;
MLP 2x256, batch 256; the Gym ablation's FC 50-50, batch 32) under both drivers (``loop``: the jitted step called per batch; ``scan``:
``lax.scan`` over a chunk of batches per call), the ratio of each critic to td, and the throughput
of 8 seeds vmapped in one program against 8 single-seed programs run one after the other.
Targets on 2 CPU cores : td-CQL Nature CNN <= 35 ms, gitd/td <= 1.75, 8 seeds >= 3x.
"""

from __future__ import annotations

import argparse
import statistics

import jax

from benchmarks.harness import DEFAULT_CHUNK, SETUPS, chunk_timer, make_family
from offline_gitd.critic_registry import critic_names


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
