"""RLDS-shaped episodes (``steps`` with is_first / is_last / is_terminal), without the ``rlds`` lib.

The ``rlds`` package does not import with current TensorFlow (REFERENCE.md, "Dependencies"), yet
TFDS serves RL Unplugged as RLDS episodes (``rlu_atari_checkpoints_ordered``) and other tools
expect that shape. An episode here is a plain dict: episode-level fields plus ``steps``, a dict
of per-step numpy arrays, following TFDS's RLU Atari conversion: ``observation`` uint8
[T, 84, 84, 1], ``action``, ``reward`` (unclipped), ``discount``, ``is_first`` (step 0),
``is_last`` (step T-1) and ``is_terminal`` (step T-1 when its discount is 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from offline_gitd.data.rlu import RLUEpisode

STEP_KEYS = ("observation", "action", "reward", "discount", "is_first", "is_last", "is_terminal")


def rlds_episode(episode: RLUEpisode) -> dict[str, Any]:
    """The RLDS view of one RL Unplugged episode (arrays are views, not copies, where possible)."""
    length = len(episode.actions)
    is_first = np.zeros(length, bool)
    is_last = np.zeros(length, bool)
    is_first[:1] = True
    is_last[-1:] = True
    return {
        "checkpoint_id": episode.checkpoint_idx,
        "episode_id": episode.episode_idx,
        "episode_return": episode.episode_return,
        "steps": {
            "observation": episode.frames[..., None],
            "action": episode.actions,
            "reward": episode.unclipped_rewards,
            "discount": episode.discounts,
            "is_first": is_first,
            "is_last": is_last,
            "is_terminal": is_last & (episode.discounts == 0),
        },
    }


def iter_rlds_episodes(episodes: Iterable[RLUEpisode]) -> Iterator[dict[str, Any]]:
    """RLDS view of a stream of episodes, e.g. ``iter_rlds_episodes(iter_rlu_episodes(shard))``."""
    for episode in episodes:
        yield rlds_episode(episode)


def _stacked_steps(steps: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Per-step arrays from either a dict of arrays or an iterable of step dicts (TFDS nests a
    ``tf.data.Dataset`` of steps, which ``tfds.as_numpy`` turns into the latter)."""
    if isinstance(steps, Mapping):
        return {key: np.asarray(steps[key]) for key in STEP_KEYS}
    rows = list(steps)
    return {key: np.asarray([row[key] for row in rows]) for key in STEP_KEYS}


def rlu_episode_from_rlds(episode: Mapping[str, Any]) -> RLUEpisode:
    """Inverse of :func:`rlds_episode`; the clipped rewards are recomputed by clipping to [-1, 1].

    Raises ``ValueError`` when ``is_terminal`` disagrees with the last discount, the one place
    where RLU's terminal flag and RLDS's could silently disagree.
    """
    steps = _stacked_steps(episode["steps"])
    discounts = steps["discount"].astype(np.float32)
    terminal_from_discount = bool(len(discounts)) and float(discounts[-1]) == 0.0
    if bool(steps["is_terminal"].any()) != terminal_from_discount:
        raise ValueError("is_terminal disagrees with the last discount being 0")
    rewards = steps["reward"].astype(np.float32)
    clipped = np.clip(rewards, -1.0, 1.0)
    return RLUEpisode(
        checkpoint_idx=int(episode["checkpoint_id"]),
        episode_idx=int(episode["episode_id"]),
        episode_return=float(episode["episode_return"]),
        clipped_episode_return=float(clipped.sum()),
        frames=steps["observation"].reshape(len(discounts), 84, 84).astype(np.uint8, copy=False),
        actions=steps["action"].astype(np.int64),
        unclipped_rewards=rewards,
        clipped_rewards=clipped,
        discounts=discounts,
    )
