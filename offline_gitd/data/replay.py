"""Replay: frames stored once, stacks and n-step returns assembled when sampling (docs/datasets.md).

Storage (:class:`EpisodeStore`) is a sequence of *rows* grouped into contiguous episodes. Row
``x`` holds an observation and the action, reward and terminal flag of the transition that leaves
it; the transition's next observation is row ``x + 1`` of the same episode. So row ``x`` starts a
transition when ``x + 1`` is still in its episode, or when it is terminal (its next state does
not matter: the bootstrap is multiplied by 0). The last row of a truncated episode is an
observation only: it is the state the episode's last transition bootstraps from. Both layouts fit:

- RL Unplugged: T rows per episode; a terminal episode's last row is its terminal transition, a
  truncated episode's last row has no successor and only serves as a bootstrap state.
- Minari / online collection: T + 1 rows (the final observation is stored as its own row).

Rows are single Atari frames (uint8 [H, W]: stacked when sampling), whole images (uint8
[H, W, C], e.g. MinAtar boards: never stacked, returned as uint8) or vectors (float32 [d]).

:class:`Replay` samples rows (uniformly, or in proportion to priority through a
:class:`~offline_gitd.data.sumtree.SumTree`) and builds :class:`~offline_gitd.batch.Batch`:
frame stacks with zeros before an episode's first frame, n-step returns that stop at terminals
and bootstrap after truncations, ``discount = gamma**m * (1 - terminal)`` with ``m`` the steps
actually taken. All index arithmetic is vectorised over the batch; the only Python loops run over
the ``n`` of the n-step return, over frame segments, or over rejection rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from offline_gitd.batch import Batch, FrameRefs
from offline_gitd.data.sumtree import SumTree


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


class Replay:
    """Sample :class:`~offline_gitd.batch.Batch` from an :class:`EpisodeStore`.

    ``stack`` frames are stacked channels-last for single-frame rows (whole images and vectors
    are never stacked);
    ``n_step`` rewards are summed with ``gamma``. With ``prioritized`` rows are drawn in
    proportion to ``priority**alpha`` (new rows get the largest priority seen so far) and weighted
    by ``(N P(i))**-beta`` normalised by the batch maximum (Schaul et al. 2016).
    """

    def __init__(
        self,
        store: EpisodeStore,
        *,
        stack: int = 4,
        n_step: int = 1,
        gamma: float = 0.99,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        priority_eps: float = 1e-6,
    ) -> None:
        if stack < 1 or n_step < 1 or not 0.0 <= gamma <= 1.0:
            raise ValueError("need stack >= 1, n_step >= 1 and 0 <= gamma <= 1")
        self.store = store
        self.stack = stack if store.is_frames else 1
        self.n_step = n_step
        self.gamma = gamma
        self.prioritized = prioritized
        self.alpha = alpha
        self.beta = beta
        self.priority_eps = priority_eps
        self._tree = SumTree(max(2, store.num_rows)) if prioritized else None
        self._max_priority = 1.0
        self._synced_rows = 0
        self._transition_rows_cache: tuple[int, np.ndarray] | None = None

    @property
    def nbytes(self) -> int:
        """Bytes of the store, the sum tree and the cached transition rows: the replay's own size."""
        cache = self._transition_rows_cache
        return (
            self.store.nbytes
            + (int(self._tree.tree.nbytes) if self._tree is not None else 0)
            + (int(cache[1].nbytes) if cache is not None else 0)
        )

    def transition_rows(self) -> np.ndarray:
        """Every row that starts a transition, cached until the store grows.

        Uniform draws index this directly instead of rejecting rows that start no transition, so
        a draw of ``n * b`` rows consumes the generator exactly as ``n`` draws of ``b`` do: that
        is what lets :meth:`sample_chunk` gather a whole chunk at once and still give the same
        batches as step-by-step sampling.
        """
        num_rows = self.store.num_rows
        if self._transition_rows_cache is None or self._transition_rows_cache[0] != num_rows:
            rows = np.arange(num_rows, dtype=np.int64)
            _, ends = self.store.locate(rows)
            self._transition_rows_cache = (num_rows, rows[self.store.starts_transition(rows, ends)])
        return self._transition_rows_cache[1]

    def _sync_priorities(self) -> None:
        """Give rows that became transitions since the last call the maximum priority."""
        assert self._tree is not None
        rows_now = self.store.num_rows
        if rows_now == self._synced_rows:
            return
        self._tree.grow(rows_now)
        # The previous last row may have become a transition start now that it has a successor.
        rows = np.arange(max(0, self._synced_rows - 1), rows_now)
        _, ends = self.store.locate(rows)
        valid = self.store.starts_transition(rows, ends)
        self._tree.update(rows, np.where(valid, self._max_priority, 0.0))
        self._synced_rows = rows_now

    def priority_arrays(self) -> dict[str, np.ndarray]:
        """Prioritised sampling's state as plain arrays (none for uniform sampling): the sum tree,
        the largest priority seen and how many rows it covers; :meth:`load_priority_arrays`
        puts them back."""
        if self._tree is None:
            return {}
        return {
            "priority_tree": self._tree.tree,
            "max_priority": np.asarray(self._max_priority, np.float64),
            "synced_rows": np.asarray(self._synced_rows, np.int64),
        }

    def load_priority_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`priority_arrays` (after the store's rows); ``ValueError`` when they do
        not fit (a tree that is not a sum tree of non-negative priorities, counts past the store)."""
        if self._tree is None:
            if arrays:
                raise ValueError("saved priorities for a replay that samples uniformly")
            return
        tree = SumTree.from_array(arrays["priority_tree"])
        max_priority, synced = arrays["max_priority"], arrays["synced_rows"]
        if max_priority.shape != () or max_priority.dtype != np.float64 or not np.isfinite(max_priority):
            raise ValueError("saved max_priority is malformed")
        if synced.shape != () or synced.dtype != np.int64 or not 0 <= int(synced) <= self.store.num_rows:
            raise ValueError("saved synced_rows is outside the store")
        if tree.size < int(synced):
            raise ValueError("saved priority tree is smaller than the rows it covers")
        self._tree, self._max_priority, self._synced_rows = tree, float(max_priority), int(synced)

    def sample_rows(self, batch_size: int, rng: np.random.Generator | int | None) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``batch_size`` transition-start rows and their importance weights.

        Uniform draws pick among :meth:`transition_rows` (rows that start no transition, one per
        truncated episode, are never drawn); prioritised draws are stratified over ``batch_size``
        equal slices of the total priority.
        """
        rng = np.random.default_rng(rng)
        store = self.store
        if store.num_transitions == 0:
            raise ValueError("the replay holds no transition yet")
        if self._tree is None:
            candidates = self.transition_rows()
            return candidates[rng.integers(0, len(candidates), batch_size)], np.ones(batch_size, np.float32)
        self._sync_priorities()
        total = self._tree.total
        targets = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        rows = self._tree.find(np.minimum(targets, np.nextafter(total, 0.0)))
        probabilities = self._tree.get(rows) / total
        weights = (store.num_transitions * probabilities) ** -self.beta
        return rows, (weights / weights.max()).astype(np.float32)

    def sample(self, batch_size: int, rng: np.random.Generator | int | None) -> Batch:
        """A batch of ``batch_size`` transitions; deterministic for a given generator state."""
        return self.sample_with_rows(batch_size, rng)[0]

    def sample_chunk(self, batch_size: int, count: int, rng: np.random.Generator) -> Batch:
        """``count`` batches at once, each field shaped ``[count, batch_size, ...]``.

        For uniform sampling this equals ``count`` successive :meth:`sample` calls on ``rng``
        (tested) but gathers every row in one pass, which is what keeps a host feeding a compiled
        multi-step update from spending its time in per-batch overhead. Prioritised sampling
        draws batch by batch, as its stratification is per batch.
        """
        if self._tree is not None:
            batches = [self.sample(batch_size, rng) for _ in range(count)]
            return Batch(*(np.stack(field) for field in zip(*batches, strict=True)))
        rows, _ = self.sample_rows(batch_size * count, rng)
        return Batch(*(field.reshape(count, batch_size, *field.shape[1:]) for field in self.batch_at(rows)))

    def sample_refs_chunk(self, batch_size: int, count: int, rng: np.random.Generator) -> FrameRefs:
        """The batches :meth:`sample_chunk` would draw on ``rng``, as :class:`FrameRefs` into the
        frame store itself (``frames`` are store rows, int64), fields ``[count, batch_size, ...]``.

        Only index arithmetic runs here; the frames are gathered later, on the device from a
        resident copy of the store or on the host by :func:`gather_frame_pool`. Each sample
        names ``stack + n_step`` frames (5 for Atari's stack of 4 and 1-step returns) where a
        :class:`Batch` copies ``2 stack``.
        """
        if not self.store.is_frames:
            raise TypeError("frame references need a store of image frames")
        if self._tree is not None:
            drawn = [self.sample_rows(batch_size, rng) for _ in range(count)]
            rows = np.concatenate([r for r, _ in drawn])
            weights = np.concatenate([w for _, w in drawn])
        else:
            rows, weights = self.sample_rows(batch_size * count, rng)
        refs = self.frame_refs_at(rows, weights)
        return FrameRefs(*(field.reshape(count, batch_size, *field.shape[1:]) for field in refs))

    def frame_refs_at(self, rows: np.ndarray, weights: np.ndarray | None = None) -> FrameRefs:
        """:meth:`batch_at` as :class:`FrameRefs` into the store (see :meth:`sample_refs_chunk`)."""
        rows = np.asarray(rows, np.int64)
        starts, ends = self.store.locate(rows)
        reward, discount, next_rows = self.n_step_targets(rows, ends)
        actions = self.store.actions[rows].astype(np.int32)
        window = rows[:, None] + np.arange(1 - self.stack, self.n_step + 1)
        # Positions past the next observation are never read; clipping keeps them in the episode.
        frames = np.clip(window, starts[:, None], ends[:, None] - 1)
        return FrameRefs(
            frames=frames,
            pad=np.maximum(0, starts - window[:, 0]).astype(np.int32),
            next_offset=(next_rows - rows).astype(np.int32),
            action=actions,
            reward=reward,
            discount=discount,
            weight=np.ones(len(rows), np.float32) if weights is None else weights,
        )

    def sample_with_rows(self, batch_size: int, rng: np.random.Generator | int | None) -> tuple[Batch, np.ndarray]:
        """A batch and the rows it came from (to pass back to :meth:`update_priorities`)."""
        rows, weights = self.sample_rows(batch_size, rng)
        return self.batch_at(rows, weights), rows

    def update_priorities(self, rows: np.ndarray, td_errors: np.ndarray) -> None:
        """Set the priorities of sampled rows to ``(|td_error| + eps)**alpha``."""
        if self._tree is None:
            raise TypeError("update_priorities needs a prioritized Replay")
        self._sync_priorities()
        priorities = (np.abs(np.asarray(td_errors, np.float64)) + self.priority_eps) ** self.alpha
        self._tree.update(np.asarray(rows, np.int64), priorities)
        self._max_priority = max(self._max_priority, float(priorities.max(initial=0.0)))

    def n_step_targets(
        self, rows: np.ndarray, ends: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(reward, discount, next_row)`` of the n-step transition from each row.

        Walk at most ``n_step`` transitions: stop after a terminal one (discount 0), or on
        reaching a row that starts no transition (a truncated episode's end: bootstrap from it
        with ``gamma**m``, m the transitions taken). ``ends``: the rows' episode ends, if the
        caller has them already.
        """
        store = self.store
        if ends is None:
            _, ends = store.locate(rows)
        rewards, terminals = store.rewards, store.terminals
        current = np.asarray(rows, np.int64).copy()
        total = np.zeros(len(current), np.float64)
        taken = np.zeros(len(current), np.int64)
        alive = np.ones(len(current), bool)
        terminal = np.zeros(len(current), bool)
        for k in range(self.n_step):
            total += np.where(alive, self.gamma**k * rewards[current], 0.0)
            taken += alive
            hit = alive & terminals[current]
            terminal |= hit
            following = current + 1
            alive = alive & ~hit & store.starts_transition(following, ends)
            current = np.where(alive, following, current)
        next_rows = np.minimum(rows + taken, ends - 1)
        discount = self.gamma**taken * (~terminal)
        return total.astype(np.float32), discount.astype(np.float32), next_rows

    def observations(self, rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Observations at ``rows``: stacks of ``stack`` frames [B, H, W, stack] ending at each
        row, zero frames before the episode's start; whole images as uint8 [B, H, W, C]; vectors
        as float32 [B, d]."""
        obs = self.store.obs
        if self.store.is_images:
            return np.asarray(obs[rows])
        if not self.store.is_frames:
            return np.asarray(obs[rows], dtype=np.float32)
        window = rows[:, None] + np.arange(1 - self.stack, 1)
        inside = window >= starts[:, None]
        frames = obs[np.where(inside, window, rows[:, None])]
        frames[~inside] = 0
        # Channels-last interleaving: cv2.merge is ~10x faster than a numpy transpose copy here.
        # Imported here: frame references (sample_refs_chunk) never need it, so a GPU host
        # training from frames on the device runs without OpenCV.
        import cv2

        batch, _, height, width = frames.shape
        planes = [frames[:, s].reshape(batch * height, width) for s in range(self.stack)]
        return cv2.merge(planes).reshape(batch, height, width, self.stack)

    def batch_at(self, rows: np.ndarray, weights: np.ndarray | None = None) -> Batch:
        """The batch of n-step transitions starting at the given rows."""
        rows = np.asarray(rows, np.int64)
        starts, _ = self.store.locate(rows)
        reward, discount, next_rows = self.n_step_targets(rows)
        actions = self.store.actions[rows]
        actions = actions.astype(np.int32 if actions.dtype.kind in "iub" else np.float32)
        # One gather for s_t and s_{t+n} together: half the per-call overhead of two.
        both = self.observations(np.concatenate([rows, next_rows]), np.concatenate([starts, starts]))
        return Batch(
            obs=both[: len(rows)],
            action=actions,
            reward=reward,
            discount=discount,
            next_obs=both[len(rows) :],
            weight=np.ones(len(rows), np.float32) if weights is None else weights,
        )


def gather_frame_pool(
    obs: np.ndarray | SegmentedRows, refs: FrameRefs, out: np.ndarray | None = None
) -> tuple[np.ndarray, FrameRefs]:
    """The frames ``refs`` (store rows) name, copied once into a pool, and ``refs`` into that pool.

    The pool has one slot per window position (``refs.frames.size`` frames: a fixed shape, so a
    compiled step never recompiles) filled in ascending row order: one ``np.take`` per store
    segment straight into the pool, no intermediate copy, and reads that walk each memory map
    forwards. This is the host path for stores too large to keep on the device. ``out``, if
    given, receives the pool (e.g. one seed's slice of all seeds' pools).
    """
    flat = refs.frames.ravel()
    order = np.argsort(flat, kind="stable")
    rows = flat[order]
    pool = np.empty((len(rows), *obs.shape[1:]), obs.dtype) if out is None else out
    segments = obs.segments if isinstance(obs, SegmentedRows) else [obs]
    offsets = obs.offsets if isinstance(obs, SegmentedRows) else np.array([0, len(obs)])
    bounds = np.searchsorted(rows, offsets)
    for segment, offset, low, high in zip(segments, offsets, bounds[:-1], bounds[1:], strict=False):
        if high > low:
            np.take(segment, rows[low:high] - offset, axis=0, out=pool[low:high], mode="clip")
    slots = np.empty(len(flat), np.int32)
    slots[order] = np.arange(len(flat), dtype=np.int32)
    return pool, refs._replace(frames=slots.reshape(refs.frames.shape))
