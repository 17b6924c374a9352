"""TensorBoard events, read back with TensorBoard's own reader; wandb's missing-extra message;
keep-last-N checkpoints."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from offline_gitd.cli import main
from offline_gitd.rundir.checkpoints import Checkpoints
from offline_gitd.rundir.flags import Outputs
from offline_gitd.rundir.scalars import ScalarLog
from tests.support.argv import online_cartpole

ARGV = online_cartpole(
    "--no-progress",
    critic="td",
    mlp_hidden=8,
    batch_size=8,
    initial_samples=50,
    log_every=50,
    checkpoint_every=100,
    seeds="0-1",
)


def _events(run_dir: Path, seed: int) -> EventAccumulator:
    events = EventAccumulator(str(run_dir / "tb" / f"seed_{seed}"))
    events.Reload()
    return events


def _metrics(run_dir: Path, seed: int) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open() as f:
        return [row for row in csv.DictReader(f) if int(row["seed"]) == seed]


def test_online_run_writes_one_tag_per_metric_per_seed_and_its_hparams(tmp_path) -> None:
    run_dir = tmp_path / "run"
    assert main([*ARGV, "--steps", "200", "--out", str(run_dir)]) == 0
    for seed in (0, 1):
        events = _events(run_dir, seed)
        assert {"loss", "episode_return", "td_abs_mean", "window_seconds"} <= set(events.Tags()["scalars"])
        rows = _metrics(run_dir, seed)
        logged = [r for r in rows if r["loss"] != "nan"]
        assert [e.step for e in events.Scalars("loss")] == [int(r["step"]) for r in logged] == [100, 150, 200]
        assert [e.value for e in events.Scalars("loss")] == pytest.approx([float(r["loss"]) for r in logged])
        start = plugin_data_pb2.HParamsPluginData.FromString(
            events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
        )
        assert start.session_start_info.hparams["critic"].string_value == "td"
        assert start.session_start_info.hparams["batch_size"].number_value == 8


def test_resume_purges_events_the_checkpoint_never_saw(tmp_path) -> None:
    seeds, config = [0], {"critic": "td"}
    log = ScalarLog(tmp_path, seeds, config, Outputs(), name="x")
    log.log([{"step": 1, "seed": 0, "loss": 1.0}])
    log.log([{"step": 2, "seed": 0, "loss": 2.0}])
    log.close()
    resumed = ScalarLog(tmp_path, seeds, config, Outputs(), name="x", resume_step=1)
    resumed.log([{"step": 2, "seed": 0, "loss": 20.0}])
    resumed.close()
    assert [(e.step, e.value) for e in _events(tmp_path, 0).Scalars("loss")] == [(1, 1.0), (2, 20.0)]


def test_wandb_without_its_extra_is_one_line(tmp_path, capsys) -> None:
    try:
        import wandb  # noqa: F401
    except ImportError:
        assert main([*ARGV, "--steps", "100", "--out", str(tmp_path / "run"), "--wandb"]) == 2
        assert "offline-gitd[wandb]" in capsys.readouterr().err
    else:
        pytest.skip("wandb is installed: the missing-extra message cannot be shown")


def test_keep_last_checkpoints_and_no_tensorboard(tmp_path) -> None:
    run_dir = tmp_path / "run"
    assert main([*ARGV, "--steps", "200", "--out", str(run_dir), "--keep-checkpoints", "1", "--no-tensorboard"]) == 0
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit()) == ["200"]
    assert Checkpoints(run_dir).latest() == 200
    assert not (run_dir / "tb").exists()
    assert main([*ARGV, "--steps", "100", "--out", str(tmp_path / "r2"), "--keep-checkpoints", "0"]) == 2


def test_log_ignores_non_finite_and_index_columns(tmp_path) -> None:
    log = ScalarLog(tmp_path, [3], {}, Outputs(), name="y")
    log.log(
        [{"step": 5, "seed": 3, "epoch": 1, "eval_seed": 77, "loss": float("nan"), "eval_return": 2.5, "note": "x"}]
    )
    log.close()
    assert _events(tmp_path, 3).Tags()["scalars"] == ["eval_return"]
