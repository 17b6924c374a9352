"""A sweep keeps each behaviour agent's learning curve beside its board (offline_gitd/sweeps/behaviour.py)."""

from __future__ import annotations

import csv
from pathlib import Path

from offline_gitd.sweeps.behaviour import CURVE_COLUMNS, curve_path, write_behaviour_curve

METRICS = """step,seed,updates,episodes,episode_return,episode_return_std,epsilon,bellman_error_1,loss,q_mean_1,td_abs_mean,window_seconds
10000,0,5000,155,0.41935483870967744,0.69,0.955,0.0056,0.0028,0.2199888756491244,0.04,69.097
20000,0,15000,155,0.5290322580645161,0.82,0.865,0.0103,0.0051,0.6954953282922506,0.06,72.337
"""


def test_the_curve_is_the_runs_windows_cut_to_what_a_reader_compares(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text(METRICS)
    boards = [tmp_path / "a" / "board.csv", tmp_path / "b" / "board.csv", tmp_path / "a" / "board.csv"]
    written = write_behaviour_curve(run, "offline_gitd/minatar-breakout/dqn-replay-1m-v0", boards)
    assert written == [
        tmp_path / "a" / "behaviour" / "offline_gitd-minatar-breakout-dqn-replay-1m-v0.csv",
        tmp_path / "b" / "behaviour" / "offline_gitd-minatar-breakout-dqn-replay-1m-v0.csv",
    ]
    assert written[0] == curve_path(boards[0], "offline_gitd/minatar-breakout/dqn-replay-1m-v0")
    with written[0].open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == CURVE_COLUMNS
    assert rows[1:] == [
        ["10000", "155", "0.4194", "0.9550", "0.220", "69.097"],
        ["20000", "155", "0.5290", "0.8650", "0.695", "72.337"],
    ]
    assert written[1].read_bytes() == written[0].read_bytes()


def test_a_random_policy_has_no_q_and_a_run_without_metrics_writes_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    board = tmp_path / "board.csv"
    assert write_behaviour_curve(run, "x/y-v0", [board]) == []
    (run / "metrics.csv").write_text(
        "step,seed,updates,episodes,episode_return,epsilon,q_mean_1,window_seconds\n300,0,0,14,21.5,1.0,nan,0.5\n"
    )
    (path,) = write_behaviour_curve(run, "x/y-v0", [board])
    assert path.read_text().splitlines()[1] == "300,14,21.5000,1.0000,,0.500"
