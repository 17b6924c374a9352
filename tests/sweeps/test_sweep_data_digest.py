"""A run's identity includes the content digest of its data (docs/leaderboard.md#what-made-a-row):
one config trained on two recordings of a dataset id gets two identities, and a sweep skips a run
only where the board holds its config hash on the digest of the dataset here."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.data.digest import minari_digest
from offline_gitd.data.manifest import describe
from offline_gitd.leaderboard.schema import COLUMNS, read_rows
from offline_gitd.leaderboard.submit import submit
from offline_gitd.sweeps.core import ON_BOARD, action
from offline_gitd.sweeps.on_board import BoardCheck
from offline_gitd.sweeps.spec import expand, load_spec
from offline_gitd.sweeps.state import SweepPaths, write_state
from tests.minari_fixtures import record_random_dataset
from tests.support.runs import result_record

pytestmark = pytest.mark.usefixtures("jax_compilation_cache")

DATASET = "tests/cartpole/digest-v0"
SPEC = f"""command = "train"
board = "board.csv"
data_dir = "{{data}}"

[fixed]
dataset = "minari:{DATASET}"
seeds = "0"
epochs = 1
steps_per_epoch = 10
eval_episodes = 1
horizon = 20
mlp_hidden = "8"
batch_size = 8

[grid]
critic = ["td"]
"""
TRAIN = [
    "train", "--dataset", f"minari:{DATASET}", "--critic", "td", "--seeds", "0", "--epochs", "1",
    "--steps-per-epoch", "10", "--eval-episodes", "1", "--horizon", "20", "--mlp-hidden", "8",
    "--batch-size", "8", "--no-progress",
]  # fmt: skip


def record(data: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Re-)record the dataset id under ``data``'s Minari root from a random policy seeded ``seed``."""
    root = data / "minari"
    shutil.rmtree(root / DATASET, ignore_errors=True)
    with monkeypatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(root))
        record_random_dataset(DATASET, "CartPole-v1", steps=200, seed=seed)


def config(run_dir: Path) -> dict:
    return json.loads((run_dir / "config.json").read_text())


def test_two_recordings_of_one_dataset_give_one_config_two_identities(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    record(data, 0, monkeypatch)
    assert main([*TRAIN, "--data-dir", str(data), "--out", str(tmp_path / "first")]) == 0
    import minari

    with monkeypatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(data / "minari"))
        published = describe(DATASET, data / "minari" / DATASET, minari.load_dataset(DATASET))["sha256"]
    record(data, 1, monkeypatch)  # the same id recorded again: other transitions
    assert main([*TRAIN, "--data-dir", str(data), "--out", str(tmp_path / "second")]) == 0

    first, second = config(tmp_path / "first"), config(tmp_path / "second")
    assert first["config_hash"] == second["config_hash"]
    assert first["data_sha256"] == published  # the digest the dataset's manifest records
    assert second["data_sha256"] != first["data_sha256"] and len(second["data_sha256"]) == 64
    rows = {name: [row for _, row in read_rows(tmp_path / name / "results.csv")] for name in ("first", "second")}
    assert rows["first"][0].identity != rows["second"][0].identity
    for name, found in rows.items():
        assert {row.data_sha256 for row in found} == {config(tmp_path / name)["data_sha256"]}
        assert {row.device for row in found} == {"cpu"}
        git = config(tmp_path / name)["provenance"]["git"]
        assert {row.commit for row in found} == {git["commit"] or ""}
        assert {row.dirty for row in found} == {"" if not git["commit"] else str(git["dirty"]).lower()}
    # both go on one board: two settings, not duplicates
    board = tmp_path / "board.csv"
    assert submit([tmp_path / "first", tmp_path / "second"], board, allow_new_env=True).total_rows == 2

    # the first run resumed on the second recording is refused, its directory untouched
    before = (tmp_path / "first" / "config.json").read_bytes()
    resume = [*TRAIN, "--data-dir", str(data), "--out", str(tmp_path / "first"), "--epochs", "2", "--resume"]
    assert main(resume) == 2
    assert (tmp_path / "first" / "config.json").read_bytes() == before


def board_of(board: Path, config_hash: str, data_sha256: str) -> None:
    """A board holding the one row the spec's run writes (seed 0, step 10) under ``data_sha256``."""
    with board.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        row = result_record(
            env=DATASET, suite="minari", algorithm="cql", critic="td", seed=0, step=10, value=1.0,
            config_hash=config_hash, run_id="old-s0",
        )  # fmt: skip
        writer.writerow({**row, "data_sha256": data_sha256})


def test_a_sweep_trains_again_a_run_whose_board_rows_came_from_another_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    record(data, 0, monkeypatch)
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC.format(data=data))
    spec = load_spec(spec_path)
    (plan,) = expand(spec)
    paths = SweepPaths(tmp_path / "sweep")
    paths.root.mkdir()
    board = paths.root / "board.csv"

    first = BoardCheck(spec).expected(plan)
    assert first.data_sha256 == minari_digest(DATASET, str(data))
    board_of(board, first.config_hash, first.data_sha256)
    assert action(paths, plan, BoardCheck(spec)) == ON_BOARD  # same config, same data: skipped

    record(data, 1, monkeypatch)  # another recording under the same name
    check = BoardCheck(spec)
    second = check.expected(plan)
    assert second.config_hash == first.config_hash and second.data_sha256 != first.data_sha256
    assert action(paths, plan, check) == "new"  # trained again, on this recording
    assert not check.verdict(plan, board, paths.run_dir(plan.name)).present

    board_of(board, first.config_hash, "")  # a row from before digests: the hash alone decides
    check = BoardCheck(spec)
    verdict = check.verdict(plan, board, paths.run_dir(plan.name))
    assert verdict.complete and verdict.undigested == 1

    # done here on the first recording (its state and run directory): due again on the second
    board.unlink()
    run_dir = paths.run_dir(plan.name)
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"run_id": "old", "data_sha256": first.data_sha256}))
    write_state(paths.state(plan.name), {"status": "done", "argv": list(plan.argv)})
    assert action(paths, plan, BoardCheck(spec)) == "resume"
    (run_dir / "config.json").write_text(json.dumps({"run_id": "old", "data_sha256": second.data_sha256}))
    assert action(paths, plan, BoardCheck(spec)) == "done (skip)"


def test_without_the_dataset_here_the_config_hash_alone_decides(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.toml"
    collect = f'\n[[collect]]\nenv = "CartPole-v1"\nsteps = 200\npolicy = "random"\nout = "{DATASET}"\n'
    spec_path.write_text(SPEC.format(data=tmp_path / "no-data").replace("\n[fixed]", collect + "\n[fixed]"))
    spec = load_spec(spec_path)
    (plan,) = expand(spec)
    check = BoardCheck(spec)
    expected = check.expected(plan)
    assert expected is not None and expected.data_sha256 is None
    paths = SweepPaths(tmp_path / "sweep")
    paths.root.mkdir()
    board_of(paths.root / "board.csv", expected.config_hash, "c" * 64)
    assert action(paths, plan, check) == ON_BOARD


def test_the_digest_is_kept_in_the_dataset_until_its_data_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    import minari

    from offline_gitd.data.digest import DIGEST_FILE

    data = tmp_path / "data"
    record(data, 0, monkeypatch)
    true = minari_digest(DATASET, str(data))
    kept = data / "minari" / DATASET / DIGEST_FILE
    record_of = json.loads(kept.read_text())
    assert record_of["sha256"] == true and list(record_of["files"]) == ["data/main_data.hdf5"]
    kept.write_text(json.dumps({**record_of, "sha256": "f" * 64}))  # what is kept is what is read
    assert minari_digest(DATASET, str(data)) == "f" * 64
    hdf5 = data / "minari" / DATASET / "data" / "main_data.hdf5"
    os.utime(hdf5, ns=(hdf5.stat().st_atime_ns, hdf5.stat().st_mtime_ns + 1))  # the data file changed
    assert minari_digest(DATASET, str(data)) == true
    with monkeypatch.context() as patch:  # minari still lists and loads the dataset
        patch.setenv("MINARI_DATASETS_PATH", str(data / "minari"))
        assert DATASET in minari.list_local_datasets() and minari.load_dataset(DATASET).total_steps == 200
