"""Same seed, same result? Exact resume? On whatever backend JAX finds (docs/bounds.md#determinism).

Run by hand, on the machine whose determinism is in question (a GPU, typically):

    .venv/bin/python -m benchmarks.determinism --dataset minari:offline_gitd/minatar-breakout/dqn-replay-1m-v0
    .venv/bin/python -m benchmarks.determinism --dataset ... --flags default,deterministic --critic gitd --K 5

For each set of XLA flags (``default``: none; ``deterministic``: ``--xla_gpu_deterministic_ops=true``
and ``--xla_gpu_exclude_nondeterministic_ops=true``, XLA's options for reproducible GPU programs) it
runs ``offline_gitd train`` three times, each in a process of its own so that the flags apply:

* ``a``: ``--epochs E`` straight;
* ``b``: the same command again, in another run directory (same seed: same result?);
* ``c``: ``--epochs 1``, then ``--resume --epochs E`` (exact resume?).

It compares ``b`` and ``c`` with ``a``: every array of the final checkpoint (parameters, target
networks, optimiser state: the whole training state, bit for bit, and the largest absolute
difference where they differ) and every ``metrics.csv`` value but the epoch's wall time. It prints
each run's wall time and the median epoch time, so that the cost of the deterministic flags can be
read off the same table; run the flag sets on a quiet machine for that. The verdict is printed, never
asserted: with ``--check`` the script exits 1 if any comparison under the ``deterministic`` flags
(or any at all on the CPU, whose backend is deterministic) differs.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FLAG_SETS = {
    "default": "",
    "deterministic": "--xla_gpu_deterministic_ops=true --xla_gpu_exclude_nondeterministic_ops=true",
}
# metrics.csv columns that are not results: the wall time of each epoch
TIMING_COLUMNS = {"epoch_seconds"}

# reads the newest checkpoint of a run directory in a child process (no template needed)
READ_STATE = """
import sys
from pathlib import Path
import numpy as np
import jax
from offline_gitd.rundir.checkpoints import Checkpoints
checkpoints = Checkpoints(Path(sys.argv[1]))
state = checkpoints.restore_as_written(checkpoints.latest())
leaves = jax.tree_util.tree_leaves_with_path(state)
np.savez(sys.argv[2], **{jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in leaves})
"""


def train(args: argparse.Namespace, out: Path, epochs: int, flags: str, resume: bool = False) -> float:
    """One ``offline_gitd train`` process; returns its wall time in seconds."""
    command = [sys.executable, "-m", "offline_gitd.cli", "train", "--out", str(out), "--no-progress"]
    command += ["--epochs", str(epochs)]
    if resume:
        command += ["--resume"]
    else:
        command += ["--dataset", args.dataset, "--critic", args.critic, "--seeds", args.seeds]
        command += ["--steps-per-epoch", str(args.steps_per_epoch), "--eval-episodes", str(args.eval_episodes)]
        command += ["--K", str(args.K)] if args.K else []
        command += ["--fraction", str(args.fraction)] if args.fraction else []
        command += ["--data-dir", args.data_dir] if args.data_dir else []
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"train failed ({out.name}, flags {flags or 'none'}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def final_state(out: Path) -> dict[str, np.ndarray]:
    """Every array of the run's newest checkpoint, by its path in the state tree."""
    target = out / "final_state.npz"
    subprocess.run([sys.executable, "-c", READ_STATE, str(out), str(target)], check=True)
    with np.load(target) as arrays:
        return {key: arrays[key] for key in arrays.files}


def metrics(out: Path) -> list[dict[str, str]]:
    with open(out / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in csv.DictReader(f)]


def epoch_seconds(out: Path) -> float:
    with open(out / "metrics.csv", newline="") as f:
        return statistics.median(float(row["epoch_seconds"]) for row in csv.DictReader(f))


def compare(a: Path, b: Path) -> tuple[bool, str]:
    """(identical?, what differs): the whole final training state bit for bit, then the metrics."""
    state_a, state_b = final_state(a), final_state(b)
    if state_a.keys() != state_b.keys():
        return False, "different state trees"
    differing = [key for key in state_a if not np.array_equal(state_a[key], state_b[key])]
    n_values = sum(x.size for x in state_a.values())
    rows_a, rows_b = metrics(a), metrics(b)
    metric_diff = sum(x != y for ra, rb in zip(rows_a, rows_b, strict=True) for x, y in zip(ra.values(), rb.values()))
    if not differing and not metric_diff:
        return True, f"identical: {len(state_a)} arrays ({n_values:,} values), {len(rows_a)} metrics rows"
    worst = max((float(np.max(np.abs(state_a[k].astype(np.float64) - state_b[k]))) for k in differing), default=0.0)
    return False, (
        f"{len(differing)} of {len(state_a)} arrays differ (largest |diff| {worst:.3g}); "
        f"{metric_diff} metrics values differ"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="a dataset train takes (minari:..., rlu:...)")
    parser.add_argument("--data-dir", default=None, help="the data root (train's --data-dir)")
    parser.add_argument("--critic", default="gitd")
    parser.add_argument("--K", type=int, default=5, help="heads for itd/gitd (0: the critic's default)")
    parser.add_argument("--seeds", default="0-2")
    parser.add_argument("--epochs", type=int, default=2, help="E, at least 2: c stops after the first")
    parser.add_argument("--steps-per-epoch", type=int, default=1000)
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--flags", default="default,deterministic", help=f"flag sets: {', '.join(FLAG_SETS)}")
    parser.add_argument("--work", default=None, help="keep the run directories here (default: a temporary one)")
    parser.add_argument("--check", action="store_true", help="exit 1 where the verdict says results differ")
    args = parser.parse_args(argv)
    if args.epochs < 2:
        parser.error("--epochs must be at least 2")
    unknown = set(args.flags.split(",")) - FLAG_SETS.keys()
    if unknown:
        parser.error(f"unknown flag set(s) {sorted(unknown)}; choose from {sorted(FLAG_SETS)}")
    import jax

    backend = jax.default_backend()
    print(f"backend {backend}, devices {jax.devices()}, jax {jax.__version__}")
    print(f"train {args.dataset} --critic {args.critic} --K {args.K} --seeds {args.seeds} --epochs {args.epochs} "
          f"--steps-per-epoch {args.steps_per_epoch}")  # fmt: skip
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="determinism-"))
    failed = False
    try:
        for name in args.flags.split(","):
            flags = FLAG_SETS[name]
            base = work / name
            shutil.rmtree(base, ignore_errors=True)
            a, b, c = base / "a", base / "b", base / "c"
            seconds = {"a": train(args, a, args.epochs, flags), "b": train(args, b, args.epochs, flags)}
            seconds["c"] = train(args, c, 1, flags) + train(args, c, args.epochs, flags, resume=True)
            same_seed, same_text = compare(a, b)
            resumed, resumed_text = compare(a, c)
            print(f"\nflags {name}: {flags or '(none)'}")
            print("  wall s: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
            print(f"  median epoch s: a {epoch_seconds(a):.2f}, b {epoch_seconds(b):.2f}")
            print(f"  same seed twice (a, b): {same_text}")
            print(f"  stop after epoch 1 and resume (a, c): {resumed_text}")
            if (name == "deterministic" or backend == "cpu") and not (same_seed and resumed):
                failed = True
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
