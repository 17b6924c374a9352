"""Feeding the compiled update: chunks of batches for every seed, ready on the device (docs/offline.md#feeding-the-device).

On a GPU a Nature-CNN step takes milliseconds, so the host must not be what bounds training.
For frame data the feed therefore moves as little as it can and overlaps the rest:

* ``device`` placement: the whole frame store is copied to the device once
  (:func:`resident_frames`); per chunk the host computes only row indices, n-step rewards and
  discounts (:meth:`~offline_gitd.data.replay.Replay.sample_refs_chunk`) and the compiled step
  gathers its frames and builds the stacks (:class:`~offline_gitd.learners.drivers.FrameChunk`).
* ``host`` placement, for stores that do not fit: each sample's ``stack + n`` distinct frames
  are gathered once per chunk into a pool (:func:`~offline_gitd.data.replay.gather_frame_pool`),
  not the ``2 stack`` frames of an obs/next_obs pair, by parallel tasks, into aligned buffers
  reused from chunk to chunk (:mod:`~offline_gitd.offline.host_pools`): no page faults, and no
  copy on the CPU backend, which adopts them. A memory-mapped store is advised as read at random
  (:func:`~offline_gitd.data.random_access.advise_random_access`), so that a page fault reads the
  pages a sample touches, not the disk's read-ahead window around them.
* Either way the next chunk is prepared on a background thread (:func:`prefetch`) while the
  device runs the current one, and small chunks are prepared in blocks of at least 64 updates
  (:meth:`ChunkFeed.block`), so that a draw's, a gather's and a transfer's fixed costs do not
  dominate when a compiled call runs one update.

The batches are those of :meth:`~offline_gitd.data.replay.Replay.sample_chunk` on the same
generators (tested): where the frames live changes speed, never results. Vector data keeps
:class:`~offline_gitd.batch.Batch` chunks, also prefetched.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.batch import Batch, FrameRefs
from offline_gitd.choices import FRAME_PLACEMENTS
from offline_gitd.data.episode_store import SegmentedRows
from offline_gitd.data.random_access import advise_random_access
from offline_gitd.data.replay import Replay, Sampler, gather_frame_pool
from offline_gitd.learners.drivers import FrameChunk, make_chunk_runner, make_frame_chunk_runner
from offline_gitd.learners.seed_groups import cpu_seed_devices, over_devices
from offline_gitd.offline.host_pools import PoolRing

# auto keeps the store on the device when it takes at most this share of the free memory there
_DEVICE_SHARE = 0.5
# rows copied to the device per call when uploading a store (one compiled copy for all blocks)
_UPLOAD_ROWS = 1 << 15
# updates drawn, gathered and sent together at least (a block of small chunks; see ChunkFeed.block)
_BLOCK_UPDATES = 64
# samples per gather task at least: below this a hand-off to a thread costs more than it saves
_MIN_TASK_SAMPLES = 16

T = TypeVar("T")


def device_free_bytes(device: jax.Device | None = None) -> int:
    """Free memory of ``device`` (default: JAX's first): the allocator's limit minus what is in
    use on accelerators, available physical memory on the CPU backend (it reports no stats)."""
    device = device or jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def choose_frames(requested: str, store_bytes: int, free_bytes: int | None = None) -> str:
    """``auto`` -> ``device`` when the frame store takes at most half the device's free memory."""
    if requested not in FRAME_PLACEMENTS:
        raise ValueError(f"unknown frame placement {requested!r}; choose one of {', '.join(FRAME_PLACEMENTS)}")
    if requested != "auto":
        return requested
    free = device_free_bytes() if free_bytes is None else free_bytes
    return "device" if store_bytes <= _DEVICE_SHARE * free else "host"


def resident_frames(obs: np.ndarray | SegmentedRows, block_rows: int = _UPLOAD_ROWS) -> jax.Array:
    """A device copy of every frame of the store, written block by block into one buffer so that
    the peak is the store plus one block (never two copies of the store)."""
    rows = len(obs)
    block = min(block_rows, rows)
    write = jax.jit(
        lambda store, frames, at: jax.lax.dynamic_update_slice_in_dim(store, frames, at, 0), donate_argnums=0
    )
    store = jnp.zeros(obs.shape, obs.dtype)
    for start in range(0, rows, block):
        start = min(start, rows - block)  # the last block overlaps the previous one: same shape
        store = write(store, obs[np.arange(start, start + block)], np.int32(start))
    return store


def prefetch(items: Iterable[T], depth: int = 1) -> Iterator[T]:
    """Iterate ``items`` with up to ``depth`` of them produced ahead on a background thread.

    The producer's exceptions are raised in the consumer; closing the iterator early stops it.
    """
    slots: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        slots.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            slots.put((done, None))
        except BaseException as err:  # handed to the consumer, re-raised there
            slots.put((done, err))

    worker = threading.Thread(target=produce, name="prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item, err = slots.get()
            if item is done:
                if err is not None:
                    raise err
                return
            yield item
    finally:
        stop.set()
        worker.join()


class ChunkFeed:
    """Chunks of updates for every seed from one replay, device-ready, and the runner for them.

    ``frames`` (``auto``/``device``/``host``) says where frame stores are gathered; it is ignored
    for vector data. :meth:`chunks` yields what ``runner`` takes, in the order of ``counts``.
    ``workers``: threads gathering host frame pools (default: the cores, at most 8).
    ``block_updates``: updates :meth:`chunks` prepares together at least (see :meth:`block`).
    """

    def __init__(
        self,
        replay: Sampler,
        batch_size: int,
        driver: str,
        frames: str = "auto",
        workers: int | None = None,
        block_updates: int = _BLOCK_UPDATES,
    ) -> None:
        self.replay = replay
        self.batch_size = batch_size
        self.driver = driver
        self.is_frames = isinstance(replay, Replay) and replay.store.is_frames
        self.placement = None
        self._pool: jax.Array | None = None
        self._workers = workers or min(8, os.cpu_count() or 1)
        self._executor = ThreadPoolExecutor(self._workers, thread_name_prefix="gather")
        self.ring = PoolRing()
        self.block_updates = block_updates
        if self.is_frames:
            obs = replay.store.obs
            self.placement = choose_frames(frames, int(np.prod(obs.shape)) * obs.dtype.itemsize)
            if self.placement == "device":
                self._pool = resident_frames(obs)
            else:  # sampled rows: a page fault must not read the disk's whole read-ahead window
                advise_random_access(obs)

    def runner(
        self, step: Callable, seeds: str = "vmap", options: dict[str, Any] | None = None
    ) -> Callable[[Any, Any], tuple[Any, dict[str, Any]]]:
        """The chunk runner matching what :meth:`chunks` yields, with seed strategy ``seeds``
        (:func:`~offline_gitd.learners.drivers.choose_seed_strategy`) and XLA options ``options``
        (:func:`~offline_gitd.learners.drivers.choose_compiler_options`).

        A host-gathered chunk is consumed by its run: its pool buffer goes back to the feed
        (:meth:`release`) to be refilled once the run's metrics are ready.
        """
        if not self.is_frames:
            run = make_chunk_runner(step, self.driver, seeds, options)
            devices = cpu_seed_devices(self.driver, seeds)  # the seeds over the cores, where there are several
            return over_devices(run, devices) if devices else run
        run = make_frame_chunk_runner(
            step, self.driver, self.replay.stack, shared_pool=self.placement == "device", seeds=seeds, options=options
        )

        def run_and_release(state: Any, chunk: FrameChunk) -> tuple[Any, dict[str, Any]]:
            state, aux = run(state, chunk)
            self.release(chunk, aux)
            return state, aux

        return run_and_release

    @staticmethod
    def release(chunk: Any, fence: Any) -> None:
        """Hand a chunk's host pool buffer back for reuse once ``fence`` (arrays depending on every
        computation that read the chunk) is ready; the chunk's pool must not be read after this.

        Chunks that are never released keep their buffer to themselves (it is not reused).
        """
        if isinstance(chunk, FrameChunk) and chunk.lease is not None:
            chunk.lease.release(fence)

    def chunk(self, rngs: list[np.random.Generator], count: int) -> Any:
        """One chunk of ``count`` updates for every seed (seed i draws from ``rngs[i]``)."""
        (only,) = self.block(rngs, [count])
        return only

    def block(self, rngs: list[np.random.Generator], counts: list[int]) -> list[Any]:
        """Chunks of ``counts`` updates, drawn, gathered and sent together.

        The batches are those of successive :meth:`chunk` calls (a replay draws ``a + b`` updates
        as ``a`` then ``b``), but the fixed costs of a draw, a gather and a transfer are paid once
        for the block: this is what keeps small chunks (1 update per call) as cheap per batch as
        large ones. Host-gathered chunks of a block share one pool and one lease.
        """
        ends = np.cumsum(counts).tolist()
        spans = list(zip([0, *ends[:-1]], ends, strict=True))
        total = ends[-1]
        if not self.is_frames:
            per_seed = [self.replay.sample_chunk(self.batch_size, total, rng) for rng in rngs]
            batches = Batch(*(np.stack(field, axis=1) for field in zip(*per_seed, strict=True)))
            if self.driver == "loop":
                per_update = [Batch(*(field[i] for field in batches)) for i in range(total)]
                return [per_update[low:high] for low, high in spans]
            return [Batch(*(field[low:high] for field in batches)) for low, high in spans]
        per_seed = [self.replay.sample_refs_chunk(self.batch_size, total, rng) for rng in rngs]
        lease = None
        if self.placement == "device":
            pool = self._pool
        else:
            obs = self.replay.store.obs
            _, batch, window = per_seed[0].frames.shape
            lease = self.ring.lease((len(rngs), total * batch * window, *obs.shape[1:]), obs.dtype, len(counts))
            per_seed = self._gather_pools(per_seed, lease.buffer)
            # the one large transfer, started here on the feed's thread (adopted, not copied, on CPU)
            pool = jax.device_put(lease.buffer, may_alias=True)
        if len(per_seed) == 1:  # a view: np.stack's fixed cost is a third of a 1-update chunk's
            refs = FrameRefs(*(field[:, None] for field in per_seed[0]))
        else:
            refs = FrameRefs(*(np.stack(field, axis=1) for field in zip(*per_seed, strict=True)))
        refs = refs._replace(frames=refs.frames.astype(np.int32))
        return [FrameChunk(pool, FrameRefs(*(field[low:high] for field in refs)), lease) for low, high in spans]

    def _gather_pools(self, per_seed: list[FrameRefs], pool: np.ndarray) -> list[FrameRefs]:
        """Every seed's frame pool into ``pool`` [seeds, count * B * window, H, W], gathered by
        parallel tasks; returns the references into it.

        Each task copies a contiguous run of one seed's samples into its own slice of the pool
        (numpy releases the GIL while it copies), so a many-core host gathers a chunk in a
        fraction of one core's time, a 1-update chunk included; the references are shifted to
        their slice.
        """
        obs = self.replay.store.obs
        count, batch, window = per_seed[0].frames.shape
        samples = count * batch
        parts = max(1, min(-(-self._workers // len(per_seed)), samples // _MIN_TASK_SAMPLES))
        bounds = np.linspace(0, samples, parts + 1).astype(int)
        flat = [FrameRefs(*(field.reshape(samples, *field.shape[2:]) for field in refs)) for refs in per_seed]

        def gather(seed: int, low: int, high: int) -> FrameRefs:
            refs = FrameRefs(*(field[low:high] for field in flat[seed]))
            _, local = gather_frame_pool(obs, refs, out=pool[seed, low * window : high * window])
            return local._replace(frames=local.frames + low * window)

        tasks = [(seed, low, high) for seed in range(len(per_seed)) for low, high in zip(bounds[:-1], bounds[1:])]
        # the calling thread takes the first task itself: no hand-off when there is only one
        pending = [self._executor.submit(gather, *task) for task in tasks[1:]]
        gathered = [gather(*tasks[0]), *(future.result() for future in pending)]
        return [
            FrameRefs(
                *(
                    np.concatenate(fields).reshape(count, batch, *fields[0].shape[1:])
                    for fields in zip(*gathered[seed * parts : (seed + 1) * parts])
                )
            )
            for seed in range(len(per_seed))
        ]

    def chunks(self, rngs: list[np.random.Generator], counts: Iterable[int], depth: int = 1) -> Iterator[Any]:
        """:meth:`chunk` for each count, prepared ahead on a background thread, in blocks of at
        least ``block_updates`` updates (see :meth:`block`)."""

        def blocks() -> Iterator[Any]:
            group: list[int] = []
            for count in counts:
                group.append(count)
                if sum(group) >= self.block_updates:
                    yield from self.block(rngs, group)
                    group = []
            if group:
                yield from self.block(rngs, group)

        return prefetch(blocks(), depth)

    def epoch(self, rngs: list[np.random.Generator], steps: int, per_call: int) -> Iterator[tuple[int, Any]]:
        """``(count, chunk)`` for ``steps`` updates in chunks of at most ``per_call``, prefetched."""
        counts = [min(per_call, steps - done) for done in range(0, steps, per_call)]
        return zip(counts, self.chunks(rngs, counts), strict=True)
