"""Checkpoint boundaries of a DQN-replay Minari dataset: the RL Unplugged protocol on Minari.

RL Unplugged's Atari data is a DQN agent's whole replay, logged in order and cut into checkpoints
(one per million env steps); the paper trains on "the first p% of each checkpoint". ``offline_gitd
collect ENV --policy dqn --checkpoint-every N`` records the same thing into a Minari dataset and
keeps the cut in the dataset's metadata (``metadata.json``, which minari 0.5.4 lets a dataset
extend), so that ``train --dataset minari:ID --fraction p`` keeps the first p% of each checkpoint's
transitions exactly as for RL Unplugged (docs/minatar.md):

- ``checkpoint_every``: N, the env steps per checkpoint;
- ``checkpoint_episodes``: the index of the first episode of each checkpoint (an episode belongs
  to the checkpoint during which its first step was taken: Minari keeps episodes whole);
- ``checkpoint_returns``: the behaviour agent's mean return over the episodes of each checkpoint,
  as logged (exploration included): the equivalent of RL Unplugged's DQN-replay scores.

A dataset without these keys keeps the plain reading: the first p% of all its episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

CHECKPOINT_EVERY = "checkpoint_every"
CHECKPOINT_EPISODES = "checkpoint_episodes"
CHECKPOINT_RETURNS = "checkpoint_returns"


def checkpoint_starts(episode_lengths: Sequence[int], every: int) -> list[int]:
    """The first episode of each checkpoint of ``every`` env steps, for episodes of the given
    lengths in logged order; a checkpoint during which no episode started gets none (it is not
    listed), so the starts strictly increase."""
    if every < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {every}")
    first_steps = np.concatenate(([0], np.cumsum(episode_lengths)[:-1])).astype(np.int64)
    checkpoint = first_steps // every
    return [int(i) for i in np.flatnonzero(np.diff(checkpoint, prepend=-1))]


def checkpoint_metadata(episode_lengths: Sequence[int], episode_returns: Sequence[float], every: int) -> dict[str, Any]:
    """The metadata keys above for episodes of the given lengths and returns, in logged order."""
    starts = checkpoint_starts(episode_lengths, every)
    bounds = [*starts, len(episode_lengths)]
    returns = np.asarray(episode_returns, np.float64)
    means = [float(returns[low:high].mean()) for low, high in zip(bounds[:-1], bounds[1:], strict=True)]
    return {CHECKPOINT_EVERY: int(every), CHECKPOINT_EPISODES: starts, CHECKPOINT_RETURNS: means}


def checkpoint_episodes(dataset: Any) -> list[np.ndarray] | None:
    """The episode indices of each checkpoint of a Minari dataset, or ``None`` when it records
    no checkpoints."""
    starts = dataset.storage.metadata.get(CHECKPOINT_EPISODES)
    if starts is None:
        return None
    episodes = np.asarray(dataset.episode_indices)
    bounds = [*starts, len(episodes)]
    return [episodes[low:high] for low, high in zip(bounds[:-1], bounds[1:], strict=True)]
