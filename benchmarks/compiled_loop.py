"""The compiled DQN loop against the Python loop on the envs it has (docs/benchmarks.md#the-compiled-loop).

Run by hand (speed is never asserted by a test):

    .venv/bin/python benchmarks/compiled_loop.py                     # CartPole and Breakout, td and gitd, 1 and 5 seeds
    .venv/bin/python benchmarks/compiled_loop.py --critics td --seeds 1 --steps 2000   # a quick look

For each env (``--envs``: CartPole-v1 and MinAtar/Breakout-v1 by default), critic and number of seeds, at one update per env step and the env's defaults otherwise,
it times, in env steps per second of each seed (all seeds step in lockstep):

(a) the Python loop as users run it: ``offline_gitd online dqn`` in a process of its own, read
    from its ``metrics.csv`` (``benchmarks/online_loop.py``'s own measurement);
(b) the Python loop's update floor: its compiled step alone on batches of the same shapes
    (``benchmarks/online_loop.py``'s), as env steps/s at one update each;
(c) the compiled loop (:mod:`offline_gitd.online.compiled`): env, acting, replay and update in
    one program, ``--steps`` env steps per call, timed after the call that compiles it;

and prints (c)/(a), the compiled loop's speed-up over the loop users run, and (c)/(b): above 1,
the compiled loop is faster than the Python loop could ever be with its updates as they are.
Each measurement is the median of ``--rounds`` rounds, the three interleaved so that load from
other processes falls on all alike; the first window of each holds the initial random samples.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax

from offline_gitd.online.compiled import CompiledDQN, compiled_dqn
from offline_gitd.online.config import OnlineConfig

sys.path.insert(0, str(Path(__file__).parent))
from online_loop import ROOT, cli_window, fill, make_run, update_floor  # noqa: E402 - the Python loop's timings


def compiled_rates(loop: CompiledDQN, seeds: int, window: int, rounds: int) -> list[float]:
    """(c): env steps/s of each of ``rounds`` windows of ``window`` steps, one call each, after a
    first window that holds the initial samples and compiles the program."""
    carry = loop.init(list(range(seeds)))
    carry, records = loop.run_chunk(carry, 0, window)
    jax.block_until_ready(records)
    rates = []
    for r in range(1, rounds + 1):
        start = time.perf_counter()
        carry, records = loop.run_chunk(carry, r * window, window)
        jax.block_until_ready((carry, records))
        rates.append(window / (time.perf_counter() - start))
    return rates


def measure(env: str, critic: str, seeds: int, steps: int, rounds: int) -> tuple[float, float, float]:
    """(a), (b) and (c) of one env, critic and number of seeds, each the median of ``rounds``
    interleaved rounds, in env steps/s per seed."""
    initial = min(1_000, steps // 2)  # as (a) runs it
    with tempfile.TemporaryDirectory(prefix="compiled-loop-") as tmp:
        cfg = OnlineConfig(
            algo="dqn",
            env=env,
            critic=critic,
            seeds=f"0-{seeds - 1}" if seeds > 1 else "0",
            initial_samples=initial,
            utd=1.0,
            out=f"{tmp}/compiled",
        )
        loop, _ = compiled_dqn(cfg)
        python_run = make_run(env, critic, seeds, Path(tmp) / "python")
        fill(python_run)
        python, floor, compiled = [], [], []
        for _ in range(rounds):
            python.append(cli_window(ROOT, env, critic, seeds, steps))
            floor.append(1 / update_floor(python_run, steps))
            compiled.append(statistics.median(compiled_rates(loop, seeds, steps, 1)))
    a, b, c = (statistics.median(x) for x in (python, floor, compiled))
    return a, b, c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="CartPole-v1,MinAtar/Breakout-v1", help="ids the compiled loop has")
    parser.add_argument("--critics", default="td,gitd")
    parser.add_argument("--seeds", default="1,5")
    parser.add_argument("--steps", type=int, default=10_000, help="env steps per timed window (and per call)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"jax {jax.__version__}, {jax.default_backend()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(
        f"{'env':20} {'critic':6} {'seeds':>5} | {'(a) python':>12} {'(b) floor':>12} {'(c) compiled':>12} | "
        f"{'(c)/(a)':>7} {'(c)/(b)':>7}   (env steps/s per seed)"
    )
    for env in args.envs.split(","):
        for critic in args.critics.split(","):
            for seeds in (int(s) for s in args.seeds.split(",")):
                a, b, c = measure(env, critic, seeds, args.steps, args.rounds)
                print(
                    f"{env:20} {critic:6} {seeds:>5} | {a:>12.0f} {b:>12.0f} {c:>12.0f} | {c / a:>7.2f} {c / b:>7.2f}",
                    flush=True,
                )
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
