"""What progress lines and TensorBoard logging add to a run's wall time (README, "Watching a run").

    .venv/bin/python benchmarks/logging_overhead.py --repeats 3

Runs the same small online DQN run (CartPole-v1, 5,000 env steps, a row every 500) through the CLI
in a subprocess per variant, interleaving the variants so that machine load hits them alike, and
prints the median wall time of each:

- ``quiet``: ``--no-progress --no-tensorboard`` (summary lines only);
- ``progress``: plain progress lines (stdout is a pipe, as in a cluster job's log);
- ``progress+tb``: the default, progress lines and TensorBoard events.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN = [
    "online", "dqn", "--env", "CartPole-v1", "--critic", "gitd", "--K", "3", "--steps", "5000",
    "--log-every", "500", "--checkpoint-every", "5000", "--seeds", "0-1",
]  # fmt: skip
VARIANTS = {
    "quiet": ["--no-progress", "--no-tensorboard"],
    "progress": ["--no-tensorboard"],
    "progress+tb": [],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    lines: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name, flags in VARIANTS.items():
                out = Path(tmp) / f"{name}-{repeat}"
                started = time.perf_counter()
                result = subprocess.run(
                    [sys.executable, "-m", "offline_gitd.cli", *RUN, *flags, "--out", str(out)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                times[name].append(time.perf_counter() - started)
                lines[name] = result.stdout.count("\n")
                print(f"{name} #{repeat}: {times[name][-1]:.1f}s", flush=True)
    quiet = statistics.median(times["quiet"])
    print("| variant | median wall time | vs quiet | stdout lines |")
    print("| --- | --- | --- | --- |")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.1f} s | {100 * (median / quiet - 1):+.1f}% | {lines[name]} |")


if __name__ == "__main__":
    main()
