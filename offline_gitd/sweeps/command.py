"""``offline_gitd sweep``: a grid of runs from a TOML spec, on Ray or SLURM (docs/sweeps.md)."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

SLURM_TIME = re.compile(r"(\d+-)?\d+(:\d\d){0,2}")

EXAMPLES = """examples:
  offline_gitd sweep sweeps/demo.toml --out runs/demo-sweep --dry-run     (the table of runs, nothing run)
  offline_gitd sweep sweeps/demo.toml --out runs/demo-sweep               (an embedded local Ray instance)
  offline_gitd sweep sweeps/atari_offline.toml --out /shared/runs/atari --address 10.0.0.1:6379
  offline_gitd sweep sweeps/demo.toml --out runs/demo-sweep               (again: continues where it stopped)
  offline_gitd sweep sweeps/demo.toml --out runs/demo-sweep --backend processes   (no Ray: child processes)
  offline_gitd sweep sweeps/demo.toml --out /shared/demo --backend slurm --partition cpu --time 01:00:00
  offline_gitd sweep sweeps/demo.toml --out /shared/demo --backend slurm --dry-run   (the job scripts)
  offline_gitd sweep sweeps/demo.toml --out runs/demo-sweep --status --watch  (follow a sweep driven elsewhere)
  offline_gitd sweep sweeps/minatar_offline.toml --board leaderboards/minatar_offline/board.csv
      (the committed board: runs whose rows are all on it are skipped, on any machine)
  offline_gitd sweep sweeps/minatar_offline.toml --only game=breakout   (one game's dataset and runs)

A spec (see sweeps/*.toml) names the command (train, online dqn, online sac), [fixed] fields, a [grid]
of fields whose lists are crossed, the board, [resources] per run, and for train [[collect]] datasets.
Runs go to OUT/runs/NAME (named from the grid's varying fields), their output to OUT/logs/NAME.log,
and every finished run is submitted once to the board (OUT/leaderboard.csv unless the spec or --board
says). A run whose rows are all on its board (found by its config hash) is skipped even where its run
directory is gone, and a [[collect]] dataset is recorded only when a run that trains on it is to run.
Each dataset's and each run's wall time is printed and appended to timings.csv beside the board.
With --backend slurm each run is an element of an sbatch job array (docs/sweeps-slurm.md): the driver
may exit; running it again submits only what is neither done nor queued and collects what finished.
A sweep has one driver: a second one on the same --out is refused and names the first.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run a grid of train / online runs from a TOML spec, locally, on a Ray cluster or on SLURM",
        description=(
            "Expand a sweep spec into runs, skip the complete ones, resume the interrupted ones from their "
            "checkpoints, schedule the rest as Ray tasks (an embedded local Ray instance, or the cluster at "
            "--address) or as SLURM jobs (--backend slurm), and submit every finished run to the sweep's board exactly once. A failed run is "
            "reported with its run directory and the last line of its error and does not stop the others. "
            "Re-running the same command after a crash or Ctrl-C continues the sweep."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("spec", metavar="SPEC.toml", type=Path, help="the sweep spec")
    parser.add_argument(
        "--out", type=Path, default=None, help="sweep folder: runs/, logs/, state/, the board (default: runs/SPEC_NAME)"
    )
    parser.add_argument(
        "--address",
        default=None,
        help="join the Ray cluster at HOST:PORT (its head's address; 'auto' finds a local one); "
        "default: start an embedded local Ray instance",
    )
    parser.add_argument(
        "--max-parallel", type=int, default=None, help="at most N runs at a time (default: as resources allow)"
    )
    parser.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="let the operating system place runs on cores (default with the ray and processes backends: each run on "
        "[resources] cpus cores of its own, claimed per machine; two MinAtar runs on 2 cores ran 1.2x faster "
        "pinned, docs/sweeps.md#runs-pinned-to-cores)",
    )
    parser.add_argument(
        "--backend",
        choices=("ray", "processes", "slurm"),
        default="ray",
        help="ray (default): Ray tasks; processes: child processes of this one, no Ray (a machine without it, "
        "docs/sweeps.md#without-ray); slurm: one sbatch job array element per run",
    )
    slurm = parser.add_argument_group("SLURM (--backend slurm)")
    slurm.add_argument("--partition", default=None, help="the partition the jobs run in (default: the cluster's)")
    slurm.add_argument("--time", default=None, help="each job's time limit, HH:MM:SS or D-HH:MM:SS")
    slurm.add_argument(
        "--slurm-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other sbatch option for every job, without its --, e.g. account=rl or qos=low (repeatable)",
    )
    slurm.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="submit and exit; run the same command later to put finished runs on the board",
    )
    parser.add_argument(
        "--data-dir", default=None, help="data root for train and collect runs (overrides the spec's data_dir)"
    )
    parser.add_argument(
        "--board",
        type=Path,
        default=None,
        metavar="BOARD.csv",
        help="the board, from the current directory (overrides the spec's board, which is under --out); "
        "{field} placeholders as in the spec. Point it at a committed board to continue a sweep elsewhere",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the table of runs and their commands; run nothing"
    )
    parser.add_argument(
        "--status",
        action="store_true",
        help="print the state of the sweep in --out (its driver, each run) and exit; reads only, locks "
        "nothing: the way to look at a sweep another process is driving",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="AXIS=VALUE",
        help="only the runs of this grid entry (its name or value), e.g. game=breakout; repeatable, one per "
        "axis. Only the datasets those runs train on are recorded; run names stay those of the whole grid",
    )
    parser.add_argument(
        "--seeds-per-run",
        type=int,
        default=None,
        metavar="N",
        help="split each run's seeds into runs of N (overrides [resources] seeds_per_run; 0: one vmapped run). "
        "A seed's rows are the same in either split and the board skips a run whose seeds it holds, so a "
        "long cell can be finished on several cores: its runs are named NAME_seeds-0,1,2 and do not resume "
        "an unsplit run's checkpoints (docs/sweeps.md#seeds-over-several-runs)",
    )
    parser.add_argument("--watch", action="store_true", help="with --status: print it again at each change")
    parser.add_argument(
        "--record-missing",
        action="store_true",
        help="record a [[collect]] dataset that a dataset manifest lists when no mirror gives it (default: such a "
        "dataset is fetched from its manifest's mirrors, and the sweep fails when none does: a recording takes "
        "about 50 minutes a MinAtar game on 2 cores and differs across CPUs). Datasets no manifest lists are "
        "recorded as always",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from offline_gitd.errors import UsageError
    from offline_gitd.output_paths import require_dir_if_present, require_dir_target
    from offline_gitd.sweeps.core import plan_table
    from offline_gitd.sweeps.runner import SweepOptions, run_sweep
    from offline_gitd.sweeps.spec import expand, load_spec
    from offline_gitd.sweeps.state import SweepPaths

    if args.max_parallel is not None and args.max_parallel < 1:
        raise UsageError(f"--max-parallel must be >= 1, got {args.max_parallel}")
    slurm_flags = [flag for flag, value in (("--partition", args.partition), ("--time", args.time)) if value]
    slurm_flags += ["--slurm-option"] * bool(args.slurm_option) + ["--no-wait"] * (not args.wait)
    if args.backend != "slurm" and slurm_flags:
        raise UsageError(f"{slurm_flags[0]} is an option of --backend slurm")
    if args.backend == "slurm" and not args.pin:
        raise UsageError(
            "--no-pin is an option of --backend ray and processes; SLURM places a job's cores itself (--cpus-per-task)"
        )
    if args.backend != "ray" and args.address:
        raise UsageError(f"--address joins a Ray cluster; --backend {args.backend} does not use Ray")
    if args.time and not SLURM_TIME.fullmatch(args.time):
        raise UsageError(f"--time must be HH:MM:SS, MM:SS, MINUTES or D-HH:MM:SS, got {args.time!r}")
    if args.out is not None:
        require_dir_target(args.out, "--out")
    if args.data_dir:
        require_dir_if_present(args.data_dir, "--data-dir")
    spec = load_spec(args.spec)
    if args.data_dir:
        spec = dataclasses.replace(spec, data_dir=args.data_dir)
    if args.record_missing:
        spec = dataclasses.replace(spec, record_missing=True)
    if args.board is not None:
        from offline_gitd.sweeps.spec import with_board

        spec = with_board(spec, args.board)
    if args.seeds_per_run is not None:
        from offline_gitd.sweeps.spec import with_seeds_per_run

        spec = with_seeds_per_run(spec, args.seeds_per_run)
    if args.only:
        from offline_gitd.sweeps.spec import with_only

        spec = with_only(spec, args.only)
    out = args.out or Path("runs") / args.spec.stem
    if args.status:
        from offline_gitd.sweeps.watch import show_status

        return show_status(out, args.watch)
    from offline_gitd.sweeps.driver_lock import sole_driver

    if args.backend == "slurm":
        from offline_gitd.sweeps.slurm import SlurmOptions, dry_run, run_slurm

        options = SlurmOptions(
            out=out,
            partition=args.partition,
            time=args.time,
            options=tuple(args.slurm_option),
            max_parallel=args.max_parallel,
            wait=args.wait,
        )
        if args.dry_run:
            dry_run(spec, options)
            print(f"{len(expand(spec))} runs; nothing was submitted (--dry-run)")
            return 0
        with sole_driver(args.spec, out):  # one driver per --out (docs/locks.md)
            return run_slurm(spec, options)
    if args.dry_run:
        plans = expand(spec)
        print(plan_table(spec, plans, SweepPaths(out.absolute())))
        print(f"{len(plans)} runs; nothing was run (--dry-run)")
        return 0
    with sole_driver(args.spec, out):  # one driver per --out (docs/locks.md)
        options = SweepOptions(
            out=out, address=args.address, max_parallel=args.max_parallel, backend=args.backend, pin=args.pin
        )
        return run_sweep(spec, options)
