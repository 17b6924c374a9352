"""The behaviour figure: each behaviour agent's curve beside Young & Tian's DQN at the same frames.

Checkpoint means by hand, the published points only where the run reaches, the packaged table,
the figure written exactly when the board keeps curves, and a layout that holds every text."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from offline_gitd.cli import main
from offline_gitd.leaderboard.behaviour import (
    CURVE_COLUMNS,
    BehaviourCurve,
    behaviour_data,
    checkpoint_means,
    points_in_range,
    read_curves,
)
from offline_gitd.leaderboard.board_references import DatasetReference, encode_references, read_references
from offline_gitd.leaderboard.plot import behaviour_figure
from offline_gitd.leaderboard.reference import MINATAR_ENVS, PublishedPoint, minatar_dqn_curve
from tests.support.runs import write_run

ROOT = Path(__file__).resolve().parents[2]
MINATAR_BOARD = ROOT / "leaderboards" / "minatar_offline" / "board.csv"
BREAKOUT = "offline_gitd/minatar-breakout/dqn-replay-1m-v0"


def test_checkpoint_means_weigh_each_window_by_its_episodes() -> None:
    steps = [50_000, 100_000, 150_000, 200_000, 250_000, 350_000]
    episodes = [10, 2, 0, 4, 1, 0]
    returns = [1.0, 7.0, math.nan, 3.0, 5.0, math.nan]
    means = checkpoint_means(steps, episodes, returns, every=100_000)
    # Block 1 (steps <= 100k): (10 * 1 + 2 * 7) / 12 = 2, not the windows' mean 4. Block 2: the empty
    # window adds nothing, 3. Block 3: one window, placed where the run stopped (250k). Block 4 has
    # no episode and is left out.
    assert means == {"step": [100_000, 200_000, 250_000], "value": [2.0, 3.0, 5.0], "episodes": [12, 4, 1]}


def test_published_points_are_drawn_only_where_the_run_reaches() -> None:
    points = minatar_dqn_curve()["Breakout-v1"]
    assert [p.env_steps for p in points_in_range(points, 1_000_000)] == [1_000_000]
    assert points_in_range(points, 999_999) == []
    assert [p.env_steps for p in points_in_range(points, 5_000_000)] == [1_000_000, 5_000_000]
    curve = BehaviourCurve("b", BREAKOUT, "Breakout-v1", "Breakout", (500_000, 1_000_000), (5, 5), (6.0, 8.0), 0.4)
    data = behaviour_data([curve])
    assert data["curves"]["b"]["published"] == {"step": [1_000_000], "value": [9.0]}
    assert data["sources"] == [points[0].source]
    short = dataclasses.replace(curve, env_step=(400_000, 900_000))
    assert behaviour_data([short])["curves"]["b"]["published"] == {"step": [], "value": []}
    assert behaviour_data([short])["sources"] == []


def test_young_and_tians_table_covers_the_five_games_with_its_source() -> None:
    table = minatar_dqn_curve()
    assert set(table) == MINATAR_ENVS  # both action sets of every game
    expected = {
        "Asterix": (12, 17),
        "Breakout": (9, 10),
        "Freeway": (50, 50),
        "Seaquest": (1, 20),
        "SpaceInvaders": (35, 43),
    }
    for game, (at_1m, at_5m) in expected.items():
        assert table[f"{game}-v0"] == table[f"{game}-v1"]
        assert [(p.env_steps, p.value) for p in table[f"{game}-v1"]] == [(1_000_000, at_1m), (5_000_000, at_5m)]
        assert all("Young & Tian (2019)" in p.source and "read off the plot" in p.source for p in table[f"{game}-v1"])


def _write_curve(path: Path, steps: list[int], episodes: list[int], returns: list[float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(CURVE_COLUMNS)
        for step, count, value in zip(steps, episodes, returns, strict=True):
            writer.writerow([step, count, "" if math.isnan(value) else value, 0.1, 1.0, 2.0])


@pytest.fixture
def board(tmp_path: Path) -> Path:
    """A MinAtar board of one method on Breakout-v1, 3 seeds x 3 steps."""
    runs = [
        write_run(
            tmp_path / f"run{seed}",
            env="Breakout-v1",
            suite="minatar",
            algorithm="cql",
            critic="td",
            seed=seed,
            steps=[1000, 2000, 3000],
            returns=[1.0 + seed, 2.0, 3.0 + 0.1 * seed],
        )
        for seed in range(3)
    ]
    path = tmp_path / "boards" / "board.csv"
    path.parent.mkdir()
    assert main(["leaderboard", "submit", *map(str, runs), "--board", str(path)]) == 0
    return path


def test_plot_draws_the_behaviour_figure_only_when_the_board_keeps_curves(
    board: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["leaderboard", "plot", "--board", str(board), "--reps", "20"]
    assert main([*base, "--out", str(tmp_path / "without")]) == 0
    assert not (tmp_path / "without" / "behaviour.png").exists()
    assert "behaviour" not in json.loads((tmp_path / "without" / "figure_data.json").read_text())

    steps = [100_000 * (k + 1) for k in range(10)]
    _write_curve(
        board.parent / "behaviour" / "offline_gitd-minatar-breakout-dqn-replay-1m-v0.csv",
        steps,
        [10] * 10,
        [float(k) for k in range(10)],
    )
    reference = DatasetReference("minatar", "Breakout-v1", BREAKOUT, 0.4, 5.7, 8.0, "by hand")
    (board.parent / "board.references.csv").write_bytes(encode_references([reference]))
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "with")]) == 0
    assert "behaviour.png" in capsys.readouterr().out
    assert (tmp_path / "with" / "behaviour.png").read_bytes().startswith(b"\x89PNG")
    panel = json.loads((tmp_path / "with" / "figure_data.json").read_text())["behaviour"]["curves"][
        "offline_gitd-minatar-breakout-dqn-replay-1m-v0"
    ]
    assert (panel["env"], panel["title"], panel["random"]) == ("Breakout-v1", "Breakout", 0.4)
    assert panel["published"] == {"step": [1_000_000], "value": [9.0]}
    assert panel["checkpoint"]["value"] == [float(k) for k in range(10)]
    # --env filters the curves as it filters the rows.
    assert [curve.env for curve in read_curves(board, ["Breakout*"])] == ["Breakout-v1"]
    assert read_curves(board, ["Pong*"]) == []


def test_a_curve_the_references_do_not_name_is_drawn_with_its_game_guessed(tmp_path: Path) -> None:
    board = tmp_path / "board.csv"
    _write_curve(
        tmp_path / "behaviour" / "offline_gitd-minatar-spaceinvaders-dqn-replay-1m-v0.csv",
        [10_000, 20_000],
        [3, 0],
        [4.0, math.nan],
    )
    (curve,) = read_curves(board)
    assert (curve.dataset, curve.env, curve.game, curve.random) == (None, None, "SpaceInvaders", None)
    assert curve.mean_return[0] == 4.0 and math.isnan(curve.mean_return[1])
    data = behaviour_data([curve])
    panel = data["curves"][curve.name]
    assert panel["title"] == "SpaceInvaders" and panel["window"]["value"] == [4.0, None]  # JSON-ready
    assert data["window_steps"] == 10_000
    assert read_curves(tmp_path / "elsewhere" / "board.csv") == []  # no behaviour/ folder: nothing, no error


def test_the_committed_curves_agree_with_their_datasets_checkpoint_returns() -> None:
    """The 1M-step point of the figure averages the episodes that ended in the last 100,000 steps;
    the dataset's own score those that started in it: the two agree to within 1% on the two games
    first recorded (games recorded later are not held to a number here)."""
    curves = read_curves(MINATAR_BOARD, ["Breakout-v1", "SpaceInvaders-v1"])
    assert sorted(curve.env for curve in curves) == ["Breakout-v1", "SpaceInvaders-v1"]
    references = {ref.env: ref for ref in read_references(MINATAR_BOARD).values()}
    for curve in curves:
        last = checkpoint_means(curve.env_step, curve.episodes, curve.mean_return)
        assert last["step"][-1] == 1_000_000 and len(last["step"]) == 10
        assert last["value"][-1] == pytest.approx(references[curve.env].dqn_replay_score, rel=0.01)
        assert curve.random == references[curve.env].ref_min_score


@pytest.mark.parametrize("count", [1, 2, 5])
def test_every_text_and_the_legend_fit_and_the_legend_covers_no_panel(count: int) -> None:
    games = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"][:count]
    steps = tuple(10_000 * (k + 1) for k in range(100))
    curves = [
        BehaviourCurve(game, None, f"{game}-v1", game, steps, (20,) * 100, tuple(np.linspace(0, 40, 100)), 1.0)
        for game in games
    ]
    figure = behaviour_figure(behaviour_data(curves))
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    (legend,) = figure.legends
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels == [
        "mean per 10k-step window",
        "episode-weighted mean per 100k steps",
        "Young & Tian DQN",
        "uniform random",
    ]
    box = legend.get_window_extent(renderer)
    for axis in figure.axes:
        assert not box.overlaps(axis.get_tightbbox(renderer))
    source = next(text for text in figure.texts if "Young & Tian (2019)" in text.get_text())
    assert source.get_window_extent(renderer).y1 <= box.y0
    drawn, (width, height) = figure.get_tightbbox(renderer), figure.get_size_inches()
    assert -0.01 <= drawn.x0 and drawn.x1 <= width + 0.01 and -0.01 <= drawn.y0 and drawn.y1 <= height + 0.01
    assert [axis.get_title() for axis in figure.axes] == games


def test_published_points_take_their_source_with_them() -> None:
    curve = BehaviourCurve("x", None, "Pong-v5", "Pong", (1_000_000,), (1,), (3.0,))
    published = {"Pong-v5": [PublishedPoint(1_000_000, 2.0, "a paper")]}
    data = behaviour_data([curve], published)
    assert data["sources"] == ["a paper"] and data["curves"]["x"]["published"]["value"] == [2.0]
