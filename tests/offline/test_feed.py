"""The learner's feed (docs/offline.md#feeding-the-device): frame references expand on the device to exactly the batches
the replay samples today, wherever the frames live, through both drivers and several seeds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.batch import Batch, expand_frame_refs
from offline_gitd.data.episode_store import EpisodeStore, SegmentedRows
from offline_gitd.data.replay import Replay, gather_frame_pool
from offline_gitd.offline import feed as feed_module
from offline_gitd.offline.feed import ChunkFeed, choose_frames, prefetch, resident_frames
from offline_gitd.offline.host_pools import ALIGN, PoolRing
from tests.data.test_replay import GAMMA, make_episodes, store_from_arrays


@pytest.fixture(scope="module")
def episodes():
    return make_episodes(np.random.default_rng(0))


def segmented(store: EpisodeStore, cuts=(5, 6, 19)) -> EpisodeStore:
    """The same store with its frames split into memory segments (one per RLU checkpoint)."""
    frames = np.asarray(store.obs)
    parts = np.split(frames, cuts)
    return EpisodeStore.from_arrays(
        SegmentedRows(parts), store.actions, store.rewards, store.terminals, store.episode_starts
    )


def assert_batches_equal(got: Batch, want: Batch) -> None:
    for name, g, w in zip(Batch._fields, got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w, err_msg=name)
        assert np.asarray(g).dtype == w.dtype, name


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("stack", [1, 4])
@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("segments", [False, True])
def test_refs_expand_to_the_sampled_batches(episodes, n, stack, prioritized, segments):
    """Same generator, same batches: from the store itself (kept on the device) and from a host
    pool of each sample's distinct frames; stack + n frames per sample instead of 2 stack."""
    store = store_from_arrays(episodes)
    store = segmented(store) if segments else store
    replay = Replay(store, stack=stack, n_step=n, gamma=GAMMA, prioritized=prioritized)
    want = replay.sample_chunk(8, 5, np.random.default_rng(3))
    refs = replay.sample_refs_chunk(8, 5, np.random.default_rng(3))
    assert refs.frames.shape == (5, 8, stack + n)
    expand = jax.jit(jax.vmap(expand_frame_refs, in_axes=(None, 0, None)), static_argnums=2)
    resident = resident_frames(store.obs, block_rows=7)
    np.testing.assert_array_equal(np.asarray(resident), np.asarray(store.obs[np.arange(store.num_rows)]))
    assert_batches_equal(expand(resident, refs, stack), want)
    pool, pooled = gather_frame_pool(store.obs, refs)
    assert pool.shape == (5 * 8 * (stack + n), 84, 84)
    expand_pooled = jax.vmap(lambda r: expand_frame_refs(jnp.asarray(pool), r, stack))
    assert_batches_equal(expand_pooled(pooled), want)


def recording_step(state, batch):
    """A consumer that returns what it was fed, to compare the feed with the replay."""
    return state + 1, batch._asdict()


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("block_updates", [1, 64])  # each chunk alone / all chunks in one block
@pytest.mark.parametrize("driver", ["loop", "scan"])
@pytest.mark.parametrize("frames", ["device", "host"])
def test_feed_gives_each_seed_its_own_sample_chunk(episodes, driver, frames, block_updates, prioritized, monkeypatch):
    store = segmented(store_from_arrays(episodes))
    replay = Replay(store, stack=4, n_step=3, gamma=GAMMA, prioritized=prioritized)
    monkeypatch.setattr(feed_module, "_MIN_TASK_SAMPLES", 3)  # host: a seed's samples in 2 to 4 parts
    feed = ChunkFeed(replay, batch_size=4, driver=driver, frames=frames, workers=4, block_updates=block_updates)
    assert feed.placement == frames
    run = feed.runner(recording_step)
    seeds = [7] if driver == "loop" else [0, 1, 2]  # one seed takes its own (view) path
    counts = [3, 2]
    state = jnp.zeros(len(seeds))
    got = []
    for chunk in feed.chunks([np.random.default_rng(s) for s in seeds], counts):
        state, aux = run(state, chunk)
        got.append(jax.device_get(aux))
    np.testing.assert_array_equal(np.asarray(state), 5)
    for i, seed in enumerate(seeds):
        rng = np.random.default_rng(seed)
        for count, aux in zip(counts, got, strict=True):
            want = replay.sample_chunk(4, count, rng)
            assert_batches_equal(Batch(**{name: aux[name][:, i] for name in Batch._fields}), want)


@pytest.mark.parametrize("driver", ["loop", "scan"])
def test_vector_data_feeds_plain_batches(driver):
    store = EpisodeStore((3,), np.float32)
    store.add_episode(np.arange(18, dtype=np.float32).reshape(6, 3), np.arange(5), np.ones(5), np.zeros(5))
    replay = Replay(store, n_step=2, gamma=GAMMA)
    feed = ChunkFeed(replay, batch_size=2, driver=driver, frames="device")
    assert feed.placement is None
    chunks = list(feed.chunks([np.random.default_rng(0)], [3, 2]))  # one block of two chunks
    rng = np.random.default_rng(0)
    for count, chunk in zip([3, 2], chunks, strict=True):
        if driver == "loop":
            assert len(chunk) == count
            chunk = Batch(*(np.stack(field) for field in zip(*chunk, strict=True)))
        assert_batches_equal(Batch(*(field[:, 0] for field in chunk)), replay.sample_chunk(2, count, rng))


def test_auto_keeps_the_store_on_the_device_only_when_it_fits():
    assert choose_frames("auto", 40, free_bytes=100) == "device"
    assert choose_frames("auto", 60, free_bytes=100) == "host"
    assert choose_frames("host", 1, free_bytes=100) == "host"
    with pytest.raises(ValueError, match="unknown frame placement"):
        choose_frames("gpu", 1)


def test_prefetch_keeps_order_raises_and_stops():
    assert list(prefetch(iter(range(10)), depth=2)) == list(range(10))

    def failing():
        yield 1
        raise RuntimeError("boom")

    items = prefetch(failing())
    assert next(items) == 1
    with pytest.raises(RuntimeError, match="boom"):
        next(items)
    produced = []

    def endless():
        while True:
            produced.append(len(produced))
            yield produced[-1]

    items = prefetch(endless())
    assert next(items) == 0
    items.close()  # joins the producer: it must notice and stop
    assert len(produced) <= 3


def test_frame_placement_is_not_part_of_the_method():
    """Where frames are gathered changes speed, not batches, so runs share their config hash."""
    from offline_gitd.offline.config import OfflineConfig

    device = OfflineConfig(dataset="rlu-atari:Pong/1", out="a", frames="device")
    assert device.config_hash() == OfflineConfig(dataset="rlu-atari:Pong/1", out="a", frames="host").config_hash()


def test_host_pool_buffers_are_reused_and_adopted_without_a_copy(episodes):
    """A training loop reuses a handful of aligned pool buffers (no fresh pages per chunk) and
    the CPU backend reads them in place; a chunk that was never run keeps its frames."""
    store = segmented(store_from_arrays(episodes))
    replay = Replay(store, stack=4, n_step=1, gamma=GAMMA)
    # blocks of 2 chunks of 2 updates share a pool
    feed = ChunkFeed(replay, batch_size=4, driver="scan", frames="host", workers=2, block_updates=4)
    kept = feed.chunk([np.random.default_rng(9)], 3)  # not run, so never released
    kept_frames = np.array(kept.pool)
    run = feed.runner(recording_step)
    state = jnp.zeros(2)
    rngs = [np.random.default_rng(0), np.random.default_rng(1)]
    for _, chunk in feed.epoch(rngs, steps=41, per_call=2):
        state, aux = run(state, chunk)
        np.asarray(aux["reward"])  # the loop's one read per chunk
    assert int(np.asarray(state)[0]) == 41
    # 1 kept + at most 3 blocks in flight (running, queued, being gathered) + the odd last block's
    assert feed.ring.allocated <= 5
    np.testing.assert_array_equal(np.asarray(kept.pool), kept_frames)
    if jax.default_backend() == "cpu":
        assert kept.pool.unsafe_buffer_pointer() == kept.lease.buffer.ctypes.data  # adopted, not copied


def test_a_released_pool_is_not_overwritten_before_its_fence():
    """JAX drops its hold on an adopted buffer before a computation reading it has finished, so
    the ring must wait for the fence: overwriting at once would change this sum (it did)."""
    ring = PoolRing()
    lease = ring.lease((4000, 84, 84), np.uint8)
    buffer = lease.buffer
    buffer[:] = 1
    assert buffer.ctypes.data % ALIGN == 0
    total = jax.jit(lambda x: jax.lax.fori_loop(0, 30, lambda i, s: s + x.astype(jnp.float32).sum(), 0.0))
    expected = float(total(jnp.ones(buffer.shape, jnp.uint8)))
    pool = jax.device_put(buffer, may_alias=True)
    fence = total(pool)  # dispatched, still running
    del pool
    lease.release(fence)
    again = ring.lease((4000, 84, 84), np.uint8)
    assert again.buffer is buffer and ring.allocated == 1
    again.buffer[:] = 0  # the feed refills it
    assert float(fence) == expected
