"""Episode storage: observations, actions, rewards and terminals by row, episodes as runs of rows (docs/datasets.md).

An :class:`EpisodeStore` is a sequence of *rows* grouped into contiguous episodes. Row ``x``
holds an observation and the action, reward and terminal flag of the transition that leaves it;
the transition's next observation is row ``x + 1`` of the same episode. So row ``x`` starts a
transition when ``x + 1`` is still in its episode, or when it is terminal (its next state does
not matter: the bootstrap is multiplied by 0). The last row of a truncated episode is an
observation only: it is the state the episode's last transition bootstraps from. Both layouts fit:

- RL Unplugged: T rows per episode; a terminal episode's last row is its terminal transition, a
  truncated episode's last row has no successor and only serves as a bootstrap state.
- Minari / online collection: T + 1 rows (the final observation is stored as its own row).

Rows are single Atari frames (uint8 [H, W]: stacked when sampling), whole images (uint8
[H, W, C], e.g. MinAtar boards: never stacked, returned as uint8) or vectors (float32 [d]).
:class:`SegmentedRows` reads several row arrays (one memory map per checkpoint) as one, and
:func:`first_fraction` is the paper's cut of a checkpoint. Sampling from a store is
:mod:`offline_gitd.data.replay`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


class SegmentedRows:
    """Several row arrays (e.g. one memory-mapped frame file per checkpoint) read as one.

    Fancy indexing gathers from each segment in turn, so 50 checkpoints' frames never need to be
    copied into one array.
    """

    def __init__(self, segments: Sequence[np.ndarray]) -> None:
        if not segments:
            raise ValueError("SegmentedRows needs at least one segment")
        self.segments = list(segments)
        lengths = [len(s) for s in self.segments]
        self.offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        self.shape = (int(self.offsets[-1]), *self.segments[0].shape[1:])
        self.dtype = self.segments[0].dtype
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        flat = rows.ravel()
        out = np.empty((len(flat), *self.shape[1:]), dtype=self.dtype)
        segment = np.searchsorted(self.offsets, flat, side="right") - 1
        for s in np.unique(segment):
            mask = segment == s
            out[mask] = self.segments[s][flat[mask] - self.offsets[s]]
        return out.reshape(*rows.shape, *self.shape[1:])


class EpisodeStore:
    """Observations, actions, rewards and terminal flags by row, with episode start rows.

    Build it empty and :meth:`add` transitions one at a time (online learners; the arrays grow by
    doubling), :meth:`add_episode` whole episodes, or wrap existing arrays without copying with
    :meth:`from_arrays` (the RLU cache's memory maps; then it is read-only).
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        obs_dtype: np.dtype | type = np.uint8,
        action_shape: tuple[int, ...] = (),
        action_dtype: np.dtype | type = np.int32,
        capacity: int = 1024,
    ) -> None:
        capacity = max(1, capacity)
        self._obs: np.ndarray | SegmentedRows = np.zeros((capacity, *obs_shape), obs_dtype)
        self._actions = np.zeros((capacity, *action_shape), action_dtype)
        self._rewards = np.zeros(capacity, np.float32)
        self._terminals = np.zeros(capacity, bool)
        self._starts = np.zeros(16, np.int64)
        self._num_rows = 0
        self._num_episodes = 0
        self._open = False  # whether the last episode may still get rows
        self._frozen = False

    @classmethod
    def from_arrays(
        cls,
        obs: np.ndarray | SegmentedRows,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminals: np.ndarray,
        episode_starts: np.ndarray,
    ) -> EpisodeStore:
        """Wrap per-row arrays (all of length R) and sorted episode start rows (first one 0)."""
        rows = len(obs)
        if not len(actions) == len(rewards) == len(terminals) == rows:
            raise ValueError("obs, actions, rewards and terminals need the same number of rows")
        starts = np.asarray(episode_starts, np.int64)
        if rows and (len(starts) == 0 or starts[0] != 0 or np.any(np.diff(starts) <= 0)):
            raise ValueError("episode_starts must begin at 0 and strictly increase")
        if len(starts) and starts[-1] >= rows:
            raise ValueError("an episode starts past the last row")
        store = cls.__new__(cls)
        store._obs = obs
        store._actions = np.asarray(actions)
        store._rewards = np.asarray(rewards, np.float32)
        store._terminals = np.asarray(terminals, bool)
        store._starts = starts
        store._num_rows = rows
        store._num_episodes = len(starts)
        store._open = False
        store._frozen = True
        return store

    @property
    def num_rows(self) -> int:
        return self._num_rows

    @property
    def num_episodes(self) -> int:
        return self._num_episodes

    @property
    def obs(self) -> np.ndarray | SegmentedRows:
        """Observations by row (frames uint8 [R, H, W] or vectors [R, d])."""
        return self._obs if self._frozen else self._obs[: self._num_rows]

    @property
    def actions(self) -> np.ndarray:
        return self._actions[: self._num_rows]

    @property
    def rewards(self) -> np.ndarray:
        return self._rewards[: self._num_rows]

    @property
    def terminals(self) -> np.ndarray:
        """Whether the transition leaving each row ends in a terminal state."""
        return self._terminals[: self._num_rows]

    @property
    def episode_starts(self) -> np.ndarray:
        return self._starts[: self._num_episodes]

    @property
    def episode_ends(self) -> np.ndarray:
        """One past each episode's last row (the open episode, if any, ends at the last row)."""
        return np.append(self._starts[1 : self._num_episodes], self._num_rows)

    @property
    def nbytes(self) -> int:
        """Bytes the store's arrays hold, allocated capacity included (it grows by doubling): what
        a long run's memory may grow by (benchmarks/long_run.py, docs/benchmarks.md#long-runs)."""
        arrays = [self._actions, self._rewards, self._terminals, self._starts]
        obs = self._obs.segments if isinstance(self._obs, SegmentedRows) else [self._obs]
        return sum(int(a.nbytes) for a in (*obs, *arrays))

    @property
    def is_frames(self) -> bool:
        """Image rows (uint8 [H, W], stacked at sampling) rather than vectors."""
        return self._obs.ndim == 3 and self._obs.dtype == np.uint8

    @property
    def is_images(self) -> bool:
        """Whole image rows (uint8 [H, W, C]): sampled as they are, never stacked nor flattened."""
        return self._obs.ndim == 4 and self._obs.dtype == np.uint8

    @property
    def num_transitions(self) -> int:
        """Rows that start a transition: all rows but each episode's last non-terminal row."""
        if self._num_episodes == 0:
            return 0
        last = self.episode_ends - 1
        return self._num_rows - int(np.count_nonzero(~self._terminals[last]))

    def last_transition_row(self) -> int:
        """The newest row that starts a transition; -1 when none does.

        Constant time: only the newest episode can lack one (an open episode of a single row,
        whose transition needs the next row), and then the episode before it ends in one (its
        terminal row, or the row before its observation-only last row)."""
        for episode in range(self._num_episodes - 1, max(-1, self._num_episodes - 3), -1):
            start = int(self._starts[episode])
            end = int(self._starts[episode + 1]) if episode + 1 < self._num_episodes else self._num_rows
            if self._terminals[end - 1]:
                return end - 1
            if end - start >= 2:
                return end - 2
        return -1

    def locate(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start and end (exclusive) row of the episode of each row."""
        episode = np.searchsorted(self.episode_starts, rows, side="right") - 1
        return self.episode_starts[episode], self.episode_ends[episode]

    def starts_transition(self, rows: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Which rows start a transition, given their episodes' ends (see the module docstring)."""
        safe = np.minimum(rows, self._num_rows - 1)
        return (rows + 1 < ends) | self._terminals[safe]

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The rows so far and the episode bookkeeping as plain arrays: what an online checkpoint
        saves (data only, docs/bounds.md#run-directories-are-data); :meth:`load_state_arrays`
        puts them back."""
        if self._frozen:
            raise TypeError("this EpisodeStore wraps fixed arrays (from_arrays); it has no state to save")
        return {
            "obs": self.obs,
            "actions": self.actions,
            "rewards": self.rewards,
            "terminals": self.terminals,
            "episode_starts": self.episode_starts,
            "open": np.asarray(self._open),
        }

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Replace this store's rows by saved ones (:meth:`state_arrays`); ``ValueError`` when they
        do not fit it (another observation shape or dtype, lengths that disagree, episode starts
        out of order), so a damaged or foreign file is refused, never half-loaded."""
        if self._frozen:
            raise TypeError("this EpisodeStore wraps fixed arrays (from_arrays); it cannot load rows")
        obs, actions = arrays["obs"], arrays["actions"]
        rewards, terminals, starts, is_open = (
            arrays["rewards"],
            arrays["terminals"],
            arrays["episode_starts"],
            arrays["open"],
        )
        rows = len(obs)
        for name, value, like in (("obs", obs, self._obs), ("actions", actions, self._actions)):
            if value.dtype != like.dtype or value.shape[1:] != like.shape[1:] or len(value) != rows:
                raise ValueError(
                    f"saved {name} {value.dtype}{list(value.shape)} do not fit {like.dtype}{list(like.shape)}"
                )
        if (
            rewards.shape != (rows,)
            or rewards.dtype != np.float32
            or terminals.shape != (rows,)
            or terminals.dtype != bool
        ):
            raise ValueError("saved rewards or terminals do not match the rows")
        if starts.dtype != np.int64 or starts.ndim != 1 or is_open.shape != () or is_open.dtype != bool:
            raise ValueError("saved episode starts or open flag are malformed")
        if rows and (len(starts) == 0 or starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= rows):
            raise ValueError("saved episode starts must begin at 0, increase, and lie within the rows")
        if not rows and (len(starts) or bool(is_open)):
            raise ValueError("saved episode starts without rows")
        self._num_rows = self._num_episodes = 0
        self._reserve(rows)
        self._obs[:rows], self._actions[:rows], self._rewards[:rows], self._terminals[:rows] = (
            obs,
            actions,
            rewards,
            terminals,
        )
        self._starts = np.zeros(max(16, len(starts)), np.int64)
        self._starts[: len(starts)] = starts
        self._num_rows, self._num_episodes, self._open = rows, len(starts), bool(is_open)

    def _reserve(self, extra: int) -> None:
        """Grow the row arrays (doubling) so ``extra`` more rows fit."""
        if self._frozen:
            raise TypeError("this EpisodeStore wraps fixed arrays (from_arrays); it cannot grow")
        need = self._num_rows + extra
        if need > len(self._rewards):
            capacity = max(need, 2 * len(self._rewards))
            for name in ("_obs", "_actions", "_rewards", "_terminals"):
                old = getattr(self, name)
                new = np.zeros((capacity, *old.shape[1:]), old.dtype)
                new[: self._num_rows] = old[: self._num_rows]
                setattr(self, name, new)

    def _begin_episode(self) -> None:
        if self._num_episodes == len(self._starts):
            self._starts = np.concatenate((self._starts, np.zeros_like(self._starts)))
        self._starts[self._num_episodes] = self._num_rows
        self._num_episodes += 1
        self._open = True

    def _put(self, obs: np.ndarray, action: np.ndarray, reward: float, terminal: bool) -> None:
        row = self._num_rows
        self._obs[row] = obs
        self._actions[row] = action
        self._rewards[row] = reward
        self._terminals[row] = terminal
        self._num_rows += 1

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray | int,
        reward: float,
        terminal: bool,
        truncated: bool = False,
        next_obs: np.ndarray | None = None,
    ) -> None:
        """Append one transition ``(obs, action, reward)``; a new episode starts after an end.

        A terminal transition ends the episode without storing ``next_obs`` (its value is never
        used). A truncated one stores ``next_obs`` as the episode's final row, the state the
        last transition bootstraps from, so ``next_obs`` is required then.
        """
        if not self._open:
            self._begin_episode()
        self._reserve(2)
        self._put(obs, np.asarray(action), reward, terminal)
        if terminal:
            self._open = False
        elif truncated:
            if next_obs is None:
                raise ValueError("a truncated transition needs next_obs to bootstrap from")
            self._put(next_obs, np.zeros_like(self._actions[0]), 0.0, False)
            self._open = False

    def add_episode(
        self,
        observations: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray,
    ) -> None:
        """Append a whole episode in Minari's layout: T + 1 observations, T of everything else.

        A truncated episode is one whose last termination is False; its final observation is the
        bootstrap state. Terminations before the last step are rejected: they would split an
        episode.
        """
        steps = len(actions)
        if len(observations) != steps + 1 or len(rewards) != steps or len(terminations) != steps:
            raise ValueError("need T + 1 observations and T actions, rewards and terminations")
        terminations = np.asarray(terminations, bool)
        if terminations[:-1].any():
            raise ValueError("a termination before the episode's last step")
        if self._open:
            raise ValueError("add_episode while an episode added with add() is still open")
        self._begin_episode()
        self._reserve(steps + 1)
        rows = slice(self._num_rows, self._num_rows + steps + 1)
        self._obs[rows] = observations
        self._actions[rows][:steps] = actions
        self._actions[rows][steps] = 0
        self._rewards[rows] = np.append(rewards, 0.0)
        self._terminals[rows] = np.append(terminations, False)
        self._num_rows += steps + 1
        self._open = False


class FractionCut(NamedTuple):
    """Rows and episode starts kept by :func:`first_fraction`; see there."""

    num_rows: int
    episode_starts: np.ndarray
    last_row_obs_only: bool


def fraction_rows(fraction: float, num_rows: int) -> int:
    """``K = ceil(fraction * num_rows)`` (at least 1): the rows the offline protocol keeps."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return min(num_rows, max(1, int(np.ceil(fraction * num_rows - 1e-9))))


def first_fraction(fraction: float, episode_starts: np.ndarray, num_rows: int) -> FractionCut:
    """The paper's offline protocol: keep the first ``fraction`` of one checkpoint's transitions.

    The cut is at transition granularity: the first ``K`` rows (:func:`fraction_rows`) stay as
    transition starts. When ``K`` falls inside an episode, row ``K`` is kept too, as an
    observation only, so that the last kept transition is treated as truncated and bootstraps from
    it (``last_row_obs_only``: the caller must clear that row's terminal flag).
    """
    starts = np.asarray(episode_starts, np.int64)
    keep = fraction_rows(fraction, num_rows)
    kept_starts = starts[starts < keep]
    mid_episode = keep < num_rows and not np.any(starts == keep)
    return FractionCut(keep + int(mid_episode), kept_starts, mid_episode)
