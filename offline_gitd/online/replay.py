"""The online replay: the shared :class:`~offline_gitd.data.replay.Replay` with a capacity.

DQN's replay of capacity C samples only the C most recent transitions (Mnih et al. 2015;
the paper's tables' "replay 1,000,000" / "replay 10,000"). Here the store keeps growing and
sampling is restricted to its newest ``capacity`` rows: for uniform sampling the draw range
starts there, for prioritised sampling the rows that leave the window get priority 0. Frame
stacks and n-step returns still read the older rows they need, so a transition at the window's
edge keeps its real history (a circular buffer would zero it).

Rows, not transitions, are counted: the observation-only row that ends each truncated episode
counts too, one row per episode (so a window of 2 rows may hold no transition: :attr:`WindowedReplay.low`
then reaches back to the newest one). Memory grows with the run (an Atari row is an 84x84 frame,
7 KiB): compacting old rows away is left for runs longer than the host's memory allows.
"""

from __future__ import annotations

import numpy as np

from offline_gitd.data.episode_store import EpisodeStore
from offline_gitd.data.replay import Replay


class WindowedReplay(Replay):
    """:class:`Replay` sampling only from the newest ``capacity`` rows of its store."""

    def __init__(self, store: EpisodeStore, *, capacity: int, **kwargs) -> None:
        super().__init__(store, **kwargs)
        if capacity < 2:
            raise ValueError(f"replay capacity must be >= 2, got {capacity}")
        self.capacity = capacity
        self._evicted = 0  # rows below this have priority 0 (prioritised sampling)

    @property
    def low(self) -> int:
        """First row of the sampling window: the newest ``capacity`` rows, reaching back to the
        newest transition when those rows hold none.

        That happens only with a window of 2 rows, right after a truncation: the truncated
        episode's observation-only row and the next episode's first row, whose transition is not
        complete yet. Without reaching back, uniform sampling would reject rows forever and
        prioritised sampling would divide by a total priority of 0. Both bounds only grow as rows
        are added, so evicted rows stay evicted."""
        return max(0, min(self.store.num_rows - self.capacity, self.store.last_transition_row()))

    def _sync_priorities(self) -> None:
        super()._sync_priorities()
        low = self.low
        if low > self._evicted:
            self._tree.update(np.arange(self._evicted, low), np.zeros(low - self._evicted))
            self._evicted = low

    def sample_rows(self, batch_size: int, rng: np.random.Generator | int | None) -> tuple[np.ndarray, np.ndarray]:
        if self.prioritized:
            return super().sample_rows(batch_size, rng)
        rng = np.random.default_rng(rng)
        store, low = self.store, self.low
        if store.num_transitions == 0:
            raise ValueError("the replay holds no transition yet")
        rows = rng.integers(low, store.num_rows, batch_size)
        while True:
            _, ends = store.locate(rows)
            bad = ~store.starts_transition(rows, ends)
            if not bad.any():
                return rows, np.ones(batch_size, np.float32)
            rows[bad] = rng.integers(low, store.num_rows, int(bad.sum()))

    def priority_arrays(self) -> dict[str, np.ndarray]:
        arrays = super().priority_arrays()
        if arrays:
            arrays["evicted"] = np.asarray(self._evicted, np.int64)
        return arrays

    def load_priority_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        arrays = dict(arrays)
        evicted = arrays.pop("evicted", None)
        super().load_priority_arrays(arrays)
        if evicted is not None:
            if evicted.shape != () or evicted.dtype != np.int64 or not 0 <= int(evicted) <= self.store.num_rows:
                raise ValueError("saved evicted row count is outside the store")
            self._evicted = int(evicted)
