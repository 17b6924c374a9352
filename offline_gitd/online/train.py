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
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from offline_gitd.envs.atari import RLU_GAMES, resolve_game
from offline_gitd.envs.make import ATARI_PREFIX, SpaceInfo, describe_spaces, make_env
from offline_gitd.errors import ConfigError, UsageError
from offline_gitd.learners.family import Family, make_continuous_family, make_discrete_family
from offline_gitd.online.config import OnlineConfig
from offline_gitd.scalars import Outputs

ALGO_ACTIONS = {"dqn": "discrete", "sac": "continuous"}


class EnvInfo(NamedTuple):
    """What the online loop needs to know about its environment."""

    env_id: str  # as given to make_env
    domain: str  # atari | gym | continuous: selects the defaults
    suite: str  # leaderboard suite: atari | gym | mujoco
    name: str  # leaderboard env: the game (Pong) or the gymnasium id
    spaces: SpaceInfo

    @property
    def frames(self) -> bool:
        """Atari: the replay stores single 84x84 frames and stacks 4 when sampling."""
        return self.domain == "atari"


def inspect_env(env_id: str, algo: str) -> EnvInfo:
    """Build the env once to learn its spaces; refuse ids and action spaces the algo can't use."""
    game = env_id[len(ATARI_PREFIX) :] if env_id.startswith(ATARI_PREFIX) else env_id if env_id in RLU_GAMES else None
    env = make_env(env_id, 0)
    try:
        spaces = describe_spaces(env)
        if game is not None:
            domain, suite, name = "atari", "atari", resolve_game(game)[len("ALE/") : -len("-v5")]
        else:
            continuous = spaces.action_kind == "continuous"
            entry = str(gym.spec(env_id).entry_point)
            domain = "continuous" if continuous else "gym"
            suite, name = ("mujoco" if "mujoco" in entry else "gym"), env_id
    finally:
        env.close()
    if spaces.action_kind != ALGO_ACTIONS[algo]:
        other = "sac" if algo == "dqn" else "dqn"
        raise UsageError(
            f"{env_id} has {spaces.action_kind} actions; online {algo} needs {ALGO_ACTIONS[algo]} ones (use online {other})"
        )
    return EnvInfo(env_id, domain, suite, name, spaces)


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


def obs_example(info: EnvInfo) -> np.ndarray:
    """One network input, batch of 1: uint8 [1, 84, 84, 4] frames or float32 [1, d] vectors."""
    if info.frames:
        return np.zeros((1, *info.spaces.obs_shape), np.uint8)
    return np.zeros((1, int(np.prod(info.spaces.obs_shape))), np.float32)


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
    written until the flags, the run directory, the env and the networks have been checked."""
    from offline_gitd.learners.rundir import absolute, check_run_dir
    from offline_gitd.online.loop import run_online

    if cfg.out:
        cfg = dataclasses.replace(cfg, out=absolute(cfg.out))
        check_run_dir(Path(cfg.out), resume, overwrite)
    cfg, info = resolve_config(cfg)
    return run_online(
        cfg,
        info,
        build_family(cfg, info),
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
    from offline_gitd.learners.rundir import resumed_config

    return resumed_config(OnlineConfig, run_dir, given, "steps", ("out",))
