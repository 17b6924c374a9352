"""RLDS-shaped episodes (``steps`` with is_first / is_last / is_terminal), without the ``rlds`` lib.

The ``rlds`` package does not import with current TensorFlow (docs/getting-started.md#install), yet
TFDS serves RL Unplugged as RLDS episodes (``rlu_atari_checkpoints_ordered``) and other tools
expect that shape. An episode here is a plain dict: episode-level fields plus ``steps``, a dict
of per-step numpy arrays, following TFDS's RLU Atari conversion
(``tensorflow_datasets/rl_unplugged/atari_utils.py``, ``atari_example_to_rlds``, checked against
it by ``tests/data/test_rlu_tfds.py``): ``observation`` uint8 [T, 84, 84, 1], ``action``, ``reward``
(unclipped), ``discount``, ``is_first`` (step 0), ``is_last`` (step T-1) and ``is_terminal``
(step T-1 when RLU's last discount is 0).

``discount`` is not RLU's array as stored: for a terminal episode TFDS moves the discounts one
step earlier (``discounts[1:] + [0]``), reading the last step as the terminal observation with no
valid transition, so the last two discounts are 0. A truncated episode keeps its discounts.
:class:`~offline_gitd.data.rlu.RLUEpisode` keeps RLU's layout (``d_t`` is the discount of the
transition that leaves ``o_t``); :func:`rlu_episode_from_rlds` moves them back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from offline_gitd.data.rlu import RLUEpisode

STEP_KEYS = ("observation", "action", "reward", "discount", "is_first", "is_last", "is_terminal")


def _tfds_discounts(discounts: np.ndarray, terminal: bool) -> np.ndarray:
    """RLU discounts in TFDS's RLDS layout: moved one step earlier when the episode is terminal."""
    if not terminal:
        return discounts
    return np.concatenate([discounts[1:], np.zeros(1, discounts.dtype)])


def _rlu_discounts(discounts: np.ndarray, terminal: bool) -> np.ndarray:
    """Inverse of :func:`_tfds_discounts`.

    TFDS drops RLU's first discount of a terminal episode; it is 1 (only an episode's last
    transition can end it) unless the episode has one step, whose only discount is the terminal 0.
    """
    if not terminal:
        return discounts
    restored = np.concatenate([np.ones(1, discounts.dtype), discounts[:-1]])
    restored[-1] = 0.0
    return restored


def rlds_episode(episode: RLUEpisode) -> dict[str, Any]:
    """The RLDS view of one RL Unplugged episode, as TFDS's ``rlu_atari_checkpoints_ordered`` gives it.

    Arrays are views, not copies, where possible (a terminal episode's discounts are a new array).
    """
    length = len(episode.actions)
    is_first = np.zeros(length, bool)
    is_last = np.zeros(length, bool)
    is_first[:1] = True
    is_last[-1:] = True
    is_terminal = is_last & (episode.discounts == 0)
    return {
        "checkpoint_id": episode.checkpoint_idx,
        "episode_id": episode.episode_idx,
        "episode_return": episode.episode_return,
        "steps": {
            "observation": episode.frames[..., None],
            "action": episode.actions,
            "reward": episode.unclipped_rewards,
            "discount": _tfds_discounts(episode.discounts, bool(is_terminal.any())),
            "is_first": is_first,
            "is_last": is_last,
            "is_terminal": is_terminal,
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
    """Inverse of :func:`rlds_episode`, for episodes from it or from TFDS.

    The discounts go back to RLU's layout and the clipped rewards are recomputed by clipping the
    (unclipped) rewards to [-1, 1]. Raises ``ValueError`` where RLU's terminal flag (the last
    discount being 0) and RLDS's ``is_terminal`` could silently disagree: ``is_terminal`` set
    before the last step, ``is_terminal`` not matching the last discount, or a terminal episode
    whose discounts are not in TFDS's layout (second-to-last discount not 0).
    """
    steps = _stacked_steps(episode["steps"])
    discounts = steps["discount"].astype(np.float32).reshape(-1)
    is_terminal = steps["is_terminal"].astype(bool).reshape(-1)
    if is_terminal[:-1].any():
        raise ValueError(
            f"is_terminal set before the last step (step {int(np.argmax(is_terminal))} of {len(discounts)})"
        )
    terminal = bool(is_terminal[-1:].any())
    if terminal != (bool(len(discounts)) and float(discounts[-1]) == 0.0):
        raise ValueError("is_terminal disagrees with the last discount being 0")
    if terminal and len(discounts) > 1 and float(discounts[-2]) != 0.0:
        raise ValueError("terminal episode's discounts are not in TFDS's layout (second-to-last discount not 0)")
    rewards = steps["reward"].astype(np.float32).reshape(-1)
    clipped = np.clip(rewards, -1.0, 1.0)
    return RLUEpisode(
        checkpoint_idx=int(episode["checkpoint_id"]),
        episode_idx=int(episode["episode_id"]),
        episode_return=float(episode["episode_return"]),
        clipped_episode_return=float(clipped.sum()),
        frames=steps["observation"].reshape(len(discounts), 84, 84).astype(np.uint8, copy=False),
        actions=steps["action"].astype(np.int64).reshape(-1),
        unclipped_rewards=rewards,
        clipped_rewards=clipped,
        discounts=_rlu_discounts(discounts, terminal),
    )
