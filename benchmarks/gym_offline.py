"""The paper's offline Gym ablation, full protocol (REFERENCE "Offline Gym ablation").

Run by hand; every run is resumable, so an interrupted benchmark continues where it stopped:

    .venv/bin/python benchmarks/gym_offline.py --out runs/gym_offline             # everything
    .venv/bin/python benchmarks/gym_offline.py --out runs/gym_offline --report    # tables only

Protocol: LunarLander-v3 (horizon 500) and MountainCar-v0 (horizon 200) datasets collected by DQN
(the Gym data-collection table, ``offline_gitd collect``); CQL (alpha 0.1, lr 5e-4, Adam eps 1e-8,
batch 32, torso FC 50 - FC 50, 10,000 gradient steps per epoch) with 10 seeds in one program per
configuration, over

* main grid: critics td, tdrc, itd, gitd (K = 5, beta = 1) x T in {10, 1000} x data in {10%, 100%};
* beta ablation: tdrc and gitd with beta = 0.01 on the same T x data grid;
* K ablation: itd and gitd with K = 50 on the same grid.

One leaderboard per (data fraction, T) setting, since the board's method key is (algorithm,
critic, K, beta). The report prints, per setting, every method's IQM AUC relative to CQL's with its
95% CI, from which the paper's three claims read off directly: Gi-CQL above 1; beta = 1 above
beta = 0.01; K = 50 costing i-CQL more than Gi-CQL.
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass
from pathlib import Path

ENVS = ("LunarLander-v3", "MountainCar-v0")
FRACTIONS = (0.1, 1.0)
PERIODS = (10, 1000)


@dataclass(frozen=True)
class RunSpec:
    env: str
    critic: str
    K: int
    beta: float
    T: int
    fraction: float

    @property
    def setting(self) -> str:
        return f"data{int(self.fraction * 100)}-T{self.T}"

    @property
    def name(self) -> str:
        return f"{self.env}-{self.critic}-K{self.K}-beta{self.beta:g}-{self.setting}"


def env_suffix(envs: tuple[str, ...]) -> str:
    """File-name tag of an env subset ("" for the full protocol): boards of a subset never
    overwrite the full protocol's."""
    return "" if set(envs) == set(ENVS) else "-" + "-".join(env.split("-")[0].lower() for env in envs)


def protocol_grid(envs: tuple[str, ...] = ENVS) -> list[RunSpec]:
    """Every configuration of the ablation (64 for both envs)."""
    methods = [("td", 1, 1.0), ("tdrc", 1, 1.0), ("itd", 5, 1.0), ("gitd", 5, 1.0)]
    methods += [("tdrc", 1, 0.01), ("gitd", 5, 0.01)]  # beta ablation
    methods += [("itd", 50, 1.0), ("gitd", 50, 1.0)]  # K ablation
    return [
        RunSpec(env, critic, K, beta, T, fraction)
        for env, (critic, K, beta), T, fraction in itertools.product(envs, methods, PERIODS, FRACTIONS)
    ]


def collect_datasets(args: argparse.Namespace) -> dict[str, str]:
    import minari

    from offline_gitd.data.paths import use_minari_root
    from offline_gitd.demo import dataset_id
    from offline_gitd.online.collect import CollectRequest, collect

    use_minari_root(args.data_dir)
    ids = {}
    for env in args.envs:
        ids[env] = dataset_id(env, args.collect_steps)
        if ids[env] not in minari.list_local_datasets():
            print(f"collecting {args.collect_steps} steps of {env} with DQN -> {ids[env]}", flush=True)
            collect(CollectRequest(env, args.collect_steps, ids[env], policy="dqn", data_dir=args.data_dir))
    return ids


def train_all(args: argparse.Namespace, datasets: dict[str, str], grid: list[RunSpec]) -> None:
    from offline_gitd.learners.config import OfflineConfig
    from offline_gitd.learners.offline import train

    started = time.perf_counter()
    for i, spec in enumerate(grid, start=1):
        run_dir = args.out / "runs" / spec.name
        cfg = OfflineConfig(
            dataset=f"minari:{datasets[spec.env]}",
            out=str(run_dir),
            critic=spec.critic,
            K=spec.K,
            beta=spec.beta,
            T=spec.T,
            fraction=spec.fraction,
            seeds=args.seeds,
            epochs=args.epochs,
            data_dir=args.data_dir,
            steps_per_epoch=args.steps_per_epoch,
        )
        resume = (run_dir / "config.json").exists()
        print(f"[{time.perf_counter() - started:7.0f}s] {i}/{len(grid)} {spec.name}", flush=True)
        train(cfg, resume=resume, progress=not args.no_progress)


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
        if len(run_dirs) < len(specs):
            lines.append(f"| {fraction:.0%} | {T} | incomplete: {len(run_dirs)}/{len(specs)} runs |")
            continue
        board = args.out / f"board-{specs[0].setting}{env_suffix(args.envs)}.csv"
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
    parser.add_argument("--out", type=Path, default=Path("runs/gym_offline"))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--collect-steps", type=int, default=100_000, help="DQN steps recorded per env")
    parser.add_argument("--epochs", type=int, default=10, help="epochs of 10,000 gradient steps")
    parser.add_argument("--steps-per-epoch", type=int, default=None, help="protocol: 10,000 (smoke runs: fewer)")
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    parser.add_argument("--report", action="store_true", help="only build the boards and print the table")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--envs", default=",".join(ENVS), help="comma-separated subset of the envs (default: both, the protocol)"
    )
    args = parser.parse_args()
    args.envs = tuple(args.envs.split(","))
    unknown = set(args.envs) - set(ENVS)
    if unknown:
        parser.error(f"unknown env(s) {', '.join(sorted(unknown))}; choose from {', '.join(ENVS)}")
    grid = protocol_grid(args.envs)
    if not args.report:
        train_all(args, collect_datasets(args), grid)
    table = report(args, grid)
    suffix = env_suffix(args.envs)
    (args.out / f"claims{suffix}.md").write_text(table + "\n")
    print(table)
    print(f"boards and claims.md in {args.out}")


if __name__ == "__main__":
    main()
