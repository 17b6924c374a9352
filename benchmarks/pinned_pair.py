"""Two sweep runs side by side, pinned to a core each or not, against one after the other
(docs/sweeps.md#runs-pinned-to-cores).

Run by hand (speed is never asserted by a test):

    .venv/bin/python -m benchmarks.pinned_pair                    # 2 MinAtar Breakout DQN runs, 40,000 steps
    .venv/bin/python -m benchmarks.pinned_pair --steps 10000 --rounds 1   # a quick look

Each arm is ``offline_gitd sweep`` on a two-run spec (the MinAtar online grid's settings: 5
vmapped seeds, one update every 4 env steps, the compiled loop), run as a user runs it:

* ``pinned``: ``--max-parallel 2``, each run on a core of its own (the default);
* ``unpinned``: ``--max-parallel 2 --no-pin``, the operating system places both runs' threads;
* ``in turn``: ``--max-parallel 1 --no-pin``, one run at a time with every core.

The figure is the arm's span, from the first run's start to the last run's end as the runs' state
files record them (Ray's start is outside it, the same in every arm). Arms are interleaved in
rounds (harness.interleaved) and the median per arm is printed with the ratios to ``pinned``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from benchmarks.harness import interleaved, load, median_best, medians

SPEC = """command = "online dqn"
board = "board.csv"

[resources]
cpus = 1
gpus = 0
retries = 0

[fixed]
env = "{env}"
critic = "td"
steps = {steps}
loop = "compiled"
utd = "1/4"
log_every = {log_every}

[grid]
seeds = ["0-4", "5-9"]
"""

ARMS = {
    "pinned": ["--max-parallel", "2"],
    "unpinned": ["--max-parallel", "2", "--no-pin"],
    "in turn": ["--max-parallel", "1", "--no-pin"],
}


def span(out: Path) -> float:
    """Seconds from the first run's start to the last run's end, from the sweep's state files."""
    states = [json.loads(path.read_text()) for path in (out / "state").glob("*.json")]
    if len(states) != 2 or any(state.get("status") != "done" for state in states):
        raise RuntimeError(f"the sweep in {out} did not finish both runs: {states}")
    start = min(datetime.fromisoformat(state["started_at"]) for state in states)
    end = max(datetime.fromisoformat(state["finished_at"]) for state in states)
    return (end - start).total_seconds()


def arm_timer(spec: Path, workdir: Path, flags: list[str]):
    count = 0

    def timer() -> float:
        nonlocal count
        count += 1
        out = workdir / f"{'-'.join(flags)}-{count}".replace("--", "")
        subprocess.run(
            [sys.executable, "-m", "offline_gitd.cli", "sweep", str(spec), "--out", str(out), *flags],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return span(out)

    return timer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="MinAtar/Breakout-v1")
    parser.add_argument("--steps", type=int, default=40_000, help="env steps per run (default 40,000)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pinned-pair-") as tmp:
        workdir = Path(tmp)
        spec = workdir / "pair.toml"
        spec.write_text(SPEC.format(env=args.env, steps=args.steps, log_every=min(10_000, args.steps)))
        print(f"load {load()}; {args.env}, 2 runs x 5 seeds x {args.steps:,} env steps, {args.rounds} rounds")
        times = interleaved({arm: arm_timer(spec, workdir, flags) for arm, flags in ARMS.items()}, args.rounds)
    middle = medians(times)
    for arm, values in times.items():
        print(f"{arm:<9} {median_best(values, 1)} s   x{middle[arm] / middle['pinned']:.2f} of pinned")
    print(f"load {load()}")


if __name__ == "__main__":
    main()
