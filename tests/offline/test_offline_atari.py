"""A short real offline run on an RL Unplugged-format run: shards written in the bucket's exact
format, decoded into the frame cache, trained with the Nature CNN, evaluated on the real Pong ROM
with the Machado et al. protocol, resumed, and reported in the leaderboard schema."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.data.paths import rlu_cache_dir, rlu_raw_dir, rlu_shard_name
from offline_gitd.rundir.checkpoints import Checkpoints
from tests.rlu_shards import make_synthetic_episode, write_rlu_episodes_shard

PONG_ACTIONS = 6


def write_generated_run(root: Path, checkpoints: int = 2) -> None:
    rng = np.random.default_rng(0)
    raw = rlu_raw_dir(root, "atari_episodes_ordered", "Pong")
    raw.mkdir(parents=True)
    for checkpoint in range(checkpoints):
        episodes = [
            make_synthetic_episode(rng, 40, checkpoint, 2 * checkpoint + i, terminal=bool(i), num_actions=PONG_ACTIONS)
            for i in range(2)
        ]
        write_rlu_episodes_shard(raw / rlu_shard_name(1, checkpoint, 50), episodes)


@pytest.mark.e2e
def test_short_real_atari_run_trains_evaluates_resumes_and_reports(tmp_path, capsys) -> None:
    root = tmp_path / "data"
    write_generated_run(root)
    out = tmp_path / "pong-gitd"
    flags = [
        "--dataset", "rlu-atari:Pong/1:0-1", "--data-dir", str(root), "--critic", "gitd", "--K", "2",
        "--batch-size", "4", "--steps-per-epoch", "3", "--eval-episodes", "1", "--horizon", "25",
        "--fraction", "0.5", "--out", str(out), "--no-progress",
    ]  # fmt: skip
    assert main(["train", *flags, "--epochs", "1"]) == 0
    # the first 50% of each checkpoint was decoded, once, into the frame cache
    meta = json.loads((rlu_cache_dir(root, "Pong", 1, 0) / "meta.json").read_text())
    assert meta["fraction"] == 0.5
    assert main(["train", "--out", str(out), "--resume", "--epochs", "2", "--no-progress"]) == 0
    assert Checkpoints(out).latest() == 2
    saved = json.loads((out / "config.json").read_text())["config"]
    assert (saved["torso"], saved["T"], saved["lr"], saved["eval_epsilon"]) == ("nature", 2000, 5e-5, 0.001)
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["suite"], r["env"], r["critic"], r["K"], r["step"]) for r in rows] == [
        ("atari", "Pong", "gitd", "2", "3"),
        ("atari", "Pong", "gitd", "2", "6"),
    ]
    # Pong's score over a 25-step episode is a small integer (no point is won that fast)
    assert all(float(r["return"]) == int(float(r["return"])) and float(r["return"]) <= 0 for r in rows)
    assert "results.csv" in capsys.readouterr().out


def test_missing_shards_name_the_fetch_command(tmp_path, capsys) -> None:
    code = main([
        "train", "--dataset", "rlu-atari:Pong/1:0", "--data-dir", str(tmp_path), "--out", str(tmp_path / "r"),
        "--no-progress",
    ])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "offline_gitd fetch rlu-atari --game Pong --run 1" in err[0]


@pytest.mark.e2e
def test_where_frames_are_gathered_and_how_many_updates_per_call_change_nothing(
    tmp_path, jax_compilation_cache
) -> None:
    """The same run with the store on the device (5 updates per call) and gathered on the host
    (1 update per call, in blocks that share a pool; 2 per call): identical losses and returns,
    and two seeds so the host pools are per seed."""
    root = tmp_path / "data"
    write_generated_run(root)
    flags = [
        "--dataset", "rlu-atari:Pong/1:0-1", "--data-dir", str(root), "--critic", "gitd", "--K", "2",
        "--batch-size", "4", "--steps-per-epoch", "5", "--epochs", "1", "--eval-episodes", "1", "--horizon", "10",
        "--seeds", "0,1", "--no-progress",
    ]  # fmt: skip
    logged = {}
    for frames, per_call in [("device", 5), ("host", 1), ("host", 2)]:
        out = tmp_path / f"{frames}-{per_call}"
        assert main(["train", *flags, "--frames", frames, "--updates-per-call", str(per_call), "--out", str(out)]) == 0
        with (out / "metrics.csv").open() as f:
            rows = [{k: v for k, v in row.items() if k != "epoch_seconds"} for row in csv.DictReader(f)]
        assert [row["seed"] for row in rows] == ["0", "1"]
        logged[frames, per_call] = rows
    assert logged["host", 1] == logged["device", 5]
    assert logged["host", 2] == logged["device", 5]
