"""Replay: sampling batches from an :class:`~offline_gitd.data.episode_store.EpisodeStore` (docs/datasets.md).

Frames are stored once (:mod:`offline_gitd.data.episode_store` says how rows make episodes);
stacks and n-step returns are assembled when sampling. :class:`Replay` samples rows (uniformly, or
in proportion to priority through a :class:`~offline_gitd.data.sumtree.SumTree`) and builds
:class:`~offline_gitd.batch.Batch`: frame stacks with zeros before an episode's first frame,
n-step returns that stop at terminals and bootstrap after truncations, ``discount = gamma**m *
(1 - terminal)`` with ``m`` the steps actually taken. All index arithmetic is vectorised over the
batch; the only Python loops run over the ``n`` of the n-step return, over frame segments, or over
rejection rounds. :class:`Sampler` is what a training loop uses of a replay.

The storage names (``EpisodeStore``, ``SegmentedRows``, ``first_fraction``, ``fraction_rows``,
``FractionCut``) are importable from here too, where they lived before storage had its own module.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from offline_gitd.batch import Batch, FrameRefs
from offline_gitd.data.episode_store import EpisodeStore, FractionCut, SegmentedRows, first_fraction, fraction_rows
from offline_gitd.data.sumtree import SumTree

__all__ = [
    "EpisodeStore",
    "FractionCut",
    "Replay",
    "Sampler",
    "SegmentedRows",
    "first_fraction",
    "fraction_rows",
    "gather_frame_pool",
]


class Sampler(Protocol):
    """What a training loop uses of a replay: batches, one or a chunk at a time, drawn from a
    numpy generator (:class:`Replay` is one; a test may wrap one)."""

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch: ...

    def sample_chunk(self, batch_size: int, count: int, rng: np.random.Generator) -> Batch: ...


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
