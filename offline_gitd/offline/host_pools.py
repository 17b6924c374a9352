"""Host buffers for frame pools, reused chunk after chunk and overwritten only when safe (docs/offline.md#feeding-the-device).

With frames gathered on the host (``--frames host``, stores too large for the device) every
chunk fills a pool of ``seeds x count x batch x (stack + n)`` frames: 1.4 GB for 250 updates of
5 seeds. A fresh buffer per chunk costs a kernel page fault per 4 KiB page and, where the buffer
is not aligned, one more copy when it is handed to XLA, so the cost per batch grew with the chunk
(0.2 ms at 16 updates, 2.2 ms at 250 on 2 CPU cores). A :class:`PoolRing` hands out buffers that
are already paged in and 64-byte aligned, which the CPU client adopts without copying.

Reusing a buffer is only safe once nothing reads it any more, and JAX does not say when that is:
on the CPU backend ``device_put`` adopts an aligned numpy buffer (the array *is* the buffer), on
accelerators the transfer reads it asynchronously, and in both cases JAX lets go of its Python
reference before a computation reading the array has finished (measured: overwriting then
changed the result of a computation already dispatched). So a buffer comes back to the ring only
through :meth:`PoolLease.release` with a *fence*: arrays that are ready once every computation
reading the buffer has finished (the chunk's metrics). The ring waits for the fence before it
hands the buffer out again. A lease that is never released just lets its buffer go with the
chunk: never reused, never leaked.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import jax
import numpy as np

ALIGN = 64  # bytes: XLA's CPU client adopts host buffers aligned to this without copying


def aligned_empty(shape: tuple[int, ...], dtype: Any, align: int = ALIGN) -> np.ndarray:
    """An uninitialised array whose data starts on an ``align``-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    offset = -raw.ctypes.data % align
    return raw[offset : offset + nbytes].view(dtype).reshape(shape)


class PoolLease:
    """The claim of ``holders`` chunks (a block sharing one pool) on a ring buffer; the buffer
    goes back when every holder has called :meth:`release`."""

    def __init__(self, ring: PoolRing, buffer: np.ndarray, holders: int = 1) -> None:
        self.buffer: np.ndarray | None = buffer
        self._ring = ring
        self._holders = holders
        self._fences: list[Any] = []
        self._lock = threading.Lock()

    def release(self, fence: Any) -> None:
        """One holder is done; the buffer is overwritten only once every holder's ``fence`` is ready.

        ``fence`` must depend on every computation of this holder that read the buffer (for a
        chunk: the metrics its updates returned), so that readiness means nothing reads it any
        more. Releasing a holder twice is harmless.
        """
        with self._lock:
            if self.buffer is None or self._holders == 0:
                return
            self._fences.append(fence)
            self._holders -= 1
            if self._holders:
                return
            buffer, self.buffer = self.buffer, None
        self._ring.give_back(buffer, self._fences)


class PoolRing:
    """Reusable aligned host buffers, keyed by shape and dtype (see the module docstring).

    ``keep``: free buffers kept at most (the oldest are dropped first). A training loop with one
    chunk prefetched holds three at a time (running, queued, being gathered), so four free ones
    cover it and the odd-sized last chunk of an epoch.
    """

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self.allocated = 0  # buffers created so far (tests and benchmarks read it)
        self._free: deque[tuple[np.ndarray, Any]] = deque()
        self._lock = threading.Lock()

    def lease(self, shape: tuple[int, ...], dtype: Any, holders: int = 1) -> PoolLease:
        """A buffer of ``shape`` and ``dtype`` for ``holders`` chunks: a released one whose fence
        is ready, else a new one.

        Called from the feed's prefetch thread; waiting for a fence there blocks only the feed,
        and in a training loop the fence is a chunk the loop has already read back.
        """
        dtype = np.dtype(dtype)
        found = None
        with self._lock:
            for i, (buffer, fence) in enumerate(self._free):
                if buffer.shape == tuple(shape) and buffer.dtype == dtype:
                    found = (buffer, fence)
                    del self._free[i]
                    break
        if found is None:
            self.allocated += 1
            return PoolLease(self, aligned_empty(tuple(shape), dtype), holders)
        buffer, fence = found
        jax.block_until_ready(fence)
        return PoolLease(self, buffer, holders)

    def give_back(self, buffer: np.ndarray, fence: Any) -> None:
        with self._lock:
            self._free.append((buffer, fence))
            while len(self._free) > self.keep:
                self._free.popleft()


# A lease rides along in a FrameChunk but is no data: trees (device_put, block_until_ready,
# leaves) see no leaf in it and hand the same lease back.
jax.tree_util.register_pytree_node(PoolLease, lambda lease: ((), lease), lambda lease, _: lease)
