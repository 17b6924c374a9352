"""A sum tree in numpy for proportional prioritised replay (Schaul et al. 2016, Section 3.3).

Leaves hold priorities; each inner node the sum of its two children, so drawing a leaf with
probability proportional to its priority is a walk from the root, ``O(log N)``. Every operation
works on whole batches of indices at once (one numpy step per tree level), never one sample at a
time in Python.
"""

from __future__ import annotations

import numpy as np


class SumTree:
    """Binary sum tree over ``capacity`` leaves (rounded up to a power of two), float64 sums.

    Node 1 is the root, node ``i`` has children ``2i`` and ``2i + 1``, leaf ``j`` is node
    ``size + j``. Float64 keeps the root exact enough that millions of leaves still sample right.
    """

    def __init__(self, capacity: int) -> None:
        self.depth = max(1, int(capacity - 1).bit_length())  # >= 1: the root is never a leaf
        self.size = 1 << self.depth
        self.tree = np.zeros(2 * self.size, dtype=np.float64)

    @classmethod
    def from_array(cls, tree: np.ndarray) -> SumTree:
        """The tree whose node array is ``tree`` (a saved :attr:`tree`); ``ValueError`` unless it is
        float64 of length ``2 * 2**depth`` (depth >= 1) with finite, non-negative priorities."""
        size = len(tree) // 2
        if tree.dtype != np.float64 or tree.ndim != 1 or size < 2 or size & (size - 1) or len(tree) != 2 * size:
            raise ValueError("a saved sum tree must be float64 of length 2 * 2**depth")
        if not np.all(np.isfinite(tree)) or np.any(tree < 0):
            raise ValueError("a saved sum tree holds negative or non-finite priorities")
        out = cls(size)
        out.tree = np.array(tree, np.float64)
        return out

    @property
    def total(self) -> float:
        """Sum of all priorities."""
        return float(self.tree[1])

    def get(self, indices: np.ndarray) -> np.ndarray:
        """Priorities of the given leaves."""
        return self.tree[self.size + np.asarray(indices)]

    def grow(self, capacity: int) -> None:
        """Make room for ``capacity`` leaves, keeping their priorities (online replay grows)."""
        if capacity <= self.size:
            return
        leaves = self.tree[self.size :].copy()
        self.__init__(capacity)  # type: ignore[misc]
        self.tree[self.size : self.size + len(leaves)] = leaves
        self._rebuild()

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set leaf priorities (non-negative) and refresh their ancestors, level by level.

        With duplicate indices the last priority wins, as numpy assignment does.
        """
        indices = np.asarray(indices, dtype=np.int64)
        priorities = np.asarray(priorities, dtype=np.float64)
        if np.any(priorities < 0) or not np.all(np.isfinite(priorities)):
            raise ValueError("priorities must be finite and non-negative")
        nodes = self.size + indices
        self.tree[nodes] = priorities
        if len(nodes) > self.size // 8:  # many leaves: one full rebuild is cheaper than unique()
            self._rebuild()
            return
        for _ in range(self.depth if len(nodes) else 0):
            nodes = np.unique(nodes >> 1)
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]

    def _rebuild(self) -> None:
        """Recompute every inner node from the leaves."""
        level = self.size
        while level > 1:
            children = self.tree[level : 2 * level]
            self.tree[level // 2 : level] = children[0::2] + children[1::2]
            level //= 2

    def find(self, values: np.ndarray) -> np.ndarray:
        """Leaves whose prefix-sum interval holds each value in ``[0, total)``.

        A step never enters a subtree of zero mass, so float rounding near the edges cannot land
        on a zero-priority leaf (a row that is not a valid transition).
        """
        values = np.asarray(values, dtype=np.float64).copy()
        nodes = np.ones(len(values), dtype=np.int64)
        for _ in range(self.depth):
            left = 2 * nodes
            left_sum = self.tree[left]
            right_sum = self.tree[left + 1]
            go_right = ((values >= left_sum) & (right_sum > 0)) | (left_sum <= 0)
            values = np.where(go_right, values - left_sum, values)
            nodes = left + go_right
        return nodes - self.size
