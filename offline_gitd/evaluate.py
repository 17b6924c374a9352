"""``offline_gitd evaluate RUN_DIR``: load a checkpoint, play its greedy policy, print mean +- std.

A thin CLI over :mod:`offline_gitd.trained` (the Python API), so the command and ``load_run`` give the
same numbers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLES = """examples:
  offline_gitd evaluate runs/ll-gitd                          (latest checkpoint, every seed, as the run evaluated it)
  offline_gitd evaluate runs/ll-gitd --epoch 5 --seed 0 --episodes 100
  offline_gitd evaluate runs/cartpole --seed 1 --video cartpole.mp4
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="evaluate (and film) a trained run's checkpoint",
        description=(
            "Restore a run's checkpoint and play its greedy policy with the run's own evaluation protocol "
            "(Atari: epsilon 0.001, sticky actions); prints the mean +- std of the returns per seed. "
            "By default an offline run's checkpoint is evaluated with the episodes and evaluation seed its "
            "training loop used (metrics.csv's eval_seed), so it prints the return the loop logged. "
            "Python: offline_gitd.load_run(RUN_DIR).evaluate(...)."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by train or online")
    parser.add_argument(
        "--epoch", type=int, default=None, help="checkpoint: epoch (train) or env step (online); default the latest"
    )
    parser.add_argument("--seed", type=int, default=None, help="training seed to evaluate (default: every seed)")
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="evaluation episodes per seed (default: an offline run's --eval-episodes, else 10)",
    )
    parser.add_argument(
        "--eval-seed",
        type=int,
        default=None,
        help="seed of the evaluation episodes (default: the seed the offline loop used at that epoch, else 0)",
    )
    parser.add_argument("--video", default=None, metavar="FILE", help="film one more episode to FILE (.mp4 or .avi)")
    parser.set_defaults(func=_evaluate)


def _evaluate(args: argparse.Namespace) -> int:
    from offline_gitd.envs.video import check_video_path
    from offline_gitd.errors import UsageError
    from offline_gitd.trained import load_run

    if args.episodes is not None and args.episodes < 1:
        raise UsageError(f"--episodes must be >= 1, got {args.episodes}")
    video = Path(args.video) if args.video else None
    if video is not None:
        check_video_path(video)
    run = load_run(args.run_dir)
    seeds = run.seeds if args.seed is None else [args.seed]
    if args.seed is not None and args.seed not in run.seeds:
        raise UsageError(f"seed {args.seed} is not in {run.path} (its seeds: {', '.join(map(str, run.seeds))})")
    checkpoint = args.epoch if args.epoch is not None else (run.checkpoints() or [None])[-1]
    if checkpoint is None:
        raise UsageError(f"{run.path} holds no checkpoint yet")
    unit = "epoch" if run.kind == "offline" else "env step"
    means = []
    for seed in seeds:
        episodes, eval_seed = run.evaluation_protocol(seed, checkpoint, args.episodes, args.eval_seed)
        returns = run.evaluate(
            episodes,
            seed,
            args.epoch,
            eval_seed=eval_seed,
            video=video if seed == seeds[0] else None,
        )
        means.append(float(returns.mean()))
        print(
            f"seed {seed} at {unit} {checkpoint}: return {returns.mean():.2f} +- {returns.std():.2f} "
            f"over {len(returns)} episode(s), evaluation seed {eval_seed}"
        )
    if len(seeds) > 1:
        print(f"mean over {len(seeds)} seeds: {sum(means) / len(means):.2f}")
    if video is not None:
        print(f"video of seed {seeds[0]}: {video}")
    return 0
