"""RLU shards -> episodes -> per-checkpoint cache -> replay store, on shards from the writer."""

import json
import shutil
import sys

import numpy as np
import pytest

from offline_gitd.data import cache as cache_module
from offline_gitd.data.cache import build_rlu_cache, load_rlu_store
from offline_gitd.data.cache_reader import cache_is_valid, open_checkpoint_cache
from offline_gitd.data.cache_writer import write_checkpoint_cache
from offline_gitd.data.paths import rlu_cache_dir, rlu_raw_dir, rlu_shard_name
from offline_gitd.data.replay import Replay
from offline_gitd.data.rlds import iter_rlds_episodes, rlu_episode_from_rlds
from offline_gitd.data.rlu import iter_rlu_episodes
from offline_gitd.data.rlu_tfds import iter_tfds_episodes
from offline_gitd.data.tfrecord import TFRecordError
from tests.rlu_shards import make_synthetic_episode, write_rlu_episodes_shard

# (length, terminal) per episode of each checkpoint: ends truncated and terminal both occur
LAYOUT = [(12, True), (7, False), (20, True), (9, False)]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two checkpoints of Pong run 1 under a data root, and the episodes written into them."""
    root = tmp_path_factory.mktemp("data")
    raw = rlu_raw_dir(root, "atari_episodes_ordered", "Pong")
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    written = {}
    for checkpoint in range(2):
        episodes = [
            make_synthetic_episode(rng, length, checkpoint, i, terminal) for i, (length, terminal) in enumerate(LAYOUT)
        ]
        write_rlu_episodes_shard(raw / rlu_shard_name(1, checkpoint, 50), episodes)
        written[checkpoint] = episodes
    return root, raw, written


def test_episodes_roundtrip(shards):
    _, raw, written = shards
    episodes = list(iter_rlu_episodes(raw / rlu_shard_name(1, 0, 50)))
    assert len(episodes) == len(LAYOUT)
    for got, want in zip(episodes, written[0], strict=True):
        np.testing.assert_array_equal(got.frames, want["observations"])
        np.testing.assert_array_equal(got.actions, want["actions"])
        np.testing.assert_array_equal(got.unclipped_rewards, want["unclipped_rewards"])
        np.testing.assert_array_equal(got.clipped_rewards, want["clipped_rewards"])
        assert got.terminal == (want["discounts"][-1] == 0)
        assert got.episode_idx == want["episode_idx"] and got.checkpoint_idx == 0
        assert got.episode_return == pytest.approx(want["episode_return"])


def test_rlds_view_roundtrip(shards):
    _, raw, _ = shards
    episodes = list(iter_rlu_episodes(raw / rlu_shard_name(1, 0, 50)))
    for episode, rlds in zip(episodes, iter_rlds_episodes(episodes), strict=True):
        steps = rlds["steps"]
        assert steps["observation"].shape == (len(episode.actions), 84, 84, 1)
        assert steps["is_first"][0] and steps["is_first"].sum() == 1
        assert steps["is_last"][-1] and steps["is_last"].sum() == 1
        assert steps["is_terminal"].sum() == episode.terminal and steps["is_terminal"][-1] == episode.terminal
        # TFDS's layout (checked against TFDS itself in test_rlu_tfds.py): terminal discounts move one step earlier
        tfds_discounts = np.append(episode.discounts[1:], 0.0) if episode.terminal else episode.discounts
        np.testing.assert_array_equal(steps["discount"], tfds_discounts)
        back = rlu_episode_from_rlds(rlds)
        np.testing.assert_array_equal(back.frames, episode.frames)
        np.testing.assert_array_equal(back.clipped_rewards, episode.clipped_rewards)
        # TFDS's nested steps dataset arrives as an iterable of step dicts
        listed = dict(rlds, steps=[{k: v[t] for k, v in steps.items()} for t in range(len(episode.actions))])
        np.testing.assert_array_equal(rlu_episode_from_rlds(listed).discounts, episode.discounts)


def test_cache_contents(shards, tmp_path):
    _, raw, written = shards
    shard = raw / rlu_shard_name(1, 1, 50)
    target = tmp_path / "checkpoint_01"
    meta = write_checkpoint_cache(shard, target)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # temp folder renamed away
    cache = open_checkpoint_cache(target)
    assert isinstance(cache.frames, np.memmap) and cache.frames.shape == (48, 84, 84)
    assert meta == json.loads((target / "meta.json").read_text()) == cache.meta
    assert meta["num_frames"] == 48 and meta["num_episodes"] == 4 and meta["shard"] == shard.name
    assert meta["shard_size"] == shard.stat().st_size and meta["num_terminal_episodes"] == 2
    np.testing.assert_array_equal(cache.frames, np.concatenate([e["observations"] for e in written[1]]))
    np.testing.assert_array_equal(cache.discounts, np.concatenate([e["discounts"] for e in written[1]]))
    np.testing.assert_array_equal(cache.episode_starts, [0, 12, 19, 39])
    np.testing.assert_array_equal(cache.episode_terminal, [t for _, t in LAYOUT])
    assert cache.actions.dtype == np.int32
    assert cache_is_valid(target, shard)


def test_failed_decode_leaves_no_cache(shards, tmp_path):
    _, raw, _ = shards
    data = (raw / rlu_shard_name(1, 0, 50)).read_bytes()
    bad = tmp_path / rlu_shard_name(1, 0, 50)
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(TFRecordError, match=bad.name):
        write_checkpoint_cache(bad, tmp_path / "cache")
    assert list(tmp_path.iterdir()) == [bad]


def test_build_decodes_once_in_parallel(shards, monkeypatch):
    root, _, _ = shards
    paths = build_rlu_cache(root, "Pong", 1, [0, 1], jobs=2, progress=False)
    assert paths == [rlu_cache_dir(root, "Pong", 1, c) for c in (0, 1)]
    assert all(cache_is_valid(p) for p in paths)

    def fail(*args):
        raise AssertionError("decoded again")

    monkeypatch.setattr(cache_module, "_decode_job", fail)
    assert build_rlu_cache(root, "Pong", 1, [0, 1], jobs=1, progress=False) == paths


def test_store_and_first_fraction(shards):
    root, _, written = shards
    build_rlu_cache(root, "Pong", 1, [0, 1], jobs=1, progress=False)
    full = load_rlu_store(root, "Pong", 1, [0, 1])
    assert full.num_rows == 96 and full.num_episodes == 8
    assert full.num_transitions == 96 - 4  # each truncated episode's last row only bootstraps
    np.testing.assert_array_equal(full.rewards[:48], np.concatenate([e["clipped_rewards"] for e in written[0]]))
    # 25% of 48 rows = 12 transitions: exactly episode 0 (terminal) of each checkpoint
    quarter = load_rlu_store(root, "Pong", 1, [0, 1], fraction=0.25, reward="unclipped")
    assert quarter.num_rows == 24 and quarter.num_transitions == 24
    # 30% -> 15 transitions: episode 0 plus 3 of episode 1, whose 4th row is the bootstrap state
    cut = load_rlu_store(root, "Pong", 1, [0, 1], fraction=0.3)
    assert cut.num_rows == 32 and cut.num_transitions == 30
    np.testing.assert_array_equal(cut.episode_starts, [0, 12, 16, 28])
    batch = Replay(cut, n_step=3, gamma=0.5).batch_at(np.array([14, 16 + 14]))
    np.testing.assert_allclose(batch.discount, [0.5, 0.5])  # truncated by the cut: bootstraps
    np.testing.assert_array_equal(batch.next_obs[0, ..., -1], written[0][1]["observations"][3])
    np.testing.assert_array_equal(batch.next_obs[1, ..., -1], written[1][1]["observations"][3])
    assert not batch.obs[1, ..., 0].any()  # row 2 of its episode: one zero frame in the stack
    np.testing.assert_array_equal(batch.obs[1, ..., 1], written[1][1]["observations"][0])


def test_fractional_cache_decodes_only_what_the_selector_keeps(shards, tmp_path):
    root, _, _ = shards
    other = tmp_path / "data"
    shutil.copytree(root / "rlu_atari" / "raw", other / "rlu_atari" / "raw")
    build_rlu_cache(root, "Pong", 1, [0, 1], jobs=1, progress=False)
    paths = build_rlu_cache(other, "Pong", 1, [0, 1], jobs=1, progress=False, fraction=0.3)
    meta = open_checkpoint_cache(paths[1]).meta
    # K = ceil(0.3 * 48) = 15 transitions + the bootstrap row after them
    assert (meta["num_frames"], meta["shard_num_frames"], meta["fraction"]) == (16, 48, 0.3)
    for fraction in (0.3, 0.1):
        full = load_rlu_store(root, "Pong", 1, [0, 1], fraction=fraction)
        part = load_rlu_store(other, "Pong", 1, [0, 1], fraction=fraction)
        rows = np.arange(full.num_rows)
        np.testing.assert_array_equal(part.obs[rows], full.obs[rows])
        for name in ("actions", "rewards", "terminals", "episode_starts"):
            np.testing.assert_array_equal(getattr(part, name), getattr(full, name), err_msg=name)
    with pytest.raises(ValueError, match="rebuild"):
        load_rlu_store(other, "Pong", 1, [0, 1], fraction=0.5)
    build_rlu_cache(other, "Pong", 1, [0, 1], jobs=1, progress=False, fraction=0.5)
    assert open_checkpoint_cache(paths[1]).meta["fraction"] == 0.5
    assert load_rlu_store(other, "Pong", 1, [0, 1], fraction=0.5).num_rows == 2 * 25


def test_tfds_path_needs_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # as if not installed
    with pytest.raises(ImportError, match=r"offline-gitd\[tfds\]"):
        next(iter_tfds_episodes("Pong", 1, 0))
