"""``offline_gitd demo``: the paper's offline Gym experiment end to end, on CPU (docs/architecture.md#the-command-line-contract).

1. Collect Acrobot-v1 and LunarLander-v3 datasets with the paper's DQN protocol (docs/reproducing.md#hyperparameters), recorded by ``minari.DataCollector``; cached in the data root, so a
   second demo reuses them. Acrobot replaces MountainCar, whose behaviour DQN never reached the
   goal at the demo's budget, so every method sat at the -200 floor and the demo's verdict was
   empty (docs/getting-started.md#the-demo).
2. Train CQL with the four critics (td, tdrc, itd, gitd; K = 5, beta = 1 where they apply) on
   each dataset, all seeds of a critic in one compiled program, evaluating after every epoch.
3. Submit every run to a fresh leaderboard in the output folder and print what
   ``offline_gitd leaderboard show`` prints for it (its defaults: one normaliser for every env, the
   datasets' own random and behaviour references; the per-env table of raw returns), then write the
   figures and the page as ``leaderboard html`` does.

A demo interrupted half-way continues where it stopped when run again with the same ``--out``:
finished datasets and epochs are kept, unfinished runs resume from their last checkpoint.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

ENVS = ("Acrobot-v1", "LunarLander-v3")
CRITICS = ("td", "tdrc", "itd", "gitd")
BASELINE = "cql:td"


@dataclass(frozen=True)
class DemoSize:
    """How much of the paper's protocol the demo runs (the full protocol is benchmarks/gym_offline.py)."""

    collect_steps: int
    seeds: str
    epochs: int
    steps_per_epoch: int
    eval_episodes: int
    bootstrap_reps: int
    # At the quick size nothing learns (CQL td's mean is within noise of zero in every env, and a
    # 3,000-step Acrobot behaviour never leaves -500, so its dataset has no usable reference):
    # show's rule would leave no env in the aggregate. The quick demo checks the pipeline, not a
    # verdict, so it keeps them (--keep-flagged-envs) and says so in the table.
    keep_flagged_envs: bool = False


# bootstrap_reps: the full demo prints exactly what `leaderboard show` prints for its board (10,000,
# show's default); the quick one fewer, for speed.
FULL = DemoSize(
    collect_steps=40_000, seeds="0-4", epochs=5, steps_per_epoch=5_000, eval_episodes=10, bootstrap_reps=10_000
)
QUICK = DemoSize(
    collect_steps=3_000,
    seeds="0-2",
    epochs=2,
    steps_per_epoch=200,
    eval_episodes=2,
    bootstrap_reps=200,
    keep_flagged_envs=True,
)


def dataset_id(env_id: str, steps: int) -> str:
    """Minari id of the demo's dataset for ``env_id`` (the step count is part of the name, so the
    quick and full demos never mistake each other's data for their own)."""
    name = env_id.split("-")[0].lower()
    return f"offline_gitd/{name}/dqn-{steps}-v0"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="the paper's offline Gym experiment end to end: collect, train 4 critics, leaderboard",
        description=(
            "Collect Acrobot-v1 and LunarLander-v3 datasets with DQN (cached), train CQL with the td, tdrc, "
            "itd and gitd critics (K = 5, beta = 1), several seeds per critic in one program, then submit to a "
            "leaderboard in --out, print what `leaderboard show` prints for it and write its figures and HTML "
            "page. 5 min 15 s on 2 CPU cores (CPU time, docs/getting-started.md#the-demo); --quick runs the same "
            "pipeline small, in about 100 s."
        ),
        epilog="examples:\n  offline_gitd demo\n  offline_gitd demo --quick --out demo_quick",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=Path("demo_out"), help="output folder (default: demo_out)")
    parser.add_argument("--quick", action="store_true", help="the same pipeline at a size that runs in minutes")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data root for the cached datasets (default $OFFLINE_GITD_DATA or the user cache)",
    )
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from offline_gitd.output_paths import require_dir_target

    require_dir_target(args.out, "--out")
    if args.data_dir:
        require_dir_target(args.data_dir, "--data-dir")
    import minari

    from offline_gitd.data.paths import data_root, use_minari_root
    from offline_gitd.leaderboard.normalise import DEFAULT_NORMALISATION
    from offline_gitd.leaderboard.report import analyse, publish
    from offline_gitd.leaderboard.show import render
    from offline_gitd.leaderboard.submit import submit
    from offline_gitd.offline.config import OfflineConfig
    from offline_gitd.offline.train import train
    from offline_gitd.online.collect import CollectRequest, collect

    size = QUICK if args.quick else FULL
    started = time.perf_counter()
    root = data_root(args.data_dir)
    minari_root = use_minari_root(root)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    def stage(text: str) -> None:
        print(f"[demo {time.perf_counter() - started:6.0f}s] {text}", flush=True)

    datasets = {}
    for env_id in ENVS:
        datasets[env_id] = dataset_id(env_id, size.collect_steps)
        if datasets[env_id] in minari.list_local_datasets():
            stage(f"dataset {datasets[env_id]} is cached in {minari_root}")
            continue
        stage(f"collecting {size.collect_steps} steps of {env_id} with DQN -> {datasets[env_id]}")
        collect(
            CollectRequest(env_id, size.collect_steps, datasets[env_id], policy="dqn", data_dir=str(root)),
            progress=args.progress,
        )

    run_dirs = []
    for env_id in ENVS:
        for critic in CRITICS:
            run_dir = out / "runs" / f"{env_id}-{critic}"
            run_dirs.append(run_dir)
            cfg = OfflineConfig(
                dataset=f"minari:{datasets[env_id]}",
                out=str(run_dir),
                critic=critic,
                beta=1.0,
                seeds=size.seeds,
                epochs=size.epochs,
                steps_per_epoch=size.steps_per_epoch,
                eval_episodes=size.eval_episodes,
                data_dir=str(root),
            )
            resume = (run_dir / "config.json").exists()
            stage(f"{'resuming' if resume else 'training'} CQL with {critic} on {env_id}, seeds {size.seeds}")
            train(cfg, resume=resume, progress=args.progress)

    board = out / "leaderboard.csv"
    board.unlink(missing_ok=True)  # the demo's board holds exactly this demo's runs
    report = submit(run_dirs, board, allow_new_env=True)
    stage(f"submitted {sum(report.added.values())} rows to {board}; bootstrapping confidence intervals")
    # The verdict is `show`'s, with its defaults (docs/leaderboard.md#normalisation): the datasets'
    # own references (a random policy's return and the behaviour's) normalise every env, so an env
    # where CQL td sits near zero is not divided by noise, and the per-env table gives raw returns.
    analysis = analyse(
        board, BASELINE, DEFAULT_NORMALISATION, size.bootstrap_reps, seed=0, keep_flagged=size.keep_flagged_envs
    )
    print(
        render(
            analysis.summaries,
            "table",
            analysis.baseline,
            DEFAULT_NORMALISATION,
            analysis.loaded,
            analysis.per_env,
            across=analysis.across,
        )
    )
    figures, page = publish(board, analysis, DEFAULT_NORMALISATION, out / "site")
    stage("done")
    options = "" if size.bootstrap_reps == 10_000 else f" --reps {size.bootstrap_reps}"
    options += " --keep-flagged-envs" if size.keep_flagged_envs else ""
    print(f"the table:   offline_gitd leaderboard show --board {board} --baseline {BASELINE}{options}")
    print(f"datasets:    {minari_root} ({', '.join(datasets.values())})")
    print(f"runs:        {out / 'runs'}")
    print(f"leaderboard: {board}")
    print(f"figures:     {', '.join(str(p) for p in figures)}")
    print(f"page:        {page}")
    return 0
