"""``offline_gitd online dqn|sac`` and ``offline_gitd collect`` (DESIGN §7)."""

from __future__ import annotations

import argparse
import functools
import shlex
from pathlib import Path

from offline_gitd.config.fields import add_dataclass_arguments, from_namespace, given_fields, parse_ratio
from offline_gitd.online.config import OnlineConfig
from offline_gitd.rundir.flags import add_output_arguments, add_run_arguments, outputs_from_args, start_run

DQN_EXAMPLES = """\
  offline_gitd online dqn --env Pong --critic gitd --K 5 --steps 10000000 --seeds 0-2 --out runs/pong-gidqn
  offline_gitd online dqn --env atari:Breakout --critic td --preset strong --utd 4 --out runs/breakout-strong
  offline_gitd online dqn --env CartPole-v1 --critic gitd --steps 50000 --seeds 0-4 --out runs/cartpole
  offline_gitd online dqn --out runs/cartpole --resume --steps 100000   (continue exactly where it stopped)
"""
SAC_EXAMPLES = """\
  offline_gitd online sac --env HalfCheetah-v5 --critic gitd --K 5 --steps 1000000 --out runs/hc-gisac
  offline_gitd online sac --env Pendulum-v1 --critic td --steps 20000 --seeds 0-2 --out runs/pendulum-sac
  offline_gitd online sac --out runs/hc-gisac --resume --steps 2000000   (continue exactly where it stopped)
"""
EXAMPLES = "examples:\n" + DQN_EXAMPLES + SAC_EXAMPLES
# Flags that only mean something for DQN (epsilon-greedy exploration, the strong DQN preset): left
# out of `online sac --help`, and refused there with a reason.
DQN_ONLY = ("epsilon_start", "epsilon_end", "epsilon_steps", "preset")


COLLECT_EXAMPLES = """examples:
  offline_gitd collect LunarLander-v3 --steps 100000 --out offline_gitd/LunarLander-v3/dqn-v0
  offline_gitd collect MountainCar-v0 --steps 100000 --out offline_gitd/MountainCar-v0/dqn-v0 --data-dir D
  offline_gitd collect Pendulum-v1 --policy sac --steps 20000 --out offline_gitd/Pendulum-v1/sac-v0
  offline_gitd collect MinAtar/Breakout-v1 --policy dqn --steps 200000 --checkpoint-every 20000 \
      --out offline_gitd/MinAtar-Breakout-v1/dqn-replay-v0   (DQN replay, the RL Unplugged way)
  offline_gitd train --dataset minari:offline_gitd/LunarLander-v3/dqn-v0 --critic gitd --out runs/ll
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    online = subparsers.add_parser(
        "online",
        help="train DQN / QRC / i-DQN / Gi-DQN or SAC / SACRC / i-SAC / Gi-SAC online",
        description=(
            "Online training with any critic (td, tdrc, itd, gitd): all --seeds run in lockstep in one "
            "compiled program. Unset options take the paper's defaults for the env (Atari DQN table; the "
            "Gym data-collection table for classic control; the MuJoCo SAC table for continuous actions). "
            "Writes config.json, metrics.csv, episodes.csv, results.csv (leaderboard rows of the returns "
            "collected during training) and checkpoints/ under --out."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    algos = online.add_subparsers(dest="algo", metavar="ALGO", required=True)
    for algo, title, examples, hide in (
        ("dqn", "DQN family, discrete actions (Atari, classic control)", DQN_EXAMPLES, ()),
        ("sac", "SAC family, continuous actions (MuJoCo, Pendulum)", SAC_EXAMPLES, DQN_ONLY),
    ):
        parser = algos.add_parser(
            algo,
            help=title,
            description=title,
            epilog="examples:\n" + examples,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_dataclass_arguments(parser, OnlineConfig, skip=("algo",), only_given=True, hidden=hide)
        add_run_arguments(parser, "--steps")
        parser.add_argument(
            "--trust-pickles",
            action="store_true",
            help="with --resume: read host states an older version saved as pickles (they can run any code "
            "they hold: only for run directories you made or trust)",
        )
        parser.set_defaults(func=_online)

    collect = subparsers.add_parser(
        "collect",
        help="train a behaviour agent and record every transition as a Minari dataset",
        description=(
            "Train a behaviour agent (DQN with the Gym data-collection table for discrete actions, SAC for "
            "continuous ones, or a random policy) on ENV_ID while minari.DataCollector records every "
            "transition, then write a real Minari dataset usable with: offline_gitd train --dataset minari:ID."
        ),
        epilog=COLLECT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    collect.add_argument(
        "env_id",
        metavar="ENV_ID",
        help="gymnasium id, e.g. LunarLander-v3, MountainCar-v0, Pendulum-v1, MinAtar/Breakout-v1",
    )
    collect.add_argument("--steps", type=int, required=True, help="environment steps to record")
    collect.add_argument("--out", required=True, help="Minari dataset id, e.g. offline_gitd/LunarLander-v3/dqn-v0")
    collect.add_argument(
        "--policy",
        choices=("dqn", "sac", "random"),
        default=None,
        help="behaviour policy (default: dqn for discrete, sac for continuous actions)",
    )
    collect.add_argument("--critic", default="td", help="behaviour agent's critic (default: td, the paper's DQN)")
    collect.add_argument("--seed", type=int, default=0, help="seed of the env, the agent and the random policy")
    collect.add_argument(
        "--horizon",
        type=int,
        default=None,
        help="episode step cap (default: 500 LunarLander, 200 MountainCar, env's own)",
    )
    collect.add_argument(
        "--data-dir",
        default=None,
        help="write under D/minari (default: $OFFLINE_GITD_DATA/minari if set, else minari's own root)",
    )
    collect.add_argument(
        "--run-dir", default=None, help="keep the behaviour agent's run directory here (default: a temporary one)"
    )
    collect.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        metavar="N",
        help=(
            "cut the logged replay into checkpoints of N env steps, kept in the dataset with the behaviour "
            "agent's mean return per checkpoint, so train --fraction p keeps the first p of each checkpoint "
            "(the RL Unplugged protocol; default: no checkpoints)"
        ),
    )
    collect.add_argument(
        "--epsilon-steps",
        type=int,
        default=None,
        metavar="N",
        help="behaviour DQN: env steps of epsilon's linear decay (default: the env's table)",
    )
    collect.add_argument(
        "--utd",
        type=parse_ratio,
        default=None,
        help="behaviour agent: updates per env step, an integer or 1/n (default: the env's table)",
    )
    collect.add_argument("--overwrite", action="store_true", help="replace an existing local dataset with this id")
    add_output_arguments(collect, checkpoints=False)
    collect.set_defaults(func=_collect)


def _online(args: argparse.Namespace) -> int:
    from offline_gitd.errors import ConfigError
    from offline_gitd.output_paths import require_dir_target

    given = given_fields(OnlineConfig, args)
    exploration = [name for name in DQN_ONLY if name in given and name != "preset"]
    if args.algo == "sac" and exploration:
        flag = "--" + exploration[0].replace("_", "-")
        raise ConfigError(f"{flag} sets DQN's epsilon-greedy exploration; online sac explores with its policy")
    if given.get("out"):
        require_dir_target(given["out"], "--out")
    if args.resume:
        if not given.get("out"):
            raise ConfigError("--resume needs --out RUN_DIR")
        given.pop("algo", None)  # the subcommand, not a flag
        from offline_gitd.online.train import resume_config

        cfg = resume_config(Path(given["out"]), given)
        if cfg.algo != args.algo:
            raise ConfigError(f"{given['out']} is an online {cfg.algo} run: resume it with online {cfg.algo}")
    else:
        cfg = from_namespace(OnlineConfig, args)
        cfg.check_flags()  # bad flags are refused before JAX is imported
    if args.trust_pickles and not args.resume:
        raise ConfigError("--trust-pickles only applies to --resume (a new run writes no pickle)")
    from offline_gitd.online.train import train

    run_dir = start_run(
        functools.partial(train, trust_pickles=args.trust_pickles),
        cfg,
        args,
        f"offline_gitd online {cfg.algo} --out {shlex.quote(str(cfg.out))} --resume",
    )
    print(f"run directory: {run_dir}")
    for name in (
        "config.json",
        "metrics.csv",
        "episodes.csv",
        "results.csv",
        "checkpoints",
        *(("tb",) if args.tensorboard else ()),
    ):
        print(f"  {run_dir / name}")
    return 0


def _collect(args: argparse.Namespace) -> int:
    from offline_gitd.online.collect import CollectRequest, collect
    from offline_gitd.output_paths import require_dir_target

    if args.run_dir:
        require_dir_target(args.run_dir, "--run-dir")
    if args.data_dir:
        require_dir_target(args.data_dir, "--data-dir")
    request = CollectRequest(
        env_id=args.env_id,
        steps=args.steps,
        dataset_id=args.out,
        policy=args.policy,
        critic=args.critic,
        seed=args.seed,
        horizon=args.horizon,
        data_dir=args.data_dir,
        run_dir=args.run_dir,
        overwrite=args.overwrite,
        checkpoint_every=args.checkpoint_every,
        epsilon_steps=args.epsilon_steps,
        utd=args.utd,
    )
    where = collect(request, progress=args.progress, outputs=outputs_from_args(args))
    print(f"dataset {args.out} written to {where}")
    from offline_gitd.data.paths import data_dir_flag

    print(
        f"train on it with: offline_gitd train --dataset minari:{args.out}{data_dir_flag(args.data_dir)} --out RUN_DIR"
    )
    return 0
