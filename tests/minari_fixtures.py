"""Small real Minari datasets, recorded with ``minari.DataCollector`` inside the tests."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np


def record_random_dataset(dataset_id: str, env_id: str, steps: int, seed: int = 0, **make_kwargs) -> None:
    """Record ``steps`` random-policy steps of ``env_id`` as the local Minari dataset ``dataset_id``."""
    import minari

    env = minari.DataCollector(gym.make(env_id, **make_kwargs))
    env.reset(seed=seed)
    env.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset(seed=int(rng.integers(2**31)))
    env.create_dataset(dataset_id=dataset_id, algorithm_name="random", author="offline_gitd tests")
    env.close()


def record_into_new_root(root: Path, dataset_id: str, env_id: str, steps: int) -> Path:
    """Record a random dataset under a fresh Minari root ``root`` (for a module-scoped fixture);
    ``MINARI_DATASETS_PATH`` is set only while recording."""
    import pytest

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(root))
        record_random_dataset(dataset_id, env_id, steps=steps)
    return root
