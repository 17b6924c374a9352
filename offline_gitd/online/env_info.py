"""What the online loop knows about its environment, learned once before anything is built.

Kept apart from :mod:`offline_gitd.online.train` (which builds and checks) and
:mod:`offline_gitd.online.loop` (which steps), since both need it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from offline_gitd.envs.atari import RLU_GAMES, resolve_game
from offline_gitd.envs.images import MINATAR_PREFIX
from offline_gitd.envs.make import ATARI_PREFIX, SpaceInfo, env_profile, make_env
from offline_gitd.errors import UsageError

ALGO_ACTIONS = {"dqn": "discrete", "sac": "continuous"}


class EnvInfo(NamedTuple):
    """What the online loop needs to know about its environment."""

    env_id: str  # as given to make_env
    domain: str  # atari | minatar | gym | continuous: selects the defaults
    suite: str  # leaderboard suite: atari | minatar | gym | mujoco
    name: str  # leaderboard env: the game (Pong, Breakout-v1) or the gymnasium id
    spaces: SpaceInfo
    images: bool = False  # whole H x W x C uint8 images (MinAtar), stored and fed as they are

    @property
    def frames(self) -> bool:
        """Atari: the replay stores single 84x84 frames and stacks 4 when sampling."""
        return self.domain == "atari"

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One network input: stacked frames or whole images as they are, vectors flattened."""
        if self.frames or self.images:
            return tuple(self.spaces.obs_shape)
        return (int(np.prod(self.spaces.obs_shape)),)


def inspect_env(env_id: str, algo: str) -> EnvInfo:
    """Build the env once to learn its spaces; refuse ids and action spaces the algo can't use."""
    game = env_id[len(ATARI_PREFIX) :] if env_id.startswith(ATARI_PREFIX) else env_id if env_id in RLU_GAMES else None
    env = make_env(env_id, 0)
    try:
        profile = env_profile(env, env_id)  # the domain rule offline datasets follow too
        spaces = profile.spaces
        images = game is None and profile.images
        if game is not None:
            domain, suite, name = "atari", "atari", resolve_game(game)[len("ALE/") : -len("-v5")]
        elif env_id.startswith(MINATAR_PREFIX):
            domain, suite, name = "minatar", "minatar", env_id[len(MINATAR_PREFIX) :]
        else:
            entry = str(gym.spec(env_id).entry_point)
            domain = profile.domain  # continuous | gym
            suite, name = ("mujoco" if "mujoco" in entry else "gym"), env_id
    finally:
        env.close()
    if spaces.action_kind != ALGO_ACTIONS[algo]:
        other = "sac" if algo == "dqn" else "dqn"
        raise UsageError(
            f"{env_id} has {spaces.action_kind} actions; online {algo} needs {ALGO_ACTIONS[algo]} ones (use online {other})"
        )
    return EnvInfo(env_id, domain, suite, name, spaces, images)


def obs_example(info: EnvInfo) -> np.ndarray:
    """One network input, batch of 1: uint8 [1, 84, 84, 4] frames, uint8 [1, H, W, C] images or
    float32 [1, d] vectors."""
    return np.zeros((1, *info.input_shape), np.uint8 if info.frames or info.images else np.float32)


def make_online_env(cfg: Any, info: EnvInfo, seed: int, **make_kw: Any) -> gym.Env:
    """Learning sees unclipped env rewards; clipping happens when storing (returns stay scores).
    ``make_kw`` reaches the env's constructor (``offline_gitd evaluate --video`` renders)."""
    if info.frames:
        return make_env(info.env_id, seed, max_steps=cfg.horizon, **make_kw)
    return make_env(info.env_id, seed, **({"max_episode_steps": cfg.horizon} if cfg.horizon else {}), **make_kw)
