"""The optional TFDS read path, :func:`iter_tfds_episodes`, through TFDS's real RLU Atari builder.

Runs only where the ``tfds`` extra is installed (``make test-tfds``: its own venv). The real data
(``gs://rl_unplugged``) is out of reach here, so two of TFDS's own test mechanisms stand in for it,
both through ``rlu_atari_checkpoints_ordered`` as TFDS ships it:

- ``tfds.testing.mock_data``: ``tfds.load`` yields random episodes generated from the builder's
  real feature spec, encoded and decoded by it (PNG frames, nested steps dataset), with the RLDS
  flags made consistent (random flags are, and must be, rejected);
- a run prepared by the builder's own code (``download_and_prepare``: TFRecord reading, TFDS's
  ``atari_example_to_rlds``, writing, reading back) from local shards in the bucket's layout,
  written by ``tests/rlu_shards.py``; the episodes must equal
  :func:`iter_rlu_episodes`'s on the same shards.
"""

import dataclasses

import numpy as np
import pytest

from offline_gitd.data.paths import rlu_shard_name
from offline_gitd.data.registry import load_rlu_registry
from offline_gitd.data.rlds import STEP_KEYS, rlds_episode
from offline_gitd.data.rlu import RLUEpisode, iter_rlu_episodes
from offline_gitd.data.rlu_tfds import iter_tfds_episodes
from tests.rlu_shards import make_synthetic_episode, write_rlu_episodes_shard

tfds = pytest.importorskip("tensorflow_datasets", reason="needs the optional tfds extra: make test-tfds")

from tensorflow_datasets.rl_unplugged import rlu_common  # noqa: E402
from tensorflow_datasets.rl_unplugged.rlu_atari_checkpoints_ordered import (  # noqa: E402
    rlu_atari_checkpoints_ordered as ordered,
)
from tensorflow_datasets.testing import mocking  # noqa: E402

BUILDER = "rlu_atari_checkpoints_ordered"
MOCK_STEPS = 6
# (length, terminal) per episode of each local checkpoint: terminal, truncated and a one-step
# terminal episode (its only discount is the terminal 0, which TFDS's discount shift must keep)
LAYOUT = [(12, True), (7, False), (1, True), (9, False), (2, True)]
LOCAL_SHARDS = 2


def test_builder_names_match_the_bucket_and_iter_tfds_episodes(tmp_path):
    """Config ``{Game}_run_{N}`` and split ``checkpoint_{i:02d}`` exist for every registry game and
    run, and split i reads shard i of the bucket's ``atari_episodes_ordered`` layout."""
    registry = load_rlu_registry()
    configs = {config.name for config in ordered.RluAtariCheckpointsOrdered.BUILDER_CONFIGS}
    assert configs == {f"{game}_run_{run}" for game in registry.games for run in registry.runs}
    for game in ("Pong", "Carnival"):  # 50 and 49 checkpoints
        builder = tfds.builder(f"{BUILDER}/{game}_run_1", data_dir=tmp_path)
        num_shards = registry.num_shards(game, "atari_episodes_ordered")
        splits = builder.get_splits()  # lazy generators: nothing is read
        assert sorted(splits) == [f"checkpoint_{i:02d}" for i in range(num_shards)]
        for checkpoint in (0, num_shards - 1):
            path = rlu_common.filename(builder.get_file_prefix(), builder.num_shards(), checkpoint)
            assert path == f"gs://{registry.bucket}/" + registry.object_name(game, 1, checkpoint)
    with pytest.raises(ValueError, match="pong_run_1 not found"):
        tfds.builder(f"{BUILDER}/pong_run_1", data_dir=tmp_path)


def _consistent_episode(example, terminal):
    """Make a mock episode's RLDS flags agree as in TFDS's conversion; keep the random rest.

    A terminal episode gets TFDS's discounts (last two 0) and ``is_terminal`` on its last step;
    rewards are spread over [-5, 5) so that clipping them does something.
    """
    steps = example["steps"]
    last = len(steps) - 1
    for t, step in enumerate(steps):
        step["is_first"] = np.bool_(t == 0)
        step["is_last"] = np.bool_(t == last)
        step["is_terminal"] = np.bool_(terminal and t == last)
        step["discount"] = np.float32(0.0 if terminal and t >= last - 1 else 1.0)
        step["reward"] = np.float32(10.0 * step["reward"] - 5.0)
    return example


@pytest.fixture
def consistent_mock_episodes(monkeypatch):
    """Mock episodes alternate terminal / truncated, starting terminal."""
    random_iter = mocking.RandomFakeGenerator.__iter__

    def consistent_iter(self):
        for index, example in enumerate(random_iter(self)):
            yield _consistent_episode(example, index % 2 == 0) if "steps" in example else example

    monkeypatch.setattr(mocking.RandomFakeGenerator, "__iter__", consistent_iter)


def test_mock_data_through_the_real_feature_spec(consistent_mock_episodes):
    with tfds.testing.mock_data(num_examples=2, num_sub_examples=MOCK_STEPS):
        episodes = list(iter_tfds_episodes("Pong", 1, 0))
    assert len(episodes) == 2
    for index, episode in enumerate(episodes):
        assert isinstance(episode, RLUEpisode)
        assert episode.frames.dtype == np.uint8 and episode.frames.shape == (MOCK_STEPS, 84, 84)
        assert episode.actions.dtype == np.int64 and episode.actions.shape == (MOCK_STEPS,)
        for rewards_or_discounts in (episode.unclipped_rewards, episode.clipped_rewards, episode.discounts):
            assert rewards_or_discounts.dtype == np.float32 and rewards_or_discounts.shape == (MOCK_STEPS,)
        np.testing.assert_array_equal(episode.clipped_rewards, np.clip(episode.unclipped_rewards, -1.0, 1.0))
        assert episode.clipped_episode_return == pytest.approx(float(episode.clipped_rewards.sum()))
        assert isinstance(episode.checkpoint_idx, int) and isinstance(episode.episode_idx, int)
        # TFDS's terminal layout (discounts ..., 1, 0, 0) comes back as RLU's (..., 1, 1, 0)
        assert episode.terminal == (index % 2 == 0)
        want = np.ones(MOCK_STEPS, np.float32)
        want[-1] = 0.0 if episode.terminal else 1.0
        np.testing.assert_array_equal(episode.discounts, want)


def test_random_mock_flags_are_rejected():
    """Unpatched mock data sets is_terminal at random steps: the conversion refuses it."""
    with tfds.testing.mock_data(num_examples=2, num_sub_examples=MOCK_STEPS):
        with pytest.raises(ValueError, match="is_terminal"):
            list(iter_tfds_episodes("Pong", 1, 0))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Local shards of Pong run 1 in the bucket's layout, and a TFDS data_dir the builder prepared
    from them (its input prefix and shard count patched, as in TFDS's own builder test)."""
    root = tmp_path_factory.mktemp("rlu_tfds")
    bucket = root / "atari_episodes_ordered"
    raw = bucket / "Pong"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for checkpoint in range(LOCAL_SHARDS):
        episodes = [
            make_synthetic_episode(rng, length, checkpoint, i, terminal) for i, (length, terminal) in enumerate(LAYOUT)
        ]
        write_rlu_episodes_shard(raw / rlu_shard_name(1, checkpoint, LOCAL_SHARDS), episodes)
    data_dir = root / "tfds"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ordered.RluAtariCheckpointsOrdered, "_INPUT_FILE_PREFIX", str(bucket))
        patch.setattr(ordered.RluAtariCheckpointsOrdered, "_SHARDS", LOCAL_SHARDS)
        tfds.builder(f"{BUILDER}/Pong_run_1", data_dir=data_dir).download_and_prepare()
        yield raw, data_dir


@pytest.mark.parametrize("checkpoint", range(LOCAL_SHARDS))
def test_prepared_run_equals_the_direct_read(prepared, checkpoint):
    raw, data_dir = prepared
    want = list(iter_rlu_episodes(raw / rlu_shard_name(1, checkpoint, LOCAL_SHARDS)))
    got = list(iter_tfds_episodes("Pong", 1, checkpoint, data_dir=data_dir))
    assert [e.episode_idx for e in got] == [e.episode_idx for e in want] == list(range(len(LAYOUT)))
    assert [e.terminal for e in got] == [terminal for _, terminal in LAYOUT]
    for g, w in zip(got, want, strict=True):
        for field in dataclasses.fields(RLUEpisode):
            a, b = getattr(g, field.name), getattr(w, field.name)
            if isinstance(b, np.ndarray):
                assert a.dtype == b.dtype, field.name
                np.testing.assert_array_equal(a, b, err_msg=field.name)
            else:
                assert a == pytest.approx(b), field.name


def test_rlds_view_equals_tfds_conversion(prepared):
    """:func:`rlds_episode` gives what TFDS's own ``atari_example_to_rlds`` gives, discounts included."""
    raw, data_dir = prepared
    dataset = tfds.load(f"{BUILDER}/Pong_run_1", split="checkpoint_00", data_dir=data_dir, shuffle_files=False)
    want = list(tfds.as_numpy(dataset))
    got = [rlds_episode(e) for e in iter_rlu_episodes(raw / rlu_shard_name(1, 0, LOCAL_SHARDS))]
    assert len(got) == len(want) == len(LAYOUT)
    for g, w in zip(got, want, strict=True):
        assert g["episode_id"] == w["episode_id"] and g["checkpoint_id"] == w["checkpoint_id"]
        assert g["episode_return"] == pytest.approx(w["episode_return"])
        rows = list(w["steps"])
        for key in STEP_KEYS:
            np.testing.assert_array_equal(g["steps"][key], np.stack([row[key] for row in rows]), err_msg=key)
