"""A sweep's [[collect]] dataset that a manifest lists comes from the manifest's mirrors; it is
recorded anew only with ``--record-missing`` (docs/sweeps.md#datasets-from-mirrors)."""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path

import pytest

from offline_gitd.data import pack_fetch
from offline_gitd.data.manifest import describe, write_manifest
from offline_gitd.data.minari_pack import pack_dataset
from offline_gitd.sweeps import task
from offline_gitd.sweeps.core import collect_entries
from offline_gitd.sweeps.spec import load_spec
from offline_gitd.sweeps.state import SweepPaths, read_state
from tests.minari_fixtures import record_random_dataset

DATASET = "tests/cartpole/mirrored-v0"
SPECS = Path(__file__).resolve().parents[2] / "sweeps"

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # minari: no author_email


@pytest.fixture
def listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A manifest listing DATASET with its pack on a file:// mirror, standing in for the
    repository's manifests; returns the manifest (the dataset itself is not local)."""
    import minari

    source = tmp_path / "source"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(source))
    record_random_dataset(DATASET, "CartPole-v1", steps=60)
    entry = describe(DATASET, source / DATASET, minari.load_dataset(DATASET))
    info = pack_dataset(DATASET, source / DATASET, tmp_path / "packs")
    manifest = tmp_path / "manifest.json"
    write_manifest(manifest, [dict(entry, pack=info.entry())])
    document = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(dict(document, mirrors=[(tmp_path / "packs").as_uri()])))
    monkeypatch.setattr(pack_fetch, "repository_manifests", lambda: [manifest])
    return manifest


def _collect(tmp_path: Path, record_missing: bool = False) -> dict:
    data = tmp_path / "data"
    argv = ["collect", "CartPole-v1", "--policy", "random", "--steps", "60", "--out", DATASET, "--no-progress"]
    argv += ["--no-tensorboard", "--data-dir", str(data)]
    return task.collect_dataset(
        "collect-x", argv, str(tmp_path / "sweep"), "s1", DATASET, str(data), record_missing=record_missing
    )


def test_a_listed_dataset_is_fetched_from_the_mirrors_not_recorded(listed: Path, tmp_path: Path) -> None:
    outcome = _collect(tmp_path)
    assert (outcome["status"], outcome.get("fetched")) == ("done", True)
    assert (tmp_path / "data" / "minari" / DATASET / "data" / "main_data.hdf5").is_file()
    log = SweepPaths(tmp_path / "sweep").log("collect-x").read_text()
    assert "offline_gitd fetch minari" in log and "offline_gitd collect" not in log


def test_without_a_mirror_the_sweep_fails_and_records_only_when_asked(listed: Path, tmp_path: Path) -> None:
    for pack in (tmp_path / "packs").iterdir():
        pack.unlink()  # the mirror has lost the pack
    outcome = _collect(tmp_path)
    assert outcome["status"] == "failed" and "pass --record-missing to record it anew" in outcome["error"]
    assert not (tmp_path / "data" / "minari" / DATASET).exists()
    assert read_state(SweepPaths(tmp_path / "sweep").state("collect-x"))["error"] == outcome["error"]
    outcome = _collect(tmp_path, record_missing=True)
    assert outcome["status"] == "done" and not outcome.get("fetched")
    assert "offline_gitd collect" in SweepPaths(tmp_path / "sweep").log("collect-x").read_text()
    assert (tmp_path / "data" / "minari" / DATASET / "data").is_dir()


def test_record_missing_reaches_every_backends_collect_call(tmp_path: Path) -> None:
    spec = dataclasses.replace(load_spec(SPECS / "minatar_offline.toml"), record_missing=True)
    (entry, *_) = collect_entries(spec, SweepPaths(tmp_path), "sweep")
    assert entry["record_missing"] is True
    inspect.signature(task.collect_dataset).bind(**entry)
