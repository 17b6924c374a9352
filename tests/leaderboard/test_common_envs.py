"""An aggregate compares methods over the envs every chosen method ran in
(docs/leaderboard.md#one-set-of-envs-per-aggregate): a method missing from one of the baseline's
envs is not set against the baseline's aggregate over other games."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_gitd.cli import main
from tests.support.runs import write_run

STEPS = [0, 500, 1000]


def _board(root: Path, *, qrc_on: str = "") -> Path:
    """DQN (td) on two games, Gi-DQN (gitd) on the first alone. On the shared game Gi-DQN's curve
    is 1.1x DQN's; on the second, DQN's returns are ten times the first game's, so an AUC ratio
    taken over unequal games would be far from 1.1."""
    runs = []
    for seed in range(4):
        base = [1.0, 2.0 + 0.01 * seed, 3.0]
        for critic, scale in (("td", 1.0), ("gitd", 1.1)):
            runs.append(
                write_run(
                    root / f"a-{critic}-{seed}",
                    env="CartPole-v1",
                    suite="gym",
                    algorithm="dqn",
                    critic=critic,
                    seed=seed,
                    steps=STEPS,
                    returns=[scale * value for value in base],
                )
            )
        if qrc_on:
            runs.append(
                write_run(
                    root / f"q-{seed}",
                    env=qrc_on,
                    suite="gym",
                    algorithm="dqn",
                    critic="tdrc",
                    seed=seed,
                    steps=STEPS,
                    returns=base,
                )
            )
        runs.append(
            write_run(
                root / f"b-td-{seed}",
                env="Acrobot-v1",
                suite="gym",
                algorithm="dqn",
                critic="td",
                seed=seed,
                steps=STEPS,
                returns=[10.0 * value + seed for value in base],
            )
        )
    board = root / "board.csv"
    assert main(["leaderboard", "submit", *map(str, runs), "--board", str(board)]) == 0
    return board


def test_the_aggregate_keeps_only_the_envs_every_method_ran(tmp_path: Path, capsys) -> None:
    board = _board(tmp_path)
    capsys.readouterr()
    argv = ["leaderboard", "show", "--board", str(board), "--baseline", "dqn:td", "--normalise", "baseline"]
    assert main([*argv, "--reps", "200", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    gitd = next(item for item in report["methods"] if item["method"] == "dqn:gitd")
    assert gitd["auc"] == pytest.approx(1.1, rel=1e-6) and gitd["envs"] == 1
    left = "env Acrobot-v1 from the aggregate (per-env tables keep it): dqn:gitd has no runs there"
    assert report["left_out"] == [left]
    assert {line["env"] for line in report["per_env"]} == {"CartPole-v1", "Acrobot-v1"}
    for item in report["normalisers"]:
        assert "Acrobot-v1" not in item["envs"]


def test_no_shared_env_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """Gi-DQN ran on CartPole alone and QRC on Acrobot alone: no env holds both."""
    board = _board(tmp_path, qrc_on="Acrobot-v1")
    capsys.readouterr()
    assert main(["leaderboard", "show", "--board", str(board), "--baseline", "dqn:td"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no env has runs of every chosen method" in err[0]
