"""Does a long online run stay flat? Memory (RSS) and step time along an online DQN run
(docs/benchmarks.md#long-runs).

    .venv/bin/python -m benchmarks.long_run                                # 1,000,000 steps, CartPole-v1
    .venv/bin/python -m benchmarks.long_run --env MinAtar/Breakout-v1
    .venv/bin/python -m benchmarks.long_run --steps 30000 --samples 10     # a few minutes

Runs the real online loop (:class:`~offline_gitd.online.loop.OnlineRun`: acting, updates, logging,
checkpoints every ``--checkpoint-every`` steps with their host state) with the env's own table
(docs/online.md#defaults-and-choices), one seed, and watches it from a wrapper around the training
env, which sees every env step and changes nothing. At ``--samples`` points it records:

* the process's RSS (psutil where installed, else ``VmRSS`` of /proc/self/status);
* the replay's own size (:attr:`~offline_gitd.data.replay.Replay.nbytes`: the store, allocated by
  doubling, and the priorities): the replay keeps every row (docs/online.md#resume), so it grows
  with the run by design;
* RSS minus the replay: what must stay flat;
* the window's env steps per second (everything included: checkpoints too) and the median and
  maximum wall time of one env step (its updates included), the median being blind to checkpoints.

The verdict reads only the windows that learn (after the initial random steps), less the first of
them (it compiles the update), and compares them: growth of RSS beyond the replay's own growth from the second sample to the last, and the
median step time of the second half's windows against the first half's. With
``--check`` the script exits 1 when either is over its limit. A shared machine's load moves the
times (not the memory): rerun before reading a slowdown into one window.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

MIB = 2**20
# Limits of --check: memory beyond the replay's growth, and the median step time's ratio.
MAX_OTHER_GROWTH_MIB = 64.0
MAX_SLOWDOWN = 1.25


def rss_bytes() -> int:
    """Resident set size of this process: psutil if installed, else /proc/self/status."""
    try:
        import psutil
    except ImportError:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no psutil and no VmRSS in /proc/self/status: cannot read the RSS") from None
    return int(psutil.Process().memory_info().rss)


class Watch(gym.Wrapper):
    """Times every env step and samples memory at the given steps; the env itself is untouched."""

    def __init__(self, env: gym.Env, every: int, replay_bytes: Any) -> None:
        super().__init__(env)
        self.every, self.replay_bytes = every, replay_bytes
        self.step_count = 0
        self.last = self.window_start = time.perf_counter()
        self.durations: list[float] = []
        self.rows: list[dict[str, float]] = []

    def step(self, action: Any) -> Any:
        now = time.perf_counter()
        if self.step_count:  # from the previous step's start: its updates and logging included
            self.durations.append(now - self.last)
        self.last = now
        self.step_count += 1
        if self.step_count % self.every == 0:
            self.sample(now)
        return self.env.step(action)

    def sample(self, now: float) -> None:
        replay = self.replay_bytes()
        rss = rss_bytes()
        self.rows.append(
            {
                "step": self.step_count,
                "steps_per_s": len(self.durations) / max(now - self.window_start, 1e-9),
                "median_ms": 1000 * statistics.median(self.durations) if self.durations else float("nan"),
                "max_ms": 1000 * max(self.durations, default=float("nan")),
                "rss_mib": rss / MIB,
                "replay_mib": replay / MIB,
                "other_mib": (rss - replay) / MIB,
            }
        )
        self.durations, self.window_start = [], now
        row = self.rows[-1]
        print(
            f"step {self.step_count:,}: {row['steps_per_s']:.0f} steps/s, RSS {row['rss_mib']:.0f} MiB "
            f"(replay {row['replay_mib']:.1f} MiB)",
            file=sys.stderr,
            flush=True,
        )


def run(
    env_id: str, steps: int, samples: int, out: Path, critic: str, checkpoint_every: int | None, log_every: int | None
) -> tuple[list[dict], int, int]:
    """One online DQN run of ``steps`` env steps under a :class:`Watch`: its samples, the initial
    random steps and the steps per sample."""
    from offline_gitd.online.config import OnlineConfig
    from offline_gitd.online.lifecycle import online_lifecycle
    from offline_gitd.online.loop import OnlineRun
    from offline_gitd.online.train import build_family, resolve_config

    cfg, info = resolve_config(
        OnlineConfig(
            algo="dqn", env=env_id, critic=critic, steps=steps, seeds="0", out=str(out),
            checkpoint_every=checkpoint_every, log_every=log_every,
        )
    )  # fmt: skip
    if steps % cfg.log_every:
        sys.exit(f"--steps must be a multiple of the env's log window ({cfg.log_every} steps)")
    family = build_family(cfg, info)
    lifecycle = online_lifecycle(cfg, info)  # a new run directory, as `offline_gitd online` opens one
    watches: list[Watch] = []
    holder: dict[str, OnlineRun] = {}

    def replay_bytes() -> int:
        return sum(slot.replay.nbytes for slot in holder["run"].slots)

    def wrap(env: gym.Env) -> gym.Env:
        watches.append(Watch(env, max(1, steps // samples), replay_bytes))
        return watches[-1]

    holder["run"] = online = OnlineRun(cfg, info, family, out, False, wrap, lifecycle)
    print(
        f"online dqn {env_id} ({critic}): {steps} steps, replay window {cfg.replay_size} rows, "
        f"{cfg.initial_samples} initial random steps, utd {cfg.utd}, checkpoint every {cfg.checkpoint_every} steps",
        flush=True,
    )
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):  # the loop's own window lines
        online.train()
    for slot in online.slots:
        slot.env.close()
    (watch,) = watches
    return watch.rows, cfg.initial_samples, watch.every


def report(rows: list[dict], initial_samples: int, every: int, check: bool) -> int:
    """The table, then the verdict on the windows that learn, less the first (it compiles)."""
    print("| env steps | steps/s | median step ms | max step ms | RSS MiB | replay MiB | RSS - replay MiB |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['step']:,} | {r['steps_per_s']:.0f} | {r['median_ms']:.2f} | {r['max_ms']:.0f} | "
            f"{r['rss_mib']:.0f} | {r['replay_mib']:.1f} | {r['other_mib']:.0f} |"
        )
    steady = [r for r in rows if r["step"] - every >= initial_samples][1:]
    if len(steady) < 2:
        print("too few windows after the initial random steps for a verdict: more --steps or --samples")
        return 0
    half = len(steady) // 2
    first, last = steady[0], steady[-1]
    growth = last["other_mib"] - first["other_mib"]
    # Medians of the windows' median step times, first half against second half: one window
    # slowed by the shared machine's load does not decide it.
    early = statistics.median(r["median_ms"] for r in steady[:half])
    late = statistics.median(r["median_ms"] for r in steady[half:])
    slowdown = late / early
    print(
        f"from step {first['step']:,} to {last['step']:,}: RSS {last['rss_mib'] - first['rss_mib']:+.0f} MiB, "
        f"of which the replay {last['replay_mib'] - first['replay_mib']:+.1f} MiB and the rest {growth:+.0f} MiB "
        f"(limit {MAX_OTHER_GROWTH_MIB:.0f}); median step time {early:.2f} ms in the first half, {late:.2f} ms "
        f"in the second: x{slowdown:.2f} (limit x{MAX_SLOWDOWN})"
    )
    flat = growth <= MAX_OTHER_GROWTH_MIB and slowdown <= MAX_SLOWDOWN
    print("flat" if flat else "NOT flat")
    return 1 if check and not flat else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1", help="CartPole-v1 or MinAtar/Breakout-v1 (any DQN env)")
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps (default 1,000,000)")
    parser.add_argument("--samples", type=int, default=20, help="points at which memory and speed are sampled")
    parser.add_argument("--critic", default="td", help="td, tdrc, itd or gitd (default td: DQN)")
    parser.add_argument(
        "--checkpoint-every", type=int, default=None, help="env steps between checkpoints (default: the env's)"
    )
    parser.add_argument("--log-every", type=int, default=None, help="env steps between log rows (default: the env's)")
    parser.add_argument("--out", default=None, help="keep the run directory here (default: a temporary one)")
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 unless flat: RSS beyond the replay grows by at most {MAX_OTHER_GROWTH_MIB:.0f} MiB and the "
        f"median step time by at most x{MAX_SLOWDOWN}",
    )
    args = parser.parse_args(argv)
    from offline_gitd.errors import UsageError

    started = time.perf_counter()
    options = (args.env, args.steps, args.samples)
    every = (args.critic, args.checkpoint_every, args.log_every)
    try:
        if args.out:
            rows, initial, per_sample = run(*options, Path(args.out), *every)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                rows, initial, per_sample = run(*options, Path(tmp) / "run", *every)
    except UsageError as err:
        sys.exit(f"long_run.py: error: {err}")
    print(f"wall time {time.perf_counter() - started:.0f}s; RSS read with {rss_source()}")
    return report(rows, initial, per_sample, args.check)


def rss_source() -> str:
    try:
        import psutil  # noqa: F401
    except ImportError:
        return "/proc/self/status"
    return "psutil"


if __name__ == "__main__":
    sys.exit(main())
