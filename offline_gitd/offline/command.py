"""``offline_gitd train``: offline training, CQL over any critic or a baseline (docs/architecture.md#the-command-line-contract)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from offline_gitd.config.fields import add_dataclass_arguments, given_fields
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.rundir.flags import add_run_arguments, start_run

EXAMPLES = """examples:
  offline_gitd train --dataset rlu-atari:Pong/1:0-4 --critic gitd --K 5 --seeds 0-4 --epochs 10 --out runs/pong-gitd
  offline_gitd train --dataset minari:offline_gitd/LunarLander-v3/dqn-v0 --critic itd --out runs/ll-itd
  offline_gitd train --dataset minari:offline_gitd/LunarLander-v3/dqn-v0 --algo bc --out runs/ll-bc
  offline_gitd train --dataset minari:offline_gitd/Hopper-v5/sac-v0 --algo td3bc --critic gitd --out runs/h-td3bc
  offline_gitd train --out runs/pong-gitd --resume --epochs 20     (continue, exactly where it stopped)
  offline_gitd train --config runs/ll-itd/config.json --out runs/ll-itd-again   (run it again)
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train offline (CQL-DQN / CQL-SAC, BC, TD3+BC, IQL) on an RL Unplugged or Minari dataset",
        description=(
            "Train TD, TDRC, i-TD or Gi-TD critics with CQL (--algo cql), or a baseline: behaviour cloning "
            "(--algo bc), TD3+BC (--algo td3bc) or IQL (--algo iql) on continuous actions; all --seeds run in one "
            "compiled program. Unset options take the paper's defaults for the dataset's domain (Atari offline "
            "table; the Gym ablation for vector observations; the SAC table for continuous actions) and the "
            "baselines' own papers for theirs (docs/offline.md#baselines). Writes "
            "config.json, metrics.csv, results.csv (leaderboard rows) and checkpoints/ under --out."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dataclass_arguments(parser, OfflineConfig, only_given=True)
    add_run_arguments(parser, "--epochs")
    parser.set_defaults(func=_train)


def _train(args: argparse.Namespace) -> int:
    from offline_gitd.data.registry import parse_dataset_id
    from offline_gitd.errors import ConfigError
    from offline_gitd.output_paths import require_dir_if_present, require_dir_target

    given = given_fields(OfflineConfig, args)
    if args.config:
        if args.resume:
            raise ConfigError("--config starts a new run; --resume continues one from its own config.json")
        from offline_gitd.config.files import read_fields

        given = {**read_fields(args.config, OfflineConfig), **given}
    if given.get("out"):
        require_dir_target(given["out"], "--out")
    require_dir_if_present(given.get("data_dir"), "--data-dir")
    if args.resume:
        if not given.get("out"):
            raise ConfigError("--resume needs --out RUN_DIR")
        from offline_gitd.offline.train import resume_config

        cfg = resume_config(Path(given["out"]), given)
    else:
        cfg = OfflineConfig(**given)
        if not cfg.dataset:
            raise ConfigError("--dataset is required (rlu-atari:GAME/RUN[:CHECKPOINTS] or minari:ID)")
        parse_dataset_id(cfg.dataset)
        cfg.check_flags()  # bad flags are refused before JAX is imported
    from offline_gitd.offline.train import train

    run_dir = start_run(train, cfg, args, f"offline_gitd train --out {shlex.quote(str(cfg.out))} --resume")
    print(f"run directory: {run_dir}")
    for name in ("config.json", "metrics.csv", "results.csv", "checkpoints", *(("tb",) if args.tensorboard else ())):
        if (run_dir / name).exists():  # only what was written: --eval-episodes 0 writes no results.csv
            print(f"  {run_dir / name}")
    if not (run_dir / "results.csv").exists():
        print("  (no results.csv: with --eval-episodes 0 nothing was evaluated, so the run has no leaderboard rows)")
    return 0
