"""The paper's offline Gym ablation, full protocol (docs/reproducing.md#offline-gym-ablation-lunarlander-mountaincar): the sweep
``sweeps/gym_offline.toml`` on Ray, then the report of the paper's claims.

Run by hand; the sweep is resumable, so an interrupted benchmark continues where it stopped:

    .venv/bin/python benchmarks/gym_offline.py --out runs/gym_offline             # sweep + report
    .venv/bin/python benchmarks/gym_offline.py --out runs/gym_offline --report    # tables only
    .venv/bin/python benchmarks/gym_offline.py --out runs/gym_offline --address HEAD:6379  # on a cluster

This is ``offline_gitd sweep sweeps/gym_offline.toml --out OUT`` (the spec holds the protocol:
datasets, CQL settings, the 64 configurations, 10 seeds each) followed by the report: per (data
fraction, T) setting, every method's IQM AUC relative to CQL's with its 95% CI, from which the
paper's three claims read off directly: Gi-CQL above 1; beta = 1 above beta = 0.01; K = 50 costing
i-CQL more than Gi-CQL. ``--envs`` restricts the report to one env's runs.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass
from pathlib import Path

SPEC = Path(__file__).resolve().parent.parent / "sweeps" / "gym_offline.toml"
ENVS = ("LunarLander-v3", "MountainCar-v0")
FRACTIONS = (0.1, 1.0)
PERIODS = (10, 1000)


@dataclass(frozen=True)
class RunSpec:
    """One configuration of the ablation, read back from the sweep's run plan."""

    name: str  # the run directory's name under OUT/runs
    env: str
    critic: str
    K: int
    beta: float
    T: int
    fraction: float

    @property
    def setting(self) -> str:
        return f"data{int(self.fraction * 100)}-T{self.T}"


def env_suffix(envs: tuple[str, ...]) -> str:
    """File-name tag of an env subset ("" for the full protocol): boards of a subset never
    overwrite the full protocol's."""
    return "" if set(envs) == set(ENVS) else "-" + "-".join(env.split("-")[0].lower() for env in envs)


def protocol_grid(envs: tuple[str, ...] = ENVS, spec_path: Path = SPEC) -> list[RunSpec]:
    """Every configuration of the spec's grid (64 for both envs), restricted to ``envs``."""
    from offline_gitd.sweeps.spec import expand, load_spec

    names = {env.split("-")[0].lower(): env for env in ENVS}
    grid = []
    for plan in expand(load_spec(spec_path)):
        fields = plan.fields
        env = names[fields["dataset"].split("/")[1]]  # minari:offline_gitd/<env>/dqn-...
        if env in envs:
            grid.append(
                RunSpec(plan.name, env, fields["critic"], fields["K"], fields["beta"], fields["T"], fields["fraction"])
            )
    return grid


def run_sweep(args: argparse.Namespace) -> int:
    import dataclasses

    from offline_gitd.sweeps.runner import SweepOptions
    from offline_gitd.sweeps.runner import run_sweep as run
    from offline_gitd.sweeps.spec import load_spec

    spec = load_spec(SPEC)
    if args.data_dir:
        spec = dataclasses.replace(spec, data_dir=args.data_dir)
    return run(spec, SweepOptions(out=args.out, address=args.address, max_parallel=args.max_parallel))


# Report columns: (heading, method key on a setting's board). Every cell is that method's IQM AUC
# relative to CQL's (1 = CQL, higher = better) with its 95% CI, so two cells of a row compare
# directly; ratios of these relative numbers would mean nothing where CQL's AUC is negative.
COLUMNS = (
    ("Gi-CQL", "cql:gitd:K=5,beta=1"),
    ("Gi-CQL beta 0.01", "cql:gitd:K=5,beta=0.01"),
    ("TDRC-CQL", "cql:tdrc:K=1,beta=1"),
    ("TDRC-CQL beta 0.01", "cql:tdrc:K=1,beta=0.01"),
    ("i-CQL", "cql:itd:K=5,beta=1"),
    ("i-CQL K 50", "cql:itd:K=50,beta=1"),
    ("Gi-CQL K 50", "cql:gitd:K=50,beta=1"),
)


def report(args: argparse.Namespace, grid: list[RunSpec]) -> str:
    """Per setting: a board, its summaries, and every method's IQM AUC relative to CQL as a
    markdown table (the paper's claims read across a row: Gi-CQL above 1; beta 1 above beta
    0.01; K = 50 costing i-CQL more than Gi-CQL)."""
    from offline_gitd.leaderboard.report import analyse
    from offline_gitd.leaderboard.submit import submit

    lines = [
        "| data | T | " + " | ".join(heading for heading, _ in COLUMNS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in COLUMNS) + " |",
    ]
    for fraction, T in itertools.product(FRACTIONS, PERIODS):
        specs = [s for s in grid if s.fraction == fraction and s.T == T]
        run_dirs = [args.out / "runs" / s.name for s in specs if (args.out / "runs" / s.name / "results.csv").exists()]
        # The report's own boards (the sweep's boards pool both envs; a report may ask for one).
        if len(run_dirs) < len(specs):
            lines.append(f"| {fraction:.0%} | {T} | incomplete: {len(run_dirs)}/{len(specs)} runs |")
            continue
        board = args.out / "report" / f"board-{specs[0].setting}{env_suffix(args.envs)}.csv"
        board.parent.mkdir(parents=True, exist_ok=True)
        board.unlink(missing_ok=True)
        submit(run_dirs, board, allow_new_env=True)
        analysis = analyse(board, "cql:td", "baseline", args.reps, seed=0)
        auc = {summary.method: summary.auc for summary in analysis.summaries}
        cells = [
            f"{auc[key].value:.2f} [{auc[key].low:.2f}, {auc[key].high:.2f}]" if key in auc else "n/a"
            for _, key in COLUMNS
        ]
        lines.append(f"| {fraction:.0%} | {T} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/gym_offline"), help="the sweep's folder")
    parser.add_argument("--data-dir", default=None, help="data root for the datasets (default: the package's)")
    parser.add_argument("--address", default=None, help="Ray cluster HOST:PORT (default: embedded local Ray)")
    parser.add_argument("--max-parallel", type=int, default=None, help="at most N runs at a time")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    parser.add_argument("--report", action="store_true", help="only build the boards and print the table")
    parser.add_argument(
        "--envs", default=",".join(ENVS), help="comma-separated subset of the envs to report (default: both)"
    )
    args = parser.parse_args()
    args.envs = tuple(args.envs.split(","))
    unknown = set(args.envs) - set(ENVS)
    if unknown:
        parser.error(f"unknown env(s) {', '.join(sorted(unknown))}; choose from {', '.join(ENVS)}")
    if not args.report and run_sweep(args) != 0:
        print("some runs failed (above); the report covers the finished settings only")
    table = report(args, protocol_grid(args.envs))
    suffix = env_suffix(args.envs)
    (args.out / f"claims{suffix}.md").write_text(table + "\n")
    print(table)
    print(f"report boards in {args.out / 'report'}, claims{suffix}.md in {args.out}")


if __name__ == "__main__":
    main()
