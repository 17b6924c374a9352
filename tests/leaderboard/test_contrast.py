"""The gain contrast (docs/leaderboard.md#gain-contrast): how a method's gain over its baseline
changes between two settings, checked against hand computation for its point estimates, against
the exact bootstrap distribution for its interval, and end to end on a board with two replay
ratios, as the MinAtar online board's pairs will have them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.contrast import board_contrast, gain_contrast
from offline_gitd.leaderboard.schema import ResultRow
from offline_gitd.leaderboard.submit import encode_rows
from offline_gitd.online.config import OnlineConfig


def test_point_estimates_are_ratios_of_means_and_their_geometric_mean():
    cells = [
        [np.array([4.0, 6.0]), np.array([2.0, 2.0]), np.array([3.0, 3.0]), np.array([2.0, 4.0])],
        [np.array([9.0]), np.array([3.0, 3.0, 3.0]), np.array([2.0]), np.array([1.0])],
    ]
    a, b, overall = gain_contrast(cells, ["A", "B"], reps=100, seed=0)
    assert (a.first.value, a.second.value, a.contrast.value) == pytest.approx((2.5, 1.0, 2.5))
    assert (b.first.value, b.second.value, b.contrast.value) == pytest.approx((3.0, 2.0, 1.5))
    assert overall.env == "all" and overall.first.value == pytest.approx(np.sqrt(2.5 * 3.0))
    assert overall.contrast.value == pytest.approx(np.sqrt(2.5 * 3.0) / np.sqrt(1.0 * 2.0))
    assert overall.seeds == (3, 5, 3, 3)


def test_the_interval_is_the_bootstrap_distributions_percentiles():
    """Two runs per cell, one env: 2^2 resamples per cell, 4^4 = 256 equally likely contrasts.
    With 40,000 replications the percentile ends lie between the exact distribution's atoms."""
    cells = [[np.array([3.0, 5.0]), np.array([2.0, 3.0]), np.array([2.0, 4.0]), np.array([2.5, 3.5])]]
    (line,) = gain_contrast(cells, ["A"], reps=40_000, seed=1)

    def resamples(values):
        return [np.mean(pick) for pick in itertools.product(values, repeat=len(values))]

    exact = np.sort(
        [(m1 / b1) / (m2 / b2) for m1, b1, m2, b2 in itertools.product(*(resamples(list(cell)) for cell in cells[0]))]
    )
    low_atoms = exact[[int(0.025 * 256) - 2, int(0.025 * 256) + 1]]
    high_atoms = exact[[int(0.975 * 256) - 2, int(0.975 * 256) + 1]]
    assert low_atoms[0] - 1e-9 <= line.contrast.low <= low_atoms[1] + 1e-9
    assert high_atoms[0] - 1e-9 <= line.contrast.high <= high_atoms[1] + 1e-9


def test_a_baseline_mean_at_or_below_zero_is_refused_naming_the_env():
    cells = [[np.array([1.0]), np.array([0.0, 0.0]), np.array([1.0]), np.array([1.0])]]
    with pytest.raises(UsageError, match="Freeway-v1: a gain is a ratio of mean returns"):
        gain_contrast(cells, ["Freeway-v1"], reps=10, seed=0)


def _rows(curves: dict[tuple[str, float, str], list[float]]) -> list[ResultRow]:
    """Per (critic, replay ratio, env) one run per final value, logged at two steps (0 then the
    value), with the method_config its run would record."""
    rows = []
    for (critic, utd, env), finals in curves.items():
        cfg = OnlineConfig(
            algo="dqn", env=f"MinAtar/{env}", critic=critic, K=5 if critic == "gitd" else 1, beta=1.0, utd=utd,
            steps=1_000_000, out="-",
        ).resolve("minatar")  # fmt: skip
        for seed, final in enumerate(finals):
            for step, value in ((10_000, 0.0), (20_000, final)):
                rows.append(
                    ResultRow(
                        suite="minatar", env=env, algorithm="dqn", critic=critic, K=cfg.K, beta=1.0, seed=seed,
                        step=step, return_=value, run_id=f"{critic}-{utd}-{env}-{seed}",
                        config_hash=cfg.config_hash(), package_version="0.2.0",
                        created_at="2026-11-28T00:00:00+00:00", method_config=cfg.method_config("minatar"),
                    )
                )  # fmt: skip
    return rows


def test_the_command_contrasts_two_replay_ratios_on_one_board(tmp_path: Path, capsys):
    curves = {
        ("gitd", 1.0, "Breakout-v1"): [12.0, 14.0, 13.0],
        ("td", 1.0, "Breakout-v1"): [8.0, 10.0, 9.0],
        ("gitd", 0.25, "Breakout-v1"): [10.0, 10.0, 11.0],
        ("td", 0.25, "Breakout-v1"): [9.0, 10.0, 11.0],
        ("gitd", 1.0, "Asterix-v1"): [6.0, 7.0, 8.0],
        ("td", 1.0, "Asterix-v1"): [4.0, 5.0, 6.0],
        ("gitd", 0.25, "Asterix-v1"): [5.0, 5.0, 5.0],
        ("td", 0.25, "Asterix-v1"): [5.0, 4.0, 6.0],
    }
    board = tmp_path / "board.csv"
    board.write_bytes(encode_rows(_rows(curves), header=True))
    gains = [
        ("dqn:gitd [loop=compiled]", "dqn:td [loop=compiled]"),
        ("dqn:gitd [loop=compiled utd=0.25]", "dqn:td [loop=compiled utd=0.25]"),
    ]
    (first, second), lines = board_contrast(board, gains, (), "final", reps=2000, seed=0)
    assert (first.method, second.baseline) == (gains[0][0], gains[1][1])
    by_env = {line.env: line for line in lines}
    assert by_env["Breakout-v1"].first.value == pytest.approx(13.0 / 9.0)
    assert by_env["Breakout-v1"].second.value == pytest.approx(31.0 / 30.0)
    assert by_env["Asterix-v1"].contrast.value == pytest.approx((7.0 / 5.0) / 1.0)
    auc = {line.env: line for line in board_contrast(board, gains, (), "auc", reps=2000, seed=0)[1]}
    assert auc["Breakout-v1"].first.value == pytest.approx((13.0 / 2) / (9.0 / 2))  # the mean over (0, final)
    args = ["leaderboard", "contrast", "--board", str(board), "--reps", "500", "--value", "final"]
    for method, baseline in gains:
        args += ["--gain", method, baseline]
    assert main([*args, "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "| Breakout-v1 | 1.444 [" in out and "| all |" in out and "3 / 3 / 3 / 3" in out
    assert main([*args, "--format", "json", "--env", "Breakout-v1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [line["env"] for line in report["lines"]] == ["Breakout-v1"]  # one env: no "all" line
    with pytest.raises(UsageError, match="four different methods"):
        board_contrast(board, [gains[0], gains[0]], (), "auc", reps=10, seed=0)
