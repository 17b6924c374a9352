"""Run directories a user can trust (docs/architecture.md#runs-are-self-contained): resume follows --out from any cwd, refuses
changed flags, a failed start leaves nothing, --overwrite replaces, provenance is recorded."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.errors import ConfigError
from offline_gitd.rundir.checkpoints import Checkpoints
from offline_gitd.rundir.files import resume_changes
from tests.minari_fixtures import record_into_new_root
from tests.support.argv import online_cartpole

pytestmark = pytest.mark.usefixtures("jax_compilation_cache")

DATASET = "tests/cartpole/rundir-v0"
SMALL = [
    "--critic", "gitd", "--K", "2", "--T", "20", "--mlp-hidden", "8", "--steps-per-epoch", "20",
    "--eval-episodes", "0", "--batch-size", "8", "--updates-per-call", "10", "--no-progress",
]  # fmt: skip
ONLINE = online_cartpole(
    "--no-progress", critic="td", mlp_hidden=8, batch_size=8, initial_samples=20, log_every=20, checkpoint_every=40
)


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory) -> Path:
    return record_into_new_root(tmp_path_factory.mktemp("minari"), DATASET, "CartPole-v1", steps=400)


@pytest.fixture
def train_args(minari_root, monkeypatch) -> list[str]:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    monkeypatch.delenv("OFFLINE_GITD_DATA", raising=False)
    return ["train", "--dataset", f"minari:{DATASET}", *SMALL]


def _config(run_dir: Path) -> dict:
    return json.loads((run_dir / "config.json").read_text())


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_resume_changes_allows_extension_and_location_only() -> None:
    saved = {"epochs": 4, "lr": 5e-4, "out": "/a", "data_dir": None}
    assert resume_changes(saved, {"epochs": 6, "lr": 5e-4, "out": "/b"}, "epochs", ("out", "data_dir")) == {
        "epochs": 6,
        "out": "/b",
    }
    assert resume_changes(saved, {"epochs": 4}, "epochs") == {}
    with pytest.raises(ConfigError, match="--lr 0.1 differs from the run's lr = 0.0005"):
        resume_changes(saved, {"lr": 0.1}, "epochs")
    with pytest.raises(ConfigError, match="--epochs 1 is shorter than the run's 4"):
        resume_changes(saved, {"epochs": 1}, "epochs")


@pytest.mark.e2e
def test_a_copied_run_resumes_from_its_own_directory_in_any_cwd(train_args, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*train_args, "--epochs", "1", "--out", "runs/first"]) == 0
    original = tmp_path / "runs" / "first"
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(original, copy)
    other_cwd = tmp_path / "other"
    other_cwd.mkdir()
    monkeypatch.chdir(other_cwd)
    capsys.readouterr()
    # the full original command line again (as a sweep retry passes it) plus a longer --epochs
    assert main([*train_args, "--epochs", "2", "--out", "../elsewhere/copy", "--resume"]) == 0
    assert Checkpoints(copy).latest() == 2
    assert Checkpoints(original).latest() == 1  # the original was not touched
    config = _config(copy)
    assert config["config"]["epochs"] == 2 and config["config"]["out"] == str(copy)
    assert config["run_id"] == _config(original)["run_id"] and len(config["resumes"]) == 1
    with (copy / "metrics.csv").open() as f:
        assert [row["epoch"] for row in csv.DictReader(f)] == ["1", "2"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--epochs", "2", "--lr", "0.1"], "--lr 0.1 differs from the run's lr = 0.0005"),
        (["--epochs", "1"], "--epochs 1 is shorter than the run's 2"),
        (["--critic", "td"], "--critic td differs from the run's critic = gitd"),
        (["--overwrite"], "--resume and --overwrite"),
    ],
)
def test_resume_refuses_other_changes_in_one_line(train_args, tmp_path, capsys, extra, message) -> None:
    run = tmp_path / "run"
    assert main([*train_args, "--epochs", "2", "--out", str(run)]) == 0
    before = (run / "config.json").read_text()
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--no-progress", *extra]) == 2
    assert message in _one_error(capsys)
    assert (run / "config.json").read_text() == before and Checkpoints(run).latest() == 2


def test_resume_of_a_finished_run_with_flags_unchanged_does_nothing_new(train_args, tmp_path) -> None:
    run = tmp_path / "run"
    assert main([*train_args, "--epochs", "1", "--out", str(run)]) == 0
    assert main(["train", "--out", str(run), "--resume", "--no-progress"]) == 0
    assert _config(run)["config"]["epochs"] == 1 and Checkpoints(run).latest() == 1


def test_a_network_that_cannot_read_the_data_fails_in_one_line_and_leaves_nothing(train_args, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    assert main([*train_args, "--epochs", "1", "--torso", "nature", "--out", str(run)]) == 2
    assert "vector observations of shape (4,): use --torso mlp, not --torso nature" in _one_error(capsys)
    assert not run.exists()
    assert main([*train_args, "--epochs", "1", "--out", str(run)]) == 0  # the same --out is free


def test_overwrite_replaces_a_run(train_args, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    assert main([*train_args, "--epochs", "2", "--out", str(run)]) == 0
    first_id = _config(run)["run_id"]
    capsys.readouterr()
    assert main([*train_args, "--epochs", "1", "--out", str(run)]) == 2
    assert "--overwrite" in _one_error(capsys)
    bad = [*train_args, "--epochs", "1", "--out", str(run), "--overwrite", "--torso", "nature"]
    assert main(bad) == 2 and "--torso mlp" in _one_error(capsys)
    assert _config(run)["run_id"] == first_id and Checkpoints(run).latest() == 2  # a failed start loses nothing
    assert main([*train_args, "--epochs", "1", "--out", str(run), "--overwrite"]) == 0
    assert _config(run)["run_id"] != first_id and Checkpoints(run).latest() == 1


def test_config_records_provenance(train_args, minari_root, tmp_path, monkeypatch) -> None:
    data = tmp_path / "data"
    shutil.copytree(minari_root, data / "minari")
    monkeypatch.setenv("OFFLINE_GITD_DATA", str(data))  # moves the Minari datasets too (item 7)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "not-here"))
    argv = [*train_args, "--epochs", "1", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    made_by = _config(tmp_path / "run")["provenance"]
    assert made_by["command_line"] == ["offline_gitd", *argv]
    git = made_by["git"]
    assert len(git["commit"]) == 40 if git["commit"] else git["reason"]
    assert {"python", "jax", "jaxlib", "flax", "offline_gitd"} <= {k for k, v in made_by["versions"].items() if v}
    assert made_by["device"]["backend"] == "cpu" and made_by["device"]["kind"]
    assert made_by["platform"]["machine"] and "cpu" in made_by["platform"]
    assert made_by["data_root"] == str(data) and made_by["minari_root"] == str(data / "minari")


@pytest.mark.e2e
def test_online_run_resumes_from_a_moved_directory_and_refuses_other_flags(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*ONLINE, "--steps", "40", "--out", "first"]) == 0
    shutil.move(tmp_path / "first", tmp_path / "moved")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["online", "dqn", "--out", "../moved", "--resume", "--lr", "0.1", "--steps", "80"]) == 2
    assert "--lr 0.1 differs from the run's lr = 0.0005" in _one_error(capsys)
    assert main(["online", "dqn", "--out", "../moved", "--resume", "--steps", "20"]) == 2
    assert "--steps 20 is shorter than the run's 40" in _one_error(capsys)
    assert main(["online", "sac", "--out", "../moved", "--resume", "--steps", "80"]) == 2
    assert "is an online dqn run: resume it with online dqn" in _one_error(capsys)
    assert main([*ONLINE, "--out", "../moved", "--resume", "--steps", "80"]) == 0
    moved = tmp_path / "moved"
    assert Checkpoints(moved).latest() == 80 and not (tmp_path / "first").exists()
    config = _config(moved)
    assert config["config"]["steps"] == 80 and config["config"]["out"] == str(moved)
    assert config["method_config"] == "batch_size=8 initial_samples=20 mlp_hidden=8"
    with (moved / "results.csv").open() as f:
        assert {row["method_config"] for row in csv.DictReader(f)} <= {config["method_config"]}
