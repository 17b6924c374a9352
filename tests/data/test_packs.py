"""Packed datasets (docs/datasets.md#packs): ``datasets pack`` writes one archive per recorded Minari
dataset and records it in the manifest; ``fetch minari --mirror`` restores it from a ``file://``
folder or a real HTTP server on 127.0.0.1 (slow, dropping the connection, a wrong byte, truncated),
checking the archive's SHA-256 and then the content digest, never leaving a half-restored dataset
under its final name. Also: a recorded dataset's env is recoverable without this package."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.data.minari_pack import RESTORE_DIR, pack_name, restore_pack
from offline_gitd.errors import UsageError
from tests.rlu_server import RluServer

DATASET = "tests/minatar-breakout/random-v0"
PACK = pack_name(DATASET)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # minari: no author_email


def _cli(argv: list[str], minari_root: Path | None = None) -> int:
    """Run the CLI with ``MINARI_DATASETS_PATH`` restored afterwards (``--data-dir`` sets it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(minari_root or os.environ.get("MINARI_DATASETS_PATH", "/nonexistent")))
        return main(argv)


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A 300-step MinAtar Breakout dataset recorded by ``collect``, its manifest entry and its pack:
    (data root, manifest, folder of packs)."""
    base = tmp_path_factory.mktemp("packed")
    data, manifest, packs = base / "data", base / "manifest.json", base / "packs"
    argv = ["collect", "MinAtar/Breakout-v1", "--policy", "random", "--steps", "300", "--out", DATASET]
    assert _cli([*argv, "--data-dir", str(data), "--no-progress", "--no-tensorboard"]) == 0
    assert _cli(["datasets", "manifest", f"minari:{DATASET}", "--out", str(manifest), "--data-dir", str(data)]) == 0
    pack = ["datasets", "pack", f"minari:{DATASET}", "--out", str(packs), "--manifest", str(manifest)]
    assert _cli([*pack, "--data-dir", str(data)]) == 0
    return data, manifest, packs


def _entry(manifest: Path) -> dict:
    (entry,) = json.loads(manifest.read_text())["datasets"]
    return entry


def _fetch(manifest: Path, data: Path, *mirrors: str) -> int:
    argv = ["fetch", "minari", DATASET, "--manifest", str(manifest), "--data-dir", str(data), "--retries", "3"]
    for mirror in mirrors:
        argv += ["--mirror", mirror]
    return _cli(argv)


def _nothing_restored(data: Path) -> None:
    """No dataset under its final name, no staging folder left behind."""
    assert not (data / "minari" / DATASET).exists()
    assert not (data / "minari" / RESTORE_DIR).exists()


def test_the_pack_is_recorded_in_the_manifest_and_packing_again_gives_the_same_bytes(packed, tmp_path) -> None:
    data, manifest, packs = packed
    entry = _entry(manifest)
    archive = packs / PACK
    assert entry["pack"] == {
        "file": PACK,
        "format": "tar.xz",
        "bytes": archive.stat().st_size,
        "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
    }
    # MinAtar frames are sparse 0/1 bytes: the pack is far smaller than the Minari folder
    assert entry["bytes"] > 10 * entry["pack"]["bytes"]
    again = tmp_path / "manifest.json"
    shutil.copy(manifest, again)
    pack = ["datasets", "pack", f"minari:{DATASET}", "--out", str(tmp_path / "packs"), "--manifest", str(again)]
    assert _cli([*pack, "--data-dir", str(data)]) == 0
    assert (tmp_path / "packs" / PACK).read_bytes() == archive.read_bytes()
    assert json.loads(again.read_text()) == json.loads(manifest.read_text())


def test_a_dataset_that_differs_from_its_manifest_entry_is_not_packed(packed, tmp_path, capsys) -> None:
    data, manifest, _ = packed
    document = json.loads(manifest.read_text())
    document["datasets"][0]["sha256"] = "0" * 64
    other = tmp_path / "manifest.json"
    other.write_text(json.dumps(document))
    capsys.readouterr()
    pack = ["datasets", "pack", f"minari:{DATASET}", "--out", str(tmp_path / "packs"), "--manifest", str(other)]
    assert _cli([*pack, "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err
    assert "differs from its entry" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "packs" / PACK).exists()


def test_a_file_mirror_restores_the_manifest_content_digest(packed, tmp_path) -> None:
    _, manifest, packs = packed
    data = tmp_path / "data"
    assert _fetch(manifest, data, packs.as_uri()) == 0
    check = ["datasets", "manifest", "--check", "--out", str(manifest), "--data-dir", str(data)]
    assert _cli(check) == 0
    assert not (data / "minari" / RESTORE_DIR).exists()
    # a second fetch finds it and downloads nothing
    assert _fetch(manifest, data, packs.as_uri()) == 0


def test_an_http_mirror_serves_the_pack_and_a_missing_one_falls_through(packed, tmp_path) -> None:
    _, manifest, packs = packed
    data = tmp_path / "data"
    with RluServer(packs, prefix="/packs") as server:
        assert _fetch(manifest, data, server.base_url + "/nowhere", server.base_url) == 0
        assert [r.path for r in server.gets()] == [f"/packs/nowhere/{PACK}", f"/packs/{PACK}"]
    assert _cli(["datasets", "manifest", "--check", "--out", str(manifest), "--data-dir", str(data)]) == 0


def test_a_slow_mirror_finishes(packed, tmp_path) -> None:
    _, manifest, packs = packed
    data = tmp_path / "data"
    with RluServer(packs, prefix="/packs") as server:
        server.misbehave.trickle[server.path_of(PACK)] = (512, 0.01)
        assert _fetch(manifest, data, server.base_url) == 0
    assert (data / "minari" / DATASET / "data" / "main_data.hdf5").is_file()


def test_a_dropped_connection_is_resumed(packed, tmp_path) -> None:
    _, manifest, packs = packed
    data = tmp_path / "data"
    with RluServer(packs, prefix="/packs") as server:
        server.misbehave.drop_once.add(server.path_of(PACK))
        assert _fetch(manifest, data, server.base_url) == 0
        ranges = [r.range for r in server.gets(server.path_of(PACK))]
    size = (packs / PACK).stat().st_size
    assert ranges == [None, f"bytes={size // 2}-"]  # the second request continued where the first broke off
    assert _cli(["datasets", "manifest", "--check", "--out", str(manifest), "--data-dir", str(data)]) == 0


@pytest.mark.parametrize("damage", ["wrong byte", "truncated"])
def test_a_damaged_pack_is_refused_in_one_line_and_nothing_is_restored(packed, tmp_path, capsys, damage) -> None:
    _, manifest, packs = packed
    bad = tmp_path / "bad"
    bad.mkdir()
    raw = bytearray((packs / PACK).read_bytes())
    if damage == "wrong byte":
        raw[len(raw) // 2] ^= 0x01
    else:
        raw = raw[: len(raw) // 2]
    (bad / PACK).write_bytes(bytes(raw))
    data = tmp_path / "data"
    capsys.readouterr()
    with RluServer(bad, prefix="/packs") as server:
        assert _fetch(manifest, data, server.base_url) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "sha256" in err and "recorded in packs.lock.json" in err
    _nothing_restored(data)
    # the bad bytes are deleted, not kept to resume from; the good mirror then restores it
    assert not list((data / "minari_packs").glob("*.part"))
    assert _fetch(manifest, data, packs.as_uri()) == 0


def test_an_archive_restoring_other_content_is_refused_before_its_final_name(packed, tmp_path) -> None:
    _, manifest, packs = packed
    entry = dict(_entry(manifest), sha256="0" * 64)
    datasets_dir = tmp_path / "minari"
    with pytest.raises(UsageError, match="restores another dataset"):
        restore_pack(packs / PACK, DATASET, datasets_dir, entry)
    assert not (datasets_dir / DATASET).exists() and not (datasets_dir / RESTORE_DIR).exists()


def test_an_archive_with_a_path_outside_data_is_refused(tmp_path) -> None:
    import io
    import tarfile

    archive = tmp_path / PACK
    with tarfile.open(archive, "w:xz") as tar:
        info = tarfile.TarInfo("../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(UsageError, match="not a file under data/"):
        restore_pack(archive, DATASET, tmp_path / "minari", {})
    assert not (tmp_path / "escape").exists() and not (tmp_path / "minari" / DATASET).exists()


def test_mirror_needs_a_manifest_entry_and_a_url(packed, tmp_path, capsys) -> None:
    _, manifest, packs = packed
    data = tmp_path / "data"
    argv = ["fetch", "minari", "tests/unlisted/x-v0", "--manifest", str(manifest), "--data-dir", str(data)]
    assert _cli([*argv, "--mirror", packs.as_uri()]) == 2
    assert "no manifest lists tests/unlisted/x-v0" in capsys.readouterr().err
    assert _fetch(manifest, data, "ftp://example.org/packs") == 2
    assert "--mirror must be an http://, https:// or file:// URL" in capsys.readouterr().err
    assert _fetch(manifest, data) == 2  # the manifest lists no mirror
    assert "no public copy" in capsys.readouterr().err
    _nothing_restored(data)


OLD_DATASET = "tests/old-wrapper/random-v0"


@pytest.fixture(scope="module")
def old_style(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A MinAtar dataset as the package recorded them before: ``Uint8Images`` in its env spec;
    returns (its Minari root, its pack, the Minari root the pack was restored into)."""
    import gymnasium as gym
    import minari

    from offline_gitd.data.manifest import describe
    from offline_gitd.data.minari_pack import pack_dataset
    from offline_gitd.envs.images import Uint8Images, register_minatar

    base = tmp_path_factory.mktemp("old")
    register_minatar()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(base / "minari"))
        env = minari.DataCollector(Uint8Images(gym.make("MinAtar/Breakout-v1")))
        env.reset(seed=0)
        for step in range(40):
            if any(env.step(step % 3)[2:4]):
                env.reset(seed=step + 1)
        env.create_dataset(dataset_id=OLD_DATASET, algorithm_name="random", author="tests", eval_env=env.env.spec)
        env.close()
        entry = describe(OLD_DATASET, base / "minari" / OLD_DATASET, minari.load_dataset(OLD_DATASET))
    info = pack_dataset(OLD_DATASET, base / "minari" / OLD_DATASET, base / "packs")
    restore_pack(base / "packs" / info.file, OLD_DATASET, base / "restored", entry)
    return base / "minari", base / "packs" / info.file, base / "restored"


_BLOCK_PACKAGE = """
import sys
sys.modules["offline_gitd"] = None  # importing offline_gitd (or any of its modules) fails
import minari
for dataset in (minari.load_dataset({dataset!r}), minari.MinariDataset({restored!r})):
    for eval_env in (False, True):
        env = dataset.recover_environment(eval_env=eval_env)
        obs, _ = env.reset(seed=0)
        print(env.spec.id, env.spec.entry_point, len(env.spec.additional_wrappers), obs.shape)
    print(dataset.storage.metadata["observation_layout"].split(":")[0])
"""


def test_minari_alone_recovers_a_recorded_datasets_env_and_eval_env(packed, old_style) -> None:
    """The env spec of a dataset ``collect`` records, and of an older one's pack, names the env
    alone: minari, gymnasium and minatar recover both envs in a process without this package."""
    data, _, _ = packed
    restored = old_style[2] / OLD_DATASET / "data"
    env = dict(os.environ, MINARI_DATASETS_PATH=str(data / "minari"), PYTHONPATH="")
    code = _BLOCK_PACKAGE.format(dataset=DATASET, restored=str(restored))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=data, timeout=120)
    assert out.returncode == 0, out.stderr
    each = ["MinAtar/Breakout-v1 minatar.gym:BaseEnv 0 (10, 10, 4)"] * 2 + ["uint8 0/1 images, H x W x C"]
    assert out.stdout.splitlines() == each * 2
    # and the same process really cannot import the package
    blocked = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['offline_gitd'] = None; import offline_gitd.envs"],
        env=env,
        capture_output=True,
        text=True,
        cwd=data,
        timeout=60,
    )
    assert blocked.returncode != 0 and "offline_gitd" in blocked.stderr


def test_an_older_dataset_with_the_wrapper_in_its_env_spec_still_loads(old_style, monkeypatch) -> None:
    import minari
    import numpy as np

    from offline_gitd.data.datasets import _load_minari, _minari_env

    original, _, restored = old_style
    for root in (original, restored):
        monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
        spec = minari.load_dataset(OLD_DATASET).env_spec
        wrappers = [w.entry_point for w in spec.additional_wrappers]
        assert wrappers == (["offline_gitd.envs.images:Uint8Images"] if root == original else [])
        obs, _ = _minari_env(_load_minari(OLD_DATASET)).reset(seed=0)
        assert obs.dtype == np.uint8 and obs.shape == (10, 10, 4)


def test_a_restored_dataset_loads_in_minari_and_trains(packed, tmp_path) -> None:
    import minari

    _, manifest, packs = packed
    data = tmp_path / "data"
    assert _fetch(manifest, data, packs.as_uri()) == 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(data / "minari"))
        dataset = minari.load_dataset(DATASET)
        assert (dataset.total_steps, dataset.observation_space.dtype.name) == (300, "uint8")
    run = tmp_path / "run"
    argv = ["train", "--dataset", f"minari:{DATASET}", "--data-dir", str(data), "--out", str(run), "--critic", "td"]
    argv += ["--epochs", "1", "--steps-per-epoch", "20", "--updates-per-call", "10", "--eval-episodes", "1"]
    assert _cli([*argv, "--horizon", "50", "--batch-size", "8", "--no-progress", "--no-tensorboard"]) == 0
    assert (run / "results.csv").read_text().count("\n") == 2  # header and the epoch's row


def test_writing_an_entry_again_keeps_its_pack_and_the_manifests_mirrors(packed, tmp_path) -> None:
    data, manifest, _ = packed
    again = tmp_path / "manifest.json"
    document = json.loads(manifest.read_text())
    again.write_text(json.dumps(dict(document, mirrors=["https://example.org/packs"])))
    assert _cli(["datasets", "manifest", f"minari:{DATASET}", "--out", str(again), "--data-dir", str(data)]) == 0
    written = json.loads(again.read_text())
    assert written["mirrors"] == ["https://example.org/packs"]
    assert written["datasets"][0]["pack"] == _entry(manifest)["pack"]  # same content: the pack still restores it
