"""Damaged data: a decoded cache is checked on load and rebuilt from its shard; a damaged shard is
one line naming it and the fetch command, from any worker, and never costs the cache made from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from offline_gitd.data.cache import DamagedShard, build_rlu_cache
from offline_gitd.data.cache_reader import DamagedCache, cache_problem, open_checkpoint_cache
from offline_gitd.data.paths import rlu_cache_dir, rlu_raw_dir, rlu_shard_name
from tests.rlu_shards import make_synthetic_episode, write_rlu_episodes_shard

LAYOUT = [(12, True), (7, False), (20, True)]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Pong run 1, checkpoints 0 and 1, as real shards under a data root."""
    raw = rlu_raw_dir(tmp_path, "atari_episodes_ordered", "Pong")
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for checkpoint in range(2):
        episodes = [make_synthetic_episode(rng, n, checkpoint, i, t) for i, (n, t) in enumerate(LAYOUT)]
        write_rlu_episodes_shard(raw / rlu_shard_name(1, checkpoint, 50), episodes)
    return tmp_path


def snapshot(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size - 100])


def negative_action(path: Path) -> None:
    actions = np.load(path)
    actions[3] = -1
    np.save(path, actions)  # same size: only the values check can see it


def bad_discount(path: Path) -> None:
    discounts = np.load(path)
    discounts[0] = 7.0
    np.save(path, discounts)


DAMAGE = {
    "frames.npy": truncate,
    "actions.npy": truncate,
    "discounts.npy": truncate,
    "episode_starts.npy": truncate,
    "meta.json": lambda p: p.write_text("{"),
    "actions.npy:-1": negative_action,
    "discounts.npy:7": bad_discount,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_cache_is_named_on_open_and_rebuilt_from_its_shard(root: Path, damage: str, capsys) -> None:
    (cache,) = build_rlu_cache(root, "Pong", 1, [0], jobs=1, progress=False)
    good = snapshot(cache)
    DAMAGE[damage](cache / damage.split(":")[0])
    assert cache_problem(cache) is not None
    with pytest.raises(DamagedCache) as err:
        open_checkpoint_cache(cache)
    assert str(cache) in str(err.value) and "\n" not in str(err.value)
    assert build_rlu_cache(root, "Pong", 1, [0], jobs=1, progress=False) == [cache]
    warning = capsys.readouterr().err.strip().splitlines()
    assert len(warning) == 1 and "is damaged" in warning[0] and "decoding" in warning[0]
    after = snapshot(cache)
    meta = {k: v for k, v in json.loads(after.pop("meta.json")).items()}
    assert meta["files"] == {name: len(data) for name, data in after.items()}
    assert after == {k: v for k, v in good.items() if k != "meta.json"}
    assert cache_problem(cache) is None and open_checkpoint_cache(cache).num_frames == 39
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]  # no temp or old folder left


def flip_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("jobs", [1, 2])
def test_corrupt_shard_is_one_line_naming_it_and_the_fetch_command(root: Path, jobs: int) -> None:
    """With two jobs the error comes back from a spawned decoding worker: it must arrive whole."""
    shard = rlu_raw_dir(root, "atari_episodes_ordered", "Pong") / rlu_shard_name(1, 1, 50)
    flip_middle(shard)
    with pytest.raises(DamagedShard) as err:
        build_rlu_cache(root, "Pong", 1, [0, 1], jobs=jobs, progress=False)
    message = str(err.value)
    assert "\n" not in message and str(shard) in message
    assert "offline_gitd fetch rlu-atari --game Pong --run 1 --checkpoints 1" in message
    assert not rlu_cache_dir(root, "Pong", 1, 1).exists()
    assert not [p for p in rlu_cache_dir(root, "Pong", 1, 1).parent.iterdir() if p.name.startswith(".")]


def test_truncated_shard_keeps_the_cache_made_from_it(root: Path) -> None:
    (cache,) = build_rlu_cache(root, "Pong", 1, [0], jobs=1, progress=False)
    good = snapshot(cache)
    shard = rlu_raw_dir(root, "atari_episodes_ordered", "Pong") / rlu_shard_name(1, 0, 50)
    truncate(shard)  # its size no longer matches the cache's meta: a rebuild is attempted
    with pytest.raises(DamagedShard, match="is kept"):
        build_rlu_cache(root, "Pong", 1, [0], jobs=1, progress=False)
    assert snapshot(cache) == good
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]


def test_cache_from_before_manifests_still_opens(root: Path) -> None:
    (cache,) = build_rlu_cache(root, "Pong", 1, [0], jobs=1, progress=False)
    meta = json.loads((cache / "meta.json").read_text())
    del meta["files"]
    (cache / "meta.json").write_text(json.dumps(meta))
    assert cache_problem(cache) is None
    shutil.copy(cache / "actions.npy", cache / "frames.npy")  # but shapes are still checked
    assert "frames.npy" in cache_problem(cache)


# -- Minari HDF5 -------------------------------------------------------------------------------------

MINARI_ID = "tests/cartpole/damage-v0"


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory) -> Path:
    from tests.minari_fixtures import record_into_new_root

    return record_into_new_root(tmp_path_factory.mktemp("minari"), MINARI_ID, "CartPole-v1", 300)


def hdf5_truncated(data: bytearray) -> bytearray:
    return data[: len(data) // 2]


def hdf5_header_flipped(data: bytearray) -> bytearray:
    for i in range(0, 2048, 7):
        data[i] ^= 0xFF
    return data


def hdf5_body_flipped(data: bytearray) -> bytearray:
    for i in range(len(data) // 2, len(data) // 2 + 4096, 3):
        data[i] ^= 0xFF
    return data


@pytest.mark.parametrize("damage", [hdf5_truncated, hdf5_header_flipped, hdf5_body_flipped])
def test_damaged_minari_file_is_one_line_with_the_fix(minari_root, tmp_path, monkeypatch, capsys, damage) -> None:
    from offline_gitd.cli import main

    root = tmp_path / "minari"
    shutil.copytree(minari_root, root)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    hdf5 = root / MINARI_ID / "data" / "main_data.hdf5"
    hdf5.write_bytes(bytes(damage(bytearray(hdf5.read_bytes()))))
    args = ["train", "--dataset", f"minari:{MINARI_ID}", "--epochs", "1", "--steps-per-epoch", "5"]
    assert main([*args, "--eval-episodes", "0", "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"Minari dataset '{MINARI_ID}' is damaged" in err[0]
    assert f"offline_gitd fetch minari {MINARI_ID}" in err[0] and str(root / MINARI_ID) in err[0]


def test_cache_of_another_format_is_rebuilt_without_blame(root: Path, capsys) -> None:
    (cache,) = build_rlu_cache(root, "Pong", 1, [0], jobs=1, progress=False)
    meta = json.loads((cache / "meta.json").read_text())
    (cache / "meta.json").write_text(json.dumps({**meta, "format_version": 0}))
    capsys.readouterr()
    build_rlu_cache(root, "Pong", 1, [0], jobs=1, progress=False)
    assert "damaged" not in capsys.readouterr().err and cache_problem(cache) is None
