"""``offline_gitd online dqn|sac``'s configuration: a :class:`~offline_gitd.config.base.RunConfig` in an env.

``resolve`` fills every ``None`` from the environment's domain (the paper's online tables,
:data:`offline_gitd.config.paper.ONLINE_DEFAULTS`, and for classic control the environment's own row
of the Gym data-collection table), applies ``--preset``, validates, and the result is what
``config.json`` holds. ``T`` (target period / head roll) counts gradient updates, as everywhere.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from offline_gitd.choices import JAX_ENV_IDS, LOOPS
from offline_gitd.config.base import RunConfig
from offline_gitd.config.fields import base_type, parse_ratio
from offline_gitd.config.paper import GYM_ENV_DEFAULTS, ONLINE_DEFAULTS, STRONG_PRESET
from offline_gitd.errors import ConfigError
from offline_gitd.online.schedules import utd_fraction
from offline_gitd.records import check_range, option

ALGOS = ("dqn", "sac")
PRESETS = ("none", "strong")


@dataclass(frozen=True)
class OnlineConfig(RunConfig):
    """Hyperparameters of ``offline_gitd online dqn|sac``; ``None`` means "the domain's default"."""

    algo: str = option("dqn", "online algorithm family", choices=ALGOS)
    env: str = option("", "environment id: atari:Pong or Pong (Machado protocol), CartPole-v1, HalfCheetah-v5 ...")
    per: bool = option(False, "prioritised replay (Schaul et al. 2016), priorities from |TD error|")
    per_alpha: float = option(0.6, "PER priority exponent")
    per_beta: float = option(0.4, "PER importance-sampling exponent")
    preset: str = option(
        "none", "strong: IMPALA + GAP torso, PER, 3-step returns (the strong DQN baseline)", choices=PRESETS
    )
    steps: int = option(100_000, "environment steps per seed")
    utd: float | None = option(
        None, "updates per env step: an integer >= 1, or 1/n for one update every n steps", parse=parse_ratio
    )
    initial_samples: int | None = option(None, "uniformly random actions before learning starts")
    replay_size: int | None = option(None, "replay capacity in transitions (sampling window of the newest rows)")
    epsilon_start: float = option(1.0, "DQN exploration: initial epsilon")
    epsilon_end: float | None = option(None, "DQN exploration: final epsilon")
    epsilon_steps: int | None = option(
        None, "DQN exploration: env steps of the linear decay (after the initial samples)"
    )
    log_every: int | None = option(None, "env steps between metrics/results rows")
    checkpoint_every: int | None = option(None, "env steps between checkpoints (a multiple of --log-every)")
    init_from: str | None = option(
        None,
        "start from this offline run's checkpoint (same critic and network; unset ones are taken from it)",
        metavar="RUN_DIR",
        unset="a fresh network",
    )
    init_epoch: int | None = option(
        None, "with --init-from: the offline run's epoch to start from", flag="--epoch", metavar="E", unset="latest"
    )
    init_seed: int | None = option(
        None,
        "with --init-from: the offline seed every seed starts from",
        flag="--seed",
        metavar="S",
        unset="each seed its own",
    )
    with_dataset: bool = option(False, "with --init-from: fill each seed's replay with the offline run's dataset first")
    loop: str = option(
        "auto",
        "auto: compiled where it can run the run, python otherwise (config.json records which ran); python: "
        "gymnasium envs stepped on the host (every env); compiled: env, acting, replay and updates as "
        f"one compiled program per --log-every window, for envs written in JAX ({', '.join(JAX_ENV_IDS)}), online "
        "dqn only, without --per, --n-step, --init-from or --preset strong. Same method and distribution of "
        "returns, other random streams: not the same episodes as python's for a seed",
        choices=LOOPS,
    )

    NOT_HASHED: ClassVar[tuple[str, ...]] = (*RunConfig.NOT_HASHED, "steps", "log_every", "checkpoint_every")
    # A run recorded before ``loop`` existed ran the Python loop; today's default is ``auto``.
    RECORDED_BEFORE: ClassVar[dict[str, Any]] = {"loop": "python"}

    def hash_identity(self) -> dict[str, Any]:
        """The hashed fields; ``loop`` only where it is not ``python``.

        A loop changes the speed and the random streams, not what is learned, yet a run's hash with
        its seed and step names one result: the board refuses a second row with the same setting,
        seed, step and hash, and a sweep counts a run done once its hash's rows are on its board
        (docs/sweeps.md). The compiled loop's seed 0 is another run than the Python loop's seed 0
        (other random streams, the same initial network), so a compiled run hashes apart; a Python
        run leaves the field out and hashes as it did before the field existed."""
        identity = super().hash_identity()
        if identity.get("loop") == "python":
            del identity["loop"]
        return identity

    def resolve(self, domain: str) -> OnlineConfig:
        """Fill the defaults of ``domain`` (atari | minatar | gym | continuous) and the preset; validate."""
        values = dataclasses.asdict(self)
        if self.preset == "strong":
            if self.algo != "dqn":
                raise ConfigError("--preset strong is the strong DQN baseline; it needs online dqn")
            values.update(STRONG_PRESET)
        defaults = dict(ONLINE_DEFAULTS[domain])
        if domain == "gym":
            defaults.update(GYM_ENV_DEFAULTS.get(self.env, {}))
        resolved = self.filled(values, defaults, domain)
        if resolved.loop == "auto":  # the run records the loop that runs it
            resolved = dataclasses.replace(resolved, loop=choose_loop(resolved)[0])
        return resolved

    def check_flags(self) -> None:
        if not self.env:
            raise ConfigError("--env ENV_ID is required")
        super().check_flags()
        for name in ("steps", "log_every", "checkpoint_every"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
        # The window must hold a transition and its successor row (online.replay.WindowedReplay).
        check_range("--replay-size", self.replay_size, 2, why="a transition and the row after it")
        for name in ("initial_samples", "epsilon_steps"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 0, got {value}")
        if self.utd is not None:
            utd_fraction(self.utd)
        for name in ("epsilon_start", "epsilon_end", "per_beta"):
            if getattr(self, name) is not None and not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(self, name)}")
        if not (math.isfinite(self.per_alpha) and self.per_alpha >= 0):
            raise ConfigError(f"--per-alpha must be >= 0, got {self.per_alpha}")
        if self.init_from is None:
            for name, flag in (("init_epoch", "--epoch"), ("init_seed", "--seed"), ("with_dataset", "--with-dataset")):
                if getattr(self, name) not in (None, False):
                    raise ConfigError(f"{flag} says how to start from an offline run: it needs --init-from RUN_DIR")
        for name, flag in (("init_epoch", "--epoch"), ("init_seed", "--seed")):
            check_range(flag, getattr(self, name), 0)
        if self.loop == "compiled":
            check_compiled_loop(self)
        if self.log_every and self.checkpoint_every and self.checkpoint_every % self.log_every:
            raise ConfigError(
                f"--checkpoint-every ({self.checkpoint_every}) must be a multiple of --log-every ({self.log_every})"
            )

    def method_config(self, domain: str) -> str:
        """What sets this run's method apart from the env's defaults (paths, seeds, the driver,
        the run's length and its logging are not the method). ``loop=compiled`` is shown: until the
        two loops' learning curves are shown to agree, the board keeps them on lines of their own
        rather than pool runs that share their initial networks seed by seed; a Python run shows
        nothing for its loop, as before the field existed."""
        blank = OnlineConfig(
            algo=self.algo, env=self.env, out=self.out or "-", critic=self.critic, K=self.K, loop="python"
        )
        ignored = ("env", "out", "seeds", "driver", "steps", "log_every", "checkpoint_every")
        return self.describe_method(blank, domain, ignored)


def compiled_loop_refusal(cfg: OnlineConfig) -> str | None:
    """Why the compiled loop (:mod:`offline_gitd.online.compiled`) cannot run ``cfg``, in one line,
    or ``None`` where it can: it runs online DQN on an env written in JAX with 1-step returns,
    uniform replay and fresh networks. Plain data only (no JAX)."""
    if cfg.algo != "dqn":
        return f"--loop compiled runs online dqn only, not online {cfg.algo}"
    if cfg.env not in JAX_ENV_IDS:
        return (
            f"--loop compiled needs an env written in JAX ({', '.join(JAX_ENV_IDS)}); got {cfg.env!r}: "
            "run it with --loop python"
        )
    for flag, given in (
        ("--per", cfg.per),
        ("--n-step", cfg.n_step not in (None, 1)),
        ("--init-from", cfg.init_from is not None),
        ("--preset strong", cfg.preset == "strong"),
    ):
        if given:
            return f"--loop compiled does not support {flag} (it runs 1-step returns, uniform replay, fresh networks)"
    return None


def check_compiled_loop(cfg: OnlineConfig) -> None:
    """Refuse, in one line, what the compiled loop does not do (:func:`compiled_loop_refusal`), so
    that ``--loop compiled`` is refused before JAX is imported and before a run directory exists."""
    refusal = compiled_loop_refusal(cfg)
    if refusal:
        raise ConfigError(refusal)


def choose_loop(cfg: OnlineConfig) -> tuple[str, str | None]:
    """The loop ``--loop auto`` runs ``cfg`` with, and a one-line note where it falls back.

    The compiled loop wherever it can run the run (docs/online.md#the-compiled-loop): online DQN on
    an env written in JAX without the options it lacks; the Python loop otherwise, silently where
    the env has no JAX twin or the algorithm is SAC (the Python loop is then the only one), with a
    note where the env has one but an option rules the compiled loop out (``--per``, ``--n-step``,
    ``--init-from``, ``--preset strong``), so that nobody mistakes the slower loop for the default.
    An explicit ``--loop`` is kept as it is."""
    if cfg.loop != "auto":
        return cfg.loop, None
    refusal = compiled_loop_refusal(cfg)
    if refusal is None:
        return "compiled", None
    if cfg.algo != "dqn" or cfg.env not in JAX_ENV_IDS:
        return "python", None
    return (
        "python",
        f"note: --loop auto runs the Python loop: the compiled loop {refusal.removeprefix('--loop compiled ')}",
    )


# ----------------------------------------------------------------------------- collect

COLLECT_POLICIES = ("dqn", "sac", "random")


def collect_option(
    default: Any,
    help: str,
    *,
    key: str | None = None,
    flag: str | None = None,
    in_file: bool = True,
    **kw: Any,
) -> Any:
    """A :class:`CollectRequest` field as :func:`~offline_gitd.config.fields.option` makes it, with
    its ``key`` in ``collect --config FILE`` and a sweep's ``[[collect]]`` tables (default: the
    field's name) and its ``flag`` (default ``--field-name``; a name without dashes is the
    positional argument of that metavar); ``in_file=False``: a flag only (``--overwrite``). The
    help text says what unset means itself: ``--help`` adds no default to it."""
    made = option(default, help, flag=flag, **kw)
    return dataclasses.field(default=made.default, metadata={**made.metadata, "key": key, "in_file": in_file})


@dataclass(frozen=True)
class CollectRequest:
    """What ``offline_gitd collect`` records: the one place its options are written. The command
    line, the keys of ``collect --config FILE`` and of a sweep's ``[[collect]]`` tables all come
    from these fields (:func:`collect_file_keys`; ``offline_gitd.online.command``)."""

    env_id: str = collect_option(
        dataclasses.MISSING,
        "gymnasium id, e.g. LunarLander-v3, MountainCar-v0, Pendulum-v1, MinAtar/Breakout-v1 (required, here or "
        "as env in --config)",
        key="env",
        flag="ENV_ID",
    )
    steps: int = collect_option(dataclasses.MISSING, "environment steps to record (required)")
    dataset_id: str = collect_option(
        dataclasses.MISSING,
        "Minari dataset id, e.g. offline_gitd/LunarLander-v3/dqn-v0 (default: offline_gitd/ENV_ID/POLICY-v0, "
        "behaviour-v0 for the default policy)",
        key="out",
        flag="--out",
        metavar="OUT",
    )
    policy: str | None = collect_option(
        None, "behaviour policy (default: dqn for discrete, sac for continuous actions)", choices=COLLECT_POLICIES
    )
    critic: str = collect_option("td", "behaviour agent's critic (default: td, the paper's DQN)")
    seed: int = collect_option(0, "seed of the env, the agent and the random policy (default: 0)")
    horizon: int | None = collect_option(
        None, "episode step cap (default: 500 LunarLander, 200 MountainCar, env's own)"
    )
    data_dir: str | None = collect_option(
        None, "write under D/minari (default: $OFFLINE_GITD_DATA/minari if set, else minari's own root)"
    )
    run_dir: str | None = collect_option(
        None, "keep the behaviour agent's run directory here (default: a temporary one)"
    )
    # env steps per checkpoint of the logged replay
    checkpoint_every: int | None = collect_option(
        None,
        "cut the logged replay into checkpoints of N env steps, kept in the dataset with the behaviour agent's mean "
        "return per checkpoint, so train --fraction p keeps the first p of each checkpoint (the RL Unplugged "
        "protocol; default: no checkpoints)",
        metavar="N",
    )
    # The behaviour agent's schedule where the domain's table does not fit a shorter recording
    # (None: the table's): env steps of epsilon's decay, updates per env step.
    epsilon_steps: int | None = collect_option(
        None, "behaviour DQN: env steps of epsilon's linear decay (default: the env's table)", metavar="N"
    )
    utd: float | None = collect_option(
        None,
        "behaviour agent: updates per env step, an integer or 1/n (default: the env's table)",
        parse=parse_ratio,
    )
    # The behaviour agent's final policy evaluated the way the offline runs are (docs/datasets.md#collecting-datasets):
    # a reference at the evaluation protocol beside its training return.
    reference_episodes: int = collect_option(
        100,
        "evaluate the behaviour agent's final policy over N episodes at --reference-epsilon once it is recorded, "
        "kept in the dataset as behaviour_eval_score (0: skip; default: 100)",
        metavar="N",
    )
    reference_epsilon: float = collect_option(
        0.001,
        "epsilon of that evaluation for discrete actions, the offline runs' evaluation epsilon (default: 0.001)",
    )
    overwrite: bool = collect_option(False, "replace an existing local dataset with this id", in_file=False)


def collect_key(field: dataclasses.Field) -> str:
    """A :class:`CollectRequest` field's name in a config file or sweep spec."""
    return field.metadata.get("key") or field.name


def collect_file_keys() -> dict[str, type | tuple[type, ...]]:
    """The keys of ``collect --config FILE``, in the fields' order, and the TOML types each takes:
    its type, a float also as an integer and, where its flag parses text (``utd = "1/4"``), as a string."""
    hints = typing.get_type_hints(CollectRequest)
    keys: dict[str, type | tuple[type, ...]] = {}
    for field in dataclasses.fields(CollectRequest):
        if not field.metadata.get("in_file", True):
            continue
        kind = base_type(hints[field.name])
        if kind is float:
            kind = (int, float, str) if field.metadata.get("parse") else (int, float)
        keys[collect_key(field)] = kind
    return keys
