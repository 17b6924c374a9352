"""``config -> run dir`` for the online learners (DESIGN §5): DQN family and SAC family.

Everything a user can get wrong (unknown env, DQN on continuous actions, SAC on discrete ones, a
bad UTD, a CNN torso on vector observations) is checked here, before any run directory or network
exists. The learner families are the offline ones with ``cql_alpha = 0``: TD -> DQN / SAC,
TDRC -> QRC / SACRC, i-TD -> i-DQN / i-SAC, Gi-TD -> Gi-DQN / Gi-SAC.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from offline_gitd.errors import ConfigError
from offline_gitd.learners.family import Family, make_continuous_family, make_discrete_family
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.env_info import EnvInfo, inspect_env, obs_example
from offline_gitd.rundir.flags import Outputs


def resolve_config(cfg: OnlineConfig) -> tuple[OnlineConfig, EnvInfo]:
    """Validate, look at the env, fill the domain's defaults; raises before any work is done."""
    if not cfg.env:
        raise ConfigError("--env ENV_ID is required")
    info = inspect_env(cfg.env, cfg.algo)
    cfg = cfg.resolve(info.domain)
    if info.frames == (cfg.torso == "mlp"):
        need = "a convolutional torso (nature, impala, impala-gap)" if info.frames else "--torso mlp"
        raise ConfigError(f"{cfg.env} has {'image' if info.frames else 'vector'} observations: use {need}")
    return cfg, info


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


def train(
    cfg: OnlineConfig,
    *,
    resume: bool = False,
    progress: bool = True,
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
    overwrite: bool = False,
    command_line: Sequence[str] | None = None,
    outputs: Outputs | None = None,
) -> Path:
    """Run ``cfg`` (resolving the env's defaults first) and return the run directory; nothing is
    written until the flags, the run directory, the env and the networks have been checked. With
    ``cfg.init_from`` a new run starts from that offline run's checkpoint
    (:mod:`offline_gitd.online.init_from`)."""
    from offline_gitd.online.loop import run_online
    from offline_gitd.rundir.files import absolute, check_run_dir

    if cfg.out:
        cfg = dataclasses.replace(cfg, out=absolute(cfg.out))
        check_run_dir(Path(cfg.out), resume, overwrite)
    cfg, info = resolve_config(cfg)
    origin = None
    if cfg.init_from and not resume:  # a resumed run continues from its own checkpoint
        from offline_gitd.online.init_from import load_origin, resolve_origin

        cfg = resolve_origin(cfg)
        family = build_family(cfg, info)
        origin = load_origin(cfg, info, family)
    else:
        family = build_family(cfg, info)
    return run_online(
        cfg,
        info,
        family,
        origin=origin,
        resume=resume,
        progress=progress,
        wrap_env=wrap_env,
        overwrite=overwrite,
        command_line=command_line,
        outputs=outputs,
    )


def resume_config(run_dir: Path, given: Mapping[str, Any] | None = None) -> OnlineConfig:
    """The saved config of the run in ``run_dir`` (wherever it now is), with the flags ``given``
    on the command line: ``--steps`` may extend the run, any other difference is refused."""
    from offline_gitd.rundir.files import resumed_config

    return resumed_config(OnlineConfig, run_dir, given, "steps", ("out",))
