"""The online loop against the cost of its updates (docs/benchmarks.md#the-online-loop).

Run by hand (speed is never asserted by a test):

    .venv/bin/python -m benchmarks.online_loop                      # Breakout and CartPole, td and gitd, 1 and 5 seeds
    .venv/bin/python -m benchmarks.online_loop --envs MinAtar/Breakout-v1 --critics td --seeds 1
    .venv/bin/python -m benchmarks.online_loop --compare-with /path/to/older/checkout   # (a) of both trees, interleaved
    .venv/bin/python -m benchmarks.online_loop --pipelines collect,train --envs MinAtar/Breakout-v1
    .venv/bin/python -m benchmarks.online_loop --loop compiled --compare-with /path/to/older/checkout
    .venv/bin/python -m benchmarks.online_loop --loop compiled --compare-with . --compare-loop python   # compiled vs Python

For each env, critic and number of seeds, at one update per env step, it times:

(a) the loop as users run it: ``offline_gitd online dqn`` in a process of its own, its speed read
    from ``metrics.csv`` (the two logging windows after the one that compiles), env steps per second;
(b) the update floor: the same number of updates with no environment, the loop's own compiled
    step called once per update on batches of the same shapes, waiting only at the end;
(c) acting + env + replay alone: the loop's own env step (policy, env, replay add) and batch
    sampling with no update.

and prints (a) in env steps/s, (b) and (c) in ms per env step and (a)/(b), the loop's cost over
its updates' (target: at most 1.25 for MinAtar DQN). ``--compare-with`` runs (a) from another
checkout of the package too (its ``offline_gitd`` on ``PYTHONPATH``), in rounds interleaved with
this tree's, so load from other processes falls on both alike.

``--loop compiled`` times this tree's ``online dqn --loop compiled`` (the whole loop as one program,
for the envs that exist in JAX) as (a), against its own floor: (b) the same step scanned over
batches already on the device (the updates as the compiled loop runs them) and (c) the compiled loop
with its updates switched off. The compared tree's (a) stays the Python loop (``--compare-loop``).

``--pipelines`` adds the two other loops the MinAtar experiment spends its time in, each against
its own update floor:

* ``collect`` (one seed): ``offline_gitd collect ENV --policy dqn --utd 1`` as users run it, env
  steps/s from its ``metrics.csv`` windows after the first, against (b): the online loop plus the
  Minari recorder, so (a)/(b) of collect less that of online is the recorder's share.
* ``train``: ``offline_gitd train`` (CQL, ``--eval-episodes 0``) on the dataset that collect just
  wrote, gradient steps/s from ``epoch_seconds`` of the epochs after the first, against the offline
  loop's own chunk runner on chunks already sampled and on the device, dispatched back to back.
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.learners.drivers import (
    choose_compiler_options,
    choose_driver,
    choose_seed_strategy,
    make_chunk_runner,
)
from offline_gitd.learners.family import seed_states
from offline_gitd.online.compiled import CompiledDQN
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.lifecycle import online_lifecycle
from offline_gitd.online.loop import OnlineRun
from offline_gitd.online.train import build_family, compiled_dqn, resolve_config
from offline_gitd.rundir.flags import RunFlags

ROOT = Path(__file__).resolve().parents[1]
INITIAL = 1_000  # random steps before the first update (small: the timed windows come after)


def cli_window(tree: Path, env: str, critic: str, seeds: int, window: int, loop: str = "python") -> float:
    """(a): env steps/s of the logging windows after the first of a real run of ``tree``'s package
    (``--loop loop``)."""
    with tempfile.TemporaryDirectory(prefix="online-loop-") as tmp:
        seed_list = seed_range(seeds)
        steps = 3 * window  # the first window holds the random steps and compiles
        python = [sys.executable, "-m", "offline_gitd.cli"]
        args = [
            "online",
            "dqn",
            "--env",
            env,
            "--critic",
            critic,
            "--seeds",
            seed_list,
            "--steps",
            str(steps),
            "--initial-samples",
            str(min(INITIAL, window // 2)),
            "--log-every",
            str(window),
            "--checkpoint-every",
            str(steps),
            "--utd",
            "1",
            "--out",
            f"{tmp}/run",
            "--no-progress",
            "--no-tensorboard",
            *(["--loop", loop] if loop != "python" else []),  # an older tree may not have the option
        ]
        env_vars = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run(python + args, check=True, env=env_vars, cwd=tmp, capture_output=True)
        rows = metric_rows(Path(tmp) / "run" / "metrics.csv")
        return window / statistics.median(float(row["window_seconds"]) for row in rows[1:])


def collect_window(tree: Path, env: str, critic: str, steps: int, data_dir: Path) -> tuple[float, str]:
    """(a) of ``collect``: env steps/s over its logging windows after the first (random steps and
    compiling), and the id of the dataset it wrote (under ``data_dir``), for ``train``."""
    dataset = f"bench/{env.replace('/', '-')}/dqn-v0"
    with tempfile.TemporaryDirectory(prefix="collect-loop-") as tmp:
        args = [env, "--steps", str(steps), "--policy", "dqn", "--critic", critic, "--utd", "1"]
        args += ["--out", dataset, "--data-dir", str(data_dir), "--run-dir", f"{tmp}/run", "--overwrite"]
        subprocess.run(
            [sys.executable, "-m", "offline_gitd.cli", "collect", *args, "--no-progress", "--no-tensorboard"],
            check=True,
            env={**os.environ, "PYTHONPATH": str(tree)},
            cwd=tmp,
            capture_output=True,
        )
        rows = metric_rows(Path(tmp) / "run" / "metrics.csv")
        steps = [int(row["step"]) for row in rows]
        seconds = [float(row["window_seconds"]) for row in rows]
    per_window = [(b - a) / s for a, b, s in zip(steps[1:-1], steps[2:], seconds[2:], strict=True)]
    return statistics.median(per_window or [steps[-1] / sum(seconds)]), dataset


def train_window(tree: Path, dataset: str, data_dir: Path, critic: str, seeds: int, window: int) -> float:
    """(a) of ``train``: gradient steps/s of the offline loop's epochs after the first (which
    compiles), with no evaluation."""
    with tempfile.TemporaryDirectory(prefix="train-loop-") as tmp:
        args = ["train", "--dataset", f"minari:{dataset}", "--data-dir", str(data_dir), "--critic", critic]
        args += ["--seeds", seed_range(seeds), "--epochs", "3", "--steps-per-epoch", str(window)]
        args += ["--eval-episodes", "0", "--out", f"{tmp}/run", "--no-progress", "--no-tensorboard"]
        subprocess.run(
            [sys.executable, "-m", "offline_gitd.cli", *args],
            check=True,
            env={**os.environ, "PYTHONPATH": str(tree)},
            cwd=tmp,
            capture_output=True,
        )
        rows = metric_rows(Path(tmp) / "run" / "metrics.csv")
    return window / statistics.median(float(row["epoch_seconds"]) for row in rows[1:])


def train_floor(dataset: str, data_dir: Path, critic: str, seeds: int, window: int, chunk: int = 100) -> float:
    """(b) of ``train``: seconds per gradient step of the offline loop's own runner (its feed, seed
    strategy and compiler options) on ``window`` steps' chunks sampled beforehand."""
    from offline_gitd.data.datasets import open_offline_data
    from offline_gitd.offline.config import OfflineConfig
    from offline_gitd.offline.feed import ChunkFeed
    from offline_gitd.offline.train import build_family, open_config_dataset, resolve_config

    cfg = OfflineConfig(
        dataset=f"minari:{dataset}", data_dir=str(data_dir), critic=critic, seeds=seed_range(seeds), out="-"
    )
    opened = open_config_dataset(cfg)
    cfg = resolve_config(cfg, opened)
    data = open_offline_data(cfg, opened)
    family = build_family(cfg, data)
    feed = ChunkFeed(data.replay, cfg.batch_size, choose_driver(cfg.driver, cfg.torso), cfg.frames)
    runner = feed.runner(family.step, choose_seed_strategy("auto", cfg.torso), choose_compiler_options())
    rngs = [np.random.default_rng(seed) for seed in range(seeds)]
    chunks = [feed.chunk(rngs, chunk) for _ in range(max(1, window // chunk) + 1)]
    state = seed_states(family, np.arange(seeds))
    state, aux = runner(state, chunks[0])  # compiles
    jax.block_until_ready(aux)
    start = time.perf_counter()
    for batches in chunks[1:]:
        state, aux = runner(state, batches)
    jax.block_until_ready((state, aux))
    return (time.perf_counter() - start) / ((len(chunks) - 1) * chunk)


def metric_rows(path: Path) -> list[dict[str, str]]:
    """Seed 0's rows of a run's ``metrics.csv``."""
    with open(path) as f:
        return [row for row in csv.DictReader(f) if row["seed"] == "0"]


def seed_range(seeds: int) -> str:
    """``--seeds`` for seeds 0 .. seeds - 1."""
    return f"0-{seeds - 1}" if seeds > 1 else "0"


def make_run(env: str, critic: str, seeds: int, out: Path) -> OnlineRun:
    """The loop's own object, started (envs reset, replays empty), for (b) and (c)."""
    cfg, info = resolve_config(
        OnlineConfig(
            algo="dqn",
            env=env,
            critic=critic,
            seeds=seed_range(seeds),
            steps=10**9,
            initial_samples=INITIAL,
            utd=1.0,
            out=str(out),
        )
    )
    family = build_family(cfg, info)
    run = online_lifecycle(cfg, info, RunFlags(overwrite=True))
    loop = OnlineRun(cfg, info, family, out, False, None, run)
    loop.start()
    return loop


def fill(loop: OnlineRun) -> None:
    """The initial random steps: the replay then holds what the timed work samples from."""
    for step in range(1, INITIAL + 1):
        loop._env_step(step)


def update_floor(loop: OnlineRun, window: int, chunk: int = 100, driver: str | None = None) -> float:
    """(b): seconds per update of the loop's compiled step, dispatched back to back in chunks of
    ``chunk`` updates (the offline loop's way: metrics stay on the device until a chunk ends);
    ``driver`` ``scan`` for the compiled loop's way (the updates inside one program)."""
    cfg = loop.cfg
    driver = driver or choose_driver(cfg.driver, cfg.torso)
    runner = make_chunk_runner(
        loop.family.step, driver, choose_seed_strategy("auto", cfg.torso), choose_compiler_options()
    )

    def as_chunk(batches: list) -> object:
        return jax.tree.map(lambda *xs: np.stack(xs), *batches) if driver == "scan" else batches

    chunks = [as_chunk([loop._sample()[0] for _ in range(chunk)]) for _ in range(max(1, window // chunk))]
    state = jax.tree.map(lambda x: x.copy(), loop.state)
    state, aux = runner(state, chunks[0])  # compiles
    jax.block_until_ready(aux)
    start = time.perf_counter()
    for batches in chunks:
        state, aux = runner(state, batches)
    jax.block_until_ready((state, aux))
    return (time.perf_counter() - start) / (len(chunks) * chunk)


def acting_alone(loop: OnlineRun, first_step: int, window: int) -> float:
    """(c): seconds per env step of acting, env and replay (add and sample), no update."""
    loop._env_step(first_step)  # compiles the policy
    loop._sample()
    start = time.perf_counter()
    for step in range(first_step + 1, first_step + 1 + window):
        loop._env_step(step)
        loop._sample()
    return (time.perf_counter() - start) / window


@functools.cache
def compiled_loop_for(env: str, critic: str, seeds: int) -> CompiledDQN:
    """The compiled loop of one config, built once so that every round reuses its compiled program
    (building it writes nothing: ``out`` is only resolved)."""
    out = Path(tempfile.gettempdir()) / "compiled-acting"
    cfg = OnlineConfig(algo="dqn", env=env, critic=critic, seeds=seed_range(seeds), utd=1.0, out=str(out))
    return compiled_dqn(cfg)[0]


def compiled_acting(env: str, critic: str, seeds: int, window: int) -> float:
    """(c) of the compiled loop: seconds per env step of its program with every update switched
    off (acting, env, resets and replay writes of every seed), after a first call that compiles."""
    loop = compiled_loop_for(env, critic, seeds)
    epsilons, no_updates = jnp.full((window,), 0.1, jnp.float32), jnp.zeros((window,), bool)
    carry, records = loop.program(loop.init(list(range(seeds))), epsilons, no_updates)
    jax.block_until_ready(records)
    start = time.perf_counter()
    carry, records = loop.program(carry, epsilons, no_updates)
    jax.block_until_ready((carry, records))
    return (time.perf_counter() - start) / window


def online_rows(args: argparse.Namespace, trees: dict[str, Path]) -> None:
    """The online loop's table: (a) of each tree, (b), (c), (a)/(b)."""
    header = (
        f"{'env':22} {'critic':6} {'seeds':>5} | "
        + " ".join(f"{'(a) ' + name + ', ' + args.loops[name]:>24}" for name in trees)
        + f" | {'(b) ms/upd':>10} {'(c) ms/step':>11} | {'(a)/(b)':>7} {'(b)+(c)':>8}"
    )
    print(header)
    for env in args.envs.split(","):
        for critic in args.critics.split(","):
            for seeds in (int(s) for s in args.seeds.split(",")):
                rates: dict[str, list[float]] = {name: [] for name in trees}
                floors, acting = [], []
                with tempfile.TemporaryDirectory(prefix="online-loop-") as tmp:
                    loop = make_run(env, critic, seeds, Path(tmp) / "run")
                    fill(loop)
                    for _ in range(args.rounds):
                        for name, tree in trees.items():
                            rates[name].append(cli_window(tree, env, critic, seeds, args.window, args.loops[name]))
                        if args.loop == "compiled":
                            floors.append(update_floor(loop, args.window, driver="scan"))
                            acting.append(compiled_acting(env, critic, seeds, args.window))
                        else:
                            floors.append(update_floor(loop, args.window))
                            first = INITIAL + 1 + len(acting) * (args.window + 1)
                            acting.append(acting_alone(loop, first, args.window))
                floor = statistics.median(floors)
                cells = " ".join(f"{statistics.median(r):>20.0f} st/s" for r in rates.values())
                mine = statistics.median(rates["this tree"])
                print(
                    f"{env:22} {critic:6} {seeds:>5} | {cells} | {floor * 1e3:>10.3f} {statistics.median(acting) * 1e3:>11.3f}"
                    f" | {1 / mine / floor:>7.2f} {(floor + statistics.median(acting)) * 1e3:>6.3f}ms",
                    flush=True,
                )


def offline_rows(args: argparse.Namespace, trees: dict[str, Path], pipelines: set[str]) -> None:
    """``collect`` (one seed, against the online update floor) and ``train`` (against its chunk
    runner) for each env and critic; ``train`` reads the dataset ``collect`` wrote."""
    print(
        f"{'pipeline':8} {'env':22} {'critic':6} {'seeds':>5} | {'(a) steps/s':>11} {'(b) ms/upd':>10} | {'(a)/(b)':>7}"
    )
    for env in args.envs.split(","):
        for critic in args.critics.split(","):
            with tempfile.TemporaryDirectory(prefix="offline-loop-") as tmp:
                data_dir = Path(tmp) / "data"
                collected, floors = [], []
                for _ in range(args.rounds):
                    rate, dataset = collect_window(trees["this tree"], env, critic, args.collect_steps, data_dir)
                    collected.append(rate)
                if "collect" in pipelines:
                    loop = make_run(env, critic, 1, Path(tmp) / "run")
                    fill(loop)
                    floors = [update_floor(loop, args.window) for _ in range(args.rounds)]
                    rate, floor = statistics.median(collected), statistics.median(floors)
                    print(
                        f"{'collect':8} {env:22} {critic:6} {1:>5} | {rate:>11.0f} {floor * 1e3:>10.3f} | {1 / rate / floor:>7.2f}"
                    )
                if "train" not in pipelines:
                    continue
                for seeds in (int(s) for s in args.seeds.split(",")):
                    rates, floors = [], []
                    for _ in range(args.rounds):
                        rates.append(train_window(trees["this tree"], dataset, data_dir, critic, seeds, args.window))
                        floors.append(train_floor(dataset, data_dir, critic, seeds, args.window))
                    rate, floor = statistics.median(rates), statistics.median(floors)
                    print(
                        f"{'train':8} {env:22} {critic:6} {seeds:>5} | {rate:>11.0f} {floor * 1e3:>10.3f} | {1 / rate / floor:>7.2f}",
                        flush=True,
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="MinAtar/Breakout-v1,CartPole-v1")
    parser.add_argument("--critics", default="td,gitd")
    parser.add_argument("--seeds", default="1,5")
    parser.add_argument("--window", type=int, default=4_000, help="env steps (or gradient steps) timed per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pipelines", default="online", help="any of online, collect, train (comma-separated)")
    parser.add_argument(
        "--collect-steps", type=int, default=30_000, help="env steps of each collect (3 logging windows)"
    )
    parser.add_argument("--compare-with", type=Path, default=None, help="another checkout's root, for (a) of online")
    parser.add_argument(
        "--loop", choices=("python", "compiled"), default="python", help="this tree's loop for (a), (b) and (c)"
    )
    parser.add_argument("--compare-loop", choices=("python", "compiled"), default="python", help="the compared tree's")
    args = parser.parse_args()
    args.loops = {"this tree": args.loop, "compared": args.compare_loop}
    pipelines = set(args.pipelines.split(","))
    if unknown := pipelines - {"online", "collect", "train"}:
        parser.error(f"unknown pipeline(s): {', '.join(sorted(unknown))}")
    print(f"jax {jax.__version__}, {jax.default_backend()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    trees = {"this tree": ROOT} | ({"compared": args.compare_with.resolve()} if args.compare_with else {})
    if "online" in pipelines:
        online_rows(args, trees)
    if pipelines & {"collect", "train"}:
        offline_rows(args, trees, pipelines)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
