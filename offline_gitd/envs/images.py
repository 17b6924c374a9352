"""Image observations as the learners take them, and MinAtar's gymnasium ids (docs/minatar.md).

An observation space is an *image* when it is a ``Box`` of shape H x W x C with dtype uint8 or
bool (ALE's 210x160x3 RGB, MinAtar's 10x10xC boards): such observations reach the learners as
uint8 images, never flattened into vectors. Bool images (MinAtar) become uint8 0/1 through
:class:`Uint8Images`, a wrapper gymnasium records in the env's spec, so a Minari dataset written
from a wrapped env rebuilds the same wrapper when its environment is recovered.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

MINATAR_PREFIX = "MinAtar/"
UINT8_IMAGES_ENTRY_POINT = "offline_gitd.envs.images:Uint8Images"
# What a recorded dataset says of its observations, in its metadata rather than as this package's
# wrapper in its env spec, so that minari, gymnasium and the env's package alone recover its env.
OBSERVATION_LAYOUT = (
    "uint8 0/1 images, H x W x C: the env's bool observations as uint8 (numpy.asarray(obs, numpy.uint8)); "
    "recover_environment() gives the env's own bool observations"
)


def is_image_space(space: gym.Space) -> bool:
    """Whether ``space`` holds images: a 3-dim (H x W x C) uint8 or bool ``Box``."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3 and space.dtype in (np.uint8, np.bool_)


class Uint8Images(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Bool images as uint8 0/1 (the dtype every image takes on the host and on the device)."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.ObservationWrapper.__init__(self, env)
        self.observation_space = gym.spaces.Box(0, 1, env.observation_space.shape, np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation, dtype=np.uint8)


def as_uint8_images(env: gym.Env) -> gym.Env:
    """``env`` with bool image observations turned into uint8 0/1; any other env unchanged."""
    space = env.observation_space
    if is_image_space(space) and space.dtype == np.bool_:
        return Uint8Images(env)
    return env


def register_minatar() -> None:
    """Register MinAtar's ``MinAtar/{Game}-v0|v1`` ids with gymnasium (once).

    ``minatar`` 1.0.15 defines them in ``minatar.gym.register_envs`` without calling it on import,
    and imports matplotlib/seaborn: imported here, only when a MinAtar id is used.
    """
    if f"{MINATAR_PREFIX}Breakout-v1" in gym.registry:
        return
    import minatar.gym

    minatar.gym.register_envs()
