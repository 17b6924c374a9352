"""``config -> run dir`` for the online learners (docs/architecture.md#a-run-is-a-function-of-its-config): DQN family and SAC family.

Everything a user can get wrong (unknown env, DQN on continuous actions, SAC on discrete ones, a
bad UTD, a CNN torso on vector observations) is checked here, before any run directory or network
exists. The learner families are the offline ones with ``cql_alpha = 0``: TD -> DQN / SAC,
TDRC -> QRC / SACRC, i-TD -> i-DQN / i-SAC, Gi-TD -> Gi-DQN / Gi-SAC.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from offline_gitd.errors import ConfigError
from offline_gitd.learners.family import Family, make_continuous_family, make_discrete_family
from offline_gitd.online.config import OnlineConfig, check_compiled_loop, choose_loop
from offline_gitd.online.env_info import EnvInfo, inspect_env, obs_example
from offline_gitd.rundir.flags import Outputs, RunFlags

if TYPE_CHECKING:
    from offline_gitd.online.compiled import CompiledDQN


def resolve_config(cfg: OnlineConfig) -> tuple[OnlineConfig, EnvInfo]:
    """Validate, look at the env, fill the domain's defaults; raises before any work is done."""
    if not cfg.env:
        raise ConfigError("--env ENV_ID is required")
    from offline_gitd.networks import check_torso, torso_for_shape

    info = inspect_env(cfg.env, cfg.algo)
    if cfg.torso is None and info.images:  # image envs outside the tables: the torso the images call for
        cfg = dataclasses.replace(cfg, torso=torso_for_shape(info.input_shape))
    auto = cfg.loop == "auto"
    cfg = cfg.resolve(info.domain)
    if auto:  # the fallback's reason, once, where a run is set up
        note = choose_loop(dataclasses.replace(cfg, loop="auto"))[1]
        if note:
            print(note, file=sys.stderr)
    check_torso(cfg.torso, info.input_shape, cfg.env)
    return cfg, info


def check_makes_updates(cfg: OnlineConfig) -> None:
    """Refuse a resolved config whose run would end before its first update
    (docs/online.md#runs-that-would-not-train): its learning curve would be a random policy's and
    its rows would pass on a board as a trained method's. ``--steps`` must exceed the initial random
    samples by at least one update's worth of steps (``1/utd`` of them for ``--utd 1/n``)."""
    from offline_gitd.online.schedules import total_updates, utd_fraction

    utd = utd_fraction(cfg.utd)
    if total_updates(cfg.steps, utd, cfg.initial_samples) > 0:
        return
    first = cfg.initial_samples + max(1, math.ceil(1 / utd))
    raise ConfigError(
        f"online {cfg.algo} would make no update: --steps {cfg.steps} does not exceed its "
        f"{cfg.initial_samples} initial random samples"
        + (f" by an update's {math.ceil(1 / utd)} steps (--utd 1/{math.ceil(1 / utd)})" if utd < 1 else "")
        + f"; its first update comes at step {first} (raise --steps to {first} or more, or lower --initial-samples)"
    )


def build_family(cfg: OnlineConfig, info: EnvInfo) -> Family:
    """The discrete (DQN-family) or continuous (SAC-family) learner, without CQL."""
    common = dict(mlp_hidden=cfg.hidden_sizes, lr=cfg.lr, adam_eps=cfg.adam_eps, cql_alpha=0.0)
    if cfg.algo == "dqn":
        return make_discrete_family(
            cfg.critic_config(),
            info.spaces.action_size,
            obs_example(info),
            torso=cfg.torso,
            head_hidden=cfg.head_hidden,
            **common,
        )
    # MuJoCo table: actor FC 256 - FC 256 like the critics; one --mlp-hidden sets both.
    return make_continuous_family(
        cfg.critic_config(),
        info.spaces.action_size,
        obs_example(info),
        info.spaces.action_bounds,
        actor_hidden=cfg.hidden_sizes,
        **common,
    )


def compiled_dqn(cfg: OnlineConfig) -> tuple[CompiledDQN, OnlineConfig]:
    """The compiled loop of ``online dqn`` with ``cfg`` (:mod:`offline_gitd.online.compiled`), resolved
    and its family built as :func:`train` builds them, without a run directory: what the speed
    benchmarks and the tests drive chunk by chunk. Refuses what the compiled loop does not do
    (before gymnasium builds the env)."""
    from offline_gitd.online.compiled import compiled_loop

    check_compiled_loop(cfg)
    cfg, info = resolve_config(cfg)
    return compiled_loop(cfg, build_family(cfg, info), info), cfg


def train(
    cfg: OnlineConfig,
    *,
    resume: bool = False,
    progress: bool = True,
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
    overwrite: bool = False,
    command_line: Sequence[str] | None = None,
    outputs: Outputs | None = None,
    trust_pickles: bool = False,
    require_updates: bool = True,
) -> Path:
    """Run ``cfg`` (resolving the env's defaults first) and return the run directory; nothing is
    written until the flags, the run directory, the env and the networks have been checked, and
    the run directory is locked for this process alone until the run ends (docs/locks.md).
    ``trust_pickles``: a resume may read the pickled host states of older versions (they can run
    code when read: docs/bounds.md#run-directories-are-data). With ``cfg.init_from`` a new run starts
    from that offline run's checkpoint (:mod:`offline_gitd.online.init_from`). ``cfg.loop``
    picks the loop: the Python one (:mod:`offline_gitd.online.loop`) or the compiled one
    (:mod:`offline_gitd.online.compiled_run`), in the same run directory. A new run that would make
    no update is refused (:func:`check_makes_updates`) unless ``require_updates`` is False: a
    ``collect``'s behaviour run is a dataset's, not a result (``--policy random`` is the loop with
    every step a random sample, on purpose); a board refuses such a run's rows whichever way it was made."""
    from offline_gitd.online.lifecycle import held_run_dir
    from offline_gitd.online.loop import run_online

    flags = RunFlags(resume, progress, overwrite, command_line, outputs)
    if wrap_env is not None and cfg.loop == "auto":  # only the Python loop steps a gymnasium env to wrap
        cfg = dataclasses.replace(cfg, loop="python")
    # the run's one writer (docs/locks.md), from its first check to its last row
    with held_run_dir(cfg, flags) as cfg:
        cfg, info = resolve_config(cfg)
        origin = None
        starts_from = bool(cfg.init_from) and not resume  # a resumed run continues from its own checkpoint
        if starts_from:
            from offline_gitd.online.init_from import load_origin, resolve_origin

            cfg = resolve_origin(cfg)
        if require_updates and not resume:  # a resume goes on as its run started (a collect's behaviour run may)
            check_makes_updates(cfg)
        if starts_from:
            family = build_family(cfg, info)
            origin = load_origin(cfg, info, family)
        else:
            family = build_family(cfg, info)
        if cfg.loop == "compiled":
            if wrap_env is not None:
                raise ConfigError("the compiled loop steps its own JAX env: there is no gymnasium env to wrap")
            from offline_gitd.online.compiled_run import run_compiled

            return run_compiled(cfg, info, family, flags)
        return run_online(cfg, info, family, flags, wrap_env=wrap_env, trust_pickles=trust_pickles, origin=origin)


def resume_config(run_dir: Path, given: Mapping[str, Any] | None = None) -> OnlineConfig:
    """The saved config of the run in ``run_dir`` (wherever it now is), with the flags ``given``
    on the command line: ``--steps`` may extend the run, any other difference is refused."""
    from offline_gitd.rundir.files import resumed_config

    return resumed_config(OnlineConfig, run_dir, given, "steps", ("out",))
