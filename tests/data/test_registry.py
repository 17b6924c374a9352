"""The RL Unplugged registry, dataset ids, and ``offline_gitd datasets list|info``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.data.paths import rlu_raw_dir
from offline_gitd.data.registry import (
    MinariId,
    RluAtariId,
    format_checkpoints,
    load_rlu_registry,
    parse_checkpoints,
    parse_dataset_id,
    registry_from_dict,
)
from offline_gitd.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
FEWER_SHARDS = {"Carnival", "Gravitar", "StarGunner"}


def test_packaged_registry_is_identical_to_datasets_copy() -> None:
    source = REPO / "datasets" / "rlu_atari.json"
    packaged = REPO / "offline_gitd" / "data" / "rlu_atari.json"
    assert packaged.read_bytes() == source.read_bytes(), (
        "datasets/rlu_atari.json is the source of truth: cp datasets/rlu_atari.json offline_gitd/data/rlu_atari.json"
    )


def test_registry_contents() -> None:
    registry = load_rlu_registry()
    assert len(registry.games) == 46 and registry.runs == (1, 2, 3, 4, 5)
    for game, counts in registry.games.items():
        assert counts["atari_episodes_ordered"] == (49 if game in FEWER_SHARDS else 50), game
        assert counts["atari"] == 100
    assert registry.shard_url("Pong", 1, 3) == (
        "https://storage.googleapis.com/rl_unplugged/atari_episodes_ordered/Pong/run_1-00003-of-00050"
    )
    assert registry.shard_url("StarGunner", 5, 48, "transitions", "http://mirror/x/") == (
        "http://mirror/x/atari/StarGunner/run_5-00048-of-00100"
    )
    assert registry.metadata_url("Carnival", 2, 0) == (
        "https://storage.googleapis.com/storage/v1/b/rl_unplugged/o/"
        "atari_episodes_ordered%2FCarnival%2Frun_2-00000-of-00049"
    )


def test_registry_validation_rejects_malformed() -> None:
    raw = json.loads((REPO / "datasets" / "rlu_atari.json").read_text())
    raw["games"]["Pong"] = {"atari": 100}
    with pytest.raises(ValueError, match="game Pong must give a shard count for each layout"):
        registry_from_dict(raw)
    raw = json.loads((REPO / "datasets" / "rlu_atari.json").read_text())
    raw["object_template"] = "{layout}/{game}/run{run}_{shard}"
    with pytest.raises(ValueError, match="rlu_shard_name disagrees"):
        registry_from_dict(raw)


def test_parse_checkpoints() -> None:
    assert parse_checkpoints("0-4,7") == (0, 1, 2, 3, 4, 7)
    assert parse_checkpoints(" 7, 3-3,2 ") == (2, 3, 7)
    assert format_checkpoints(parse_checkpoints("0-4,7,9-10")) == "0-4,7,9-10"
    for bad, message in [("", "bad checkpoint list"), ("a", "bad checkpoint list"),
                         ("4-1", "end before start"), ("1,,2", "bad checkpoint list")]:  # fmt: skip
        with pytest.raises(UsageError, match=message):
            parse_checkpoints(bad)
    with pytest.raises(UsageError, match=r"checkpoint 50 out of range for Pong \(valid: 0-49\)"):
        parse_checkpoints("48-50", 50, owner="Pong")


def test_parse_dataset_id() -> None:
    assert parse_dataset_id("rlu-atari:Pong/1") == RluAtariId("Pong", 1, None)
    parsed = parse_dataset_id("rlu-atari:Pong/1:0-4,7")
    assert parsed == RluAtariId("Pong", 1, (0, 1, 2, 3, 4, 7))
    assert str(parsed) == "rlu-atari:Pong/1:0-4,7"
    assert parse_dataset_id("minari:D4RL/door/human-v2") == MinariId("D4RL/door/human-v2")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rlu-atari:pong/1", "did you mean Pong?); valid games: Alien, Amidar"),
        ("rlu-atari:Pong/0", "valid runs: 1, 2, 3, 4, 5"),
        ("rlu-atari:Pong", "expected rlu-atari:{Game}/{run}"),
        ("rlu-atari:Gravitar/1:49", "out of range for Gravitar (valid: 0-48)"),
        ("minari:halfcheetah", "expected namespace/name-vN"),
        ("d4rl:hopper", "expected rlu-atari:{Game}/{run}[:{checkpoints}]"),
    ],
)
def test_bad_dataset_ids_name_valid_values(text: str, expected: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_dataset_id(text)
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data root with two Pong shards, one partial, and a fake local Minari dataset."""
    directory = rlu_raw_dir(tmp_path, "atari_episodes_ordered", "Pong")
    directory.mkdir(parents=True)
    (directory / "run_1-00000-of-00050").write_bytes(b"x" * 2048)
    (directory / "run_1-00002-of-00050").write_bytes(b"x" * 1024)
    (directory / "run_1-00003-of-00050.part").write_bytes(b"x" * 512)
    (directory / "run_1.lock.json").write_text(
        json.dumps({"shards": [{"name": "run_1-00000-of-00050", "size": 2048, "sha256": "0" * 64}]})
    )
    minari_data = tmp_path / "minari" / "test" / "toy-v0" / "data"
    minari_data.mkdir(parents=True)
    (minari_data / "metadata.json").write_text(
        json.dumps({"dataset_id": "test/toy-v0", "total_episodes": 3, "total_steps": 30,
                    "minari_version": "0.5.4"})
    )  # fmt: skip
    return tmp_path


def test_datasets_list_shows_registry_and_local(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "list", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "46 games" in out and "49 for Carnival, Gravitar, StarGunner" in out
    assert "rlu-atari:Pong/1  atari_episodes_ordered  2/50 shards, 3.0 KiB, 1 partial" in out
    assert "minari:test/toy-v0  3 episodes, 30 steps" in out


def test_datasets_info_maps_checkpoints_to_shards(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "info", "rlu-atari:Pong/1:0-3", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "atari_episodes_ordered/Pong/run_1-{i:05d}-of-00050" in out
    assert "storage/v1/b/rl_unplugged/o/atari_episodes_ordered%2FPong" in out
    assert "0 -> run_1-00000-of-00050  2.0 KiB, in lock" in out
    assert "1 -> run_1-00001-of-00050  missing" in out
    assert "2 -> run_1-00002-of-00050  1.0 KiB, not in lock" in out
    assert "3 -> run_1-00003-of-00050  partial 512 B" in out
    assert "--checkpoints 0-3" in out


def test_datasets_info_minari(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "info", "minari:test/toy-v0", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "total_episodes: 3" in out and str(data_dir / "minari" / "test" / "toy-v0") in out
    assert main(["datasets", "info", "minari:test/other-v0", "--data-dir", str(data_dir)]) == 0
    assert "fetch: offline_gitd fetch minari test/other-v0" in capsys.readouterr().out


def test_datasets_info_bad_id_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "info", "rlu-atari:Pong/9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "offline_gitd: error: unknown run 9; valid runs: 1, 2, 3, 4, 5"
