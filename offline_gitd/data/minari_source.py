"""Any local Minari dataset as an :class:`~offline_gitd.data.episode_store.EpisodeStore` (docs/datasets.md).

Minari episodes carry T + 1 observations and separate ``terminations`` and ``truncations``
(docs/datasets.md#minari). Both are kept: the final observation becomes its episode's last row, so
a truncated episode bootstraps from it and a terminated one does not (its last transition is
flagged terminal; termination wins when both flags are set). Image observations (H x W x C, uint8
or bool: :func:`~offline_gitd.envs.images.is_image_space`) stay images, uint8 (bool as 0/1), one
per row and never stacked (a MinAtar board already encodes motion in its channels). Other
observations become float32 vectors: Dict ones are flattened with ``gymnasium.spaces.flatten`` (the
order the environment's flattening wrappers use). Discrete actions become int32, Box actions
float32 vectors.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium
import numpy as np

from offline_gitd.data.episode_store import EpisodeStore, fraction_rows
from offline_gitd.envs.images import is_image_space


def episode_observations(space: gymnasium.Space, observations: Any) -> np.ndarray:
    """One episode's ``T + 1`` observations as the replay stores them: uint8 images
    ``[T + 1, H, W, C]`` for an image space, float32 vectors ``[T + 1, d]`` otherwise."""
    if is_image_space(space):
        return np.asarray(observations).astype(np.uint8)
    return flatten_observations(space, observations)


# Rows allocated before the second episode: a guess from the first episode's length and the number
# of episodes selected; the store doubles past it. The metadata's step count is not used: a damaged
# or hostile metadata.json can claim 10**12 steps (terabytes up front) or a step count that is no
# number, and the episodes themselves say how long they are.
MAX_ROWS_UP_FRONT = 1 << 24


def flatten_observations(space: gymnasium.Space, observations: Any) -> np.ndarray:
    """``[T + 1, d]`` float32 vectors from one episode's observations in ``space``'s layout.

    Box observations are reshaped directly; others (Dict, Tuple, Discrete...) go step by step
    through ``gymnasium.spaces.flatten``, which alone knows every space's flattening order.
    """
    if isinstance(space, gymnasium.spaces.Box):
        array = np.asarray(observations, dtype=np.float32)
        return array.reshape(len(array), -1)
    steps = _num_steps(observations)
    return np.stack([gymnasium.spaces.flatten(space, _step(observations, t)) for t in range(steps)]).astype(np.float32)


def _num_steps(observations: Any) -> int:
    """Length of a possibly nested (dict / tuple) batch of per-step arrays."""
    if isinstance(observations, dict):
        return _num_steps(next(iter(observations.values())))
    if isinstance(observations, tuple):
        return _num_steps(observations[0])
    return len(observations)


def _step(observations: Any, t: int) -> Any:
    """Step ``t`` of a possibly nested batch, in the nesting gymnasium's spaces expect."""
    if isinstance(observations, dict):
        return {key: _step(value, t) for key, value in observations.items()}
    if isinstance(observations, tuple):
        return tuple(_step(value, t) for value in observations)
    return observations[t]


def _actions(space: gymnasium.Space, actions: Any) -> np.ndarray:
    """Discrete actions as int32 [T]; anything else flattened to float32 [T, act_dim]."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return np.asarray(actions, dtype=np.int64).reshape(-1).astype(np.int32)
    if isinstance(space, gymnasium.spaces.Box):
        array = np.asarray(actions, dtype=np.float32)
        return array.reshape(len(array), -1)
    raise TypeError(f"unsupported Minari action space {space}")


def minari_store(dataset: Any, episode_indices: Iterable[int] | None = None) -> EpisodeStore:
    """Load a Minari dataset (an id of a local dataset, or a ``MinariDataset``) into a store.

    ``episode_indices`` restricts it to some episodes (e.g. a fraction for the offline Gym
    ablation). An episode both terminated and truncated at its last step (the time limit hit
    on a terminal step) counts as terminated: its true next value is 0, so it must not bootstrap.
    A termination before the last step raises ``ValueError`` (it would split an episode).
    """
    import minari

    if isinstance(dataset, str):
        dataset = minari.load_dataset(dataset)
    obs_space, action_space = dataset.observation_space, dataset.action_space
    selected = None if episode_indices is None else list(episode_indices)
    store: EpisodeStore | None = None
    for episode in dataset.iterate_episodes(selected):
        observations = episode_observations(obs_space, episode.observations)
        actions = _actions(action_space, episode.actions)
        if store is None:
            store = EpisodeStore(
                observations.shape[1:],
                observations.dtype,
                actions.shape[1:],
                actions.dtype,
                capacity=min((len(actions) + 1) * (len(selected) if selected else 1), MAX_ROWS_UP_FRONT),
            )
        store.add_episode(observations, actions, np.asarray(episode.rewards), episode.terminations)
    if store is None:
        raise ValueError("the Minari dataset selection holds no episode")
    return store


def minari_checkpoint_store(dataset: Any, checkpoints: Sequence[np.ndarray], fraction: float) -> EpisodeStore:
    """The first ``fraction`` of each checkpoint's transitions (the paper's RL Unplugged protocol,
    :mod:`offline_gitd.data.minari_checkpoints`), in logged order.

    Checkpoint ``c`` keeps its first ``K_c = ceil(fraction * steps_c)`` transitions
    (:func:`~offline_gitd.data.episode_store.fraction_rows`): whole episodes, then the first transitions of
    the episode that ``K_c`` falls in, followed by the next observation as a bootstrap-only row (a
    truncation, as :func:`~offline_gitd.data.episode_store.first_fraction` cuts an RLU checkpoint).
    """
    obs_space, action_space = dataset.observation_space, dataset.action_space
    store: EpisodeStore | None = None
    for episodes in checkpoints:
        lengths = [int(meta["total_steps"]) for meta in dataset.storage.get_episode_metadata(episodes)]
        keep = fraction_rows(fraction, sum(lengths))
        ends = np.cumsum(lengths)
        taken = episodes[: int(np.searchsorted(ends, keep)) + 1]
        for episode, start in zip(dataset.iterate_episodes(taken), ends - lengths, strict=False):
            steps = min(len(episode.rewards), keep - int(start))
            observations = episode_observations(obs_space, episode.observations)[: steps + 1]
            actions = _actions(action_space, episode.actions)[:steps]
            terminations = np.asarray(episode.terminations)[:steps]
            if store is None:
                store = EpisodeStore(
                    observations.shape[1:],
                    observations.dtype,
                    actions.shape[1:],
                    actions.dtype,
                    capacity=dataset.total_steps + dataset.total_episodes,
                )
            store.add_episode(observations, actions, np.asarray(episode.rewards)[:steps], terminations)
    if store is None:
        raise ValueError("the Minari dataset selection holds no episode")
    return store
