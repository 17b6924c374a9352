"""``offline_gitd online dqn|sac`` and ``offline_gitd collect`` (docs/architecture.md#the-command-line-contract)."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import shlex
import typing
from pathlib import Path

from offline_gitd.config.fields import add_dataclass_arguments, base_type, field_choices, given_fields, parse_ratio
from offline_gitd.online.config import COLLECT_POLICIES, CollectRequest, OnlineConfig, collect_file_keys, collect_key
from offline_gitd.rundir.flags import add_output_arguments, add_run_arguments, outputs_from_args, start_run

DQN_EXAMPLES = """\
  offline_gitd online dqn --env Pong --critic gitd --K 5 --steps 10000000 --seeds 0-2 --out runs/pong-gidqn
  offline_gitd online dqn --env atari:Breakout --critic td --preset strong --utd 4 --out runs/breakout-strong
  offline_gitd online dqn --env CartPole-v1 --critic gitd --steps 50000 --seeds 0-4 --out runs/cartpole
  offline_gitd online dqn --env CartPole-v1 --loop compiled --steps 50000 --seeds 0-4 --out runs/cartpole-compiled
  offline_gitd online dqn --out runs/cartpole --resume --steps 100000   (continue exactly where it stopped)
  offline_gitd online dqn --env CartPole-v1 --init-from runs/cp-gitd --with-dataset --initial-samples 0 --out runs/ft
"""
SAC_EXAMPLES = """\
  offline_gitd online sac --env HalfCheetah-v5 --critic gitd --K 5 --steps 1000000 --out runs/hc-gisac
  offline_gitd online sac --env Pendulum-v1 --critic td --steps 20000 --seeds 0-2 --out runs/pendulum-sac
  offline_gitd online sac --out runs/hc-gisac --resume --steps 2000000   (continue exactly where it stopped)
"""
EXAMPLES = "examples:\n" + DQN_EXAMPLES + SAC_EXAMPLES
# Flags that only mean something for DQN (epsilon-greedy exploration, the strong DQN preset, the
# compiled loop): left out of `online sac --help`, and refused there with a reason.
EXPLORATION = ("epsilon_start", "epsilon_end", "epsilon_steps")
DQN_ONLY = (*EXPLORATION, "preset", "loop")
# The keys of `collect --config FILE` (a sweep's [[collect]] tables use the same names), from the
# fields of CollectRequest, which also make collect's flags.
COLLECT_KEYS = collect_file_keys()


def type_names(kind: type | tuple[type, ...]) -> str:
    """``int`` or ``int or float or str``: what a key of :data:`COLLECT_KEYS` takes, for messages."""
    return " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__


def add_collect_arguments(parser: argparse.ArgumentParser) -> None:
    """One argument per :class:`~offline_gitd.online.config.CollectRequest` field: ENV_ID, then its
    flags, each ``None`` unless typed (so that typed flags override ``--config``), ``--overwrite``
    a switch."""
    for field in dataclasses.fields(CollectRequest):
        flag = field.metadata.get("flag") or "--" + field.name.replace("_", "-")
        help_text = field.metadata["help"].replace("%", "%%")
        if field.type in (bool, "bool"):
            parser.add_argument(flag, dest=field.name, action="store_true", help=help_text)
        elif not flag.startswith("-"):
            parser.add_argument(field.name, metavar=flag, nargs="?", default=None, help=help_text)
        else:
            parser.add_argument(
                flag,
                dest=field.name,
                type=field.metadata.get("parse") or base_type(typing.get_type_hints(CollectRequest)[field.name]),
                default=None,
                choices=field_choices(field),
                metavar=field.metadata.get("metavar"),
                help=help_text,
            )


COLLECT_EXAMPLES = """examples:
  offline_gitd collect LunarLander-v3 --steps 100000 --out offline_gitd/LunarLander-v3/dqn-v0
  offline_gitd collect MountainCar-v0 --steps 100000 --out offline_gitd/MountainCar-v0/dqn-v0 --data-dir D
  offline_gitd collect Pendulum-v1 --policy sac --steps 20000 --out offline_gitd/Pendulum-v1/sac-v0
  offline_gitd collect MinAtar/Breakout-v1 --policy dqn --steps 200000 --checkpoint-every 20000 \
      --out offline_gitd/MinAtar-Breakout-v1/dqn-replay-v0   (DQN replay, the RL Unplugged way)
  offline_gitd collect --config collect.toml --seed 1     (env, steps, out ... from the file)
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
    add_collect_arguments(collect)
    collect.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help=f"read the options from a TOML file (keys: {', '.join(COLLECT_KEYS)}); flags given here override it",
    )
    add_output_arguments(collect, checkpoints=False)
    collect.set_defaults(func=_collect)


def _online(args: argparse.Namespace) -> int:
    from offline_gitd.errors import ConfigError
    from offline_gitd.output_paths import require_dir_target

    given = given_fields(OnlineConfig, args)
    exploration = [name for name in EXPLORATION if name in given]
    if args.algo == "sac" and exploration:
        flag = "--" + exploration[0].replace("_", "-")
        raise ConfigError(f"{flag} sets DQN's epsilon-greedy exploration; online sac explores with its policy")
    if args.config:  # a run's config.json records every field, exploration included: not refused
        given = {**_fields_from_file(args.config, args.algo, args.resume), **given}
    if given.get("loop") == "compiled" and not args.resume:
        from offline_gitd.online.config import check_compiled_loop

        check_compiled_loop(OnlineConfig(**given))  # before --init-from opens the offline run
    if given.get("init_from") and not args.resume:
        from offline_gitd.online.origin import inherit_network

        given = inherit_network(given)
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
        cfg = OnlineConfig(**given)
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
        if (run_dir / name).exists():  # only what was written
            print(f"  {run_dir / name}")
    return 0


def _fields_from_file(path: str, algo: str, resume: bool) -> dict:
    """The OnlineConfig fields of ``--config FILE``; a file of the other algorithm is refused."""
    from offline_gitd.config.files import read_fields
    from offline_gitd.errors import ConfigError

    if resume:
        raise ConfigError("--config starts a new run; --resume continues one from its own config.json")
    values = read_fields(path, OnlineConfig, skip=("algo",))
    saved = values.pop("algo", algo)
    if saved != algo:
        raise ConfigError(f"--config {path} is an online {saved} config: run it with online {saved}")
    return values


def default_dataset_id(env_id: str, policy: str | None) -> str:
    """The dataset id ``collect`` writes when no ``--out`` is given: ``offline_gitd/ENV/POLICY-v0``
    (``behaviour-v0`` when the policy is the env's default, dqn or sac)."""
    return f"offline_gitd/{env_id}/{policy or 'behaviour'}-v0"


def _collect_options(args: argparse.Namespace) -> dict:
    """The collect options by config key: ``--config FILE``'s, the flags typed on top, then the
    defaults; ENV_ID and --steps must come from one of the two, and --out defaults to
    :func:`default_dataset_id`."""
    from offline_gitd.config.files import read_table, refuse_unknown
    from offline_gitd.errors import ConfigError

    fields = [field for field in dataclasses.fields(CollectRequest) if collect_key(field) in COLLECT_KEYS]
    typed = {collect_key(field): getattr(args, field.name) for field in fields}
    options = {}
    if args.config:
        table = read_table(args.config)
        refuse_unknown(f"--config {args.config}", table, COLLECT_KEYS)
        for key, value in table.items():
            kind = COLLECT_KEYS[key]
            if isinstance(value, bool) or not isinstance(value, kind):
                raise ConfigError(f"--config {args.config}: {key}: expected {type_names(kind)}, got {value!r}")
        if isinstance(table.get("utd"), str):
            table["utd"] = parse_ratio(table["utd"])
        options.update(table)
    options.update({key: value for key, value in typed.items() if value is not None})
    defaults = {collect_key(f): f.default for f in fields if f.default is not dataclasses.MISSING}
    options = {**{key: value for key, value in defaults.items() if value is not None}, **options}
    if "out" not in options and isinstance(options.get("env"), str):
        options["out"] = default_dataset_id(options["env"], options.get("policy"))
    for field in fields:
        key = collect_key(field)
        if field.default is dataclasses.MISSING and key not in options:
            flag = field.metadata.get("flag") or "--" + field.name.replace("_", "-")
            raise ConfigError(f"collect needs {flag} (on the command line or as {key} in --config)")
    if options.get("policy") not in (None, *COLLECT_POLICIES):
        raise ConfigError(f"policy must be one of {', '.join(COLLECT_POLICIES)}, got {options['policy']!r}")
    return options


def _collect(args: argparse.Namespace) -> int:
    from offline_gitd.online.collect import collect
    from offline_gitd.output_paths import require_dir_target

    options = _collect_options(args)
    run_dir, data_dir, dataset_id = options.get("run_dir"), options.get("data_dir"), options["out"]
    if run_dir:
        require_dir_target(run_dir, "--run-dir")
    if data_dir:
        require_dir_target(data_dir, "--data-dir")
    names = {collect_key(field): field.name for field in dataclasses.fields(CollectRequest)}
    request = CollectRequest(**{names[key]: value for key, value in options.items()}, overwrite=args.overwrite)
    where = collect(request, progress=args.progress, outputs=outputs_from_args(args))
    print(f"dataset {dataset_id} written to {where}")
    from offline_gitd.data.paths import data_dir_flag

    print(f"train on it with: offline_gitd train --dataset minari:{dataset_id}{data_dir_flag(data_dir)} --out RUN_DIR")
    return 0
