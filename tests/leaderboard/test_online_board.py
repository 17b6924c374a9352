"""Online boards (docs/leaderboard.md#online-boards): a replay ratio is a method of its own, the
per-env AUC table, the aggregate AUC's interval resampling the baseline's seeds, the per-env
panels' references, and the publishing path end to end on real compiled-loop MinAtar runs."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.errors import UsageError
from offline_gitd.leaderboard import bootstrap
from offline_gitd.leaderboard.behaviour import BehaviourCurve
from offline_gitd.leaderboard.board_references import DatasetReference, encode_references
from offline_gitd.leaderboard.curves import per_env_references
from offline_gitd.leaderboard.normalise import filter_rows, method_keys, resolve_baseline, to_frame
from offline_gitd.leaderboard.per_env import per_env_lines, run_values
from offline_gitd.leaderboard.reference import PublishedPoint
from offline_gitd.leaderboard.schema import ResultRow, read_rows
from offline_gitd.leaderboard.show import load
from offline_gitd.leaderboard.stats import summarise
from offline_gitd.online.config import OnlineConfig
from tests.support.runs import write_run

BREAKOUT = "offline_gitd/minatar-breakout/dqn-replay-1m-v0"


def _grid_config(critic: str, K: int, utd: float) -> OnlineConfig:
    """A cell of the online grid as the sweep would make it (the run's length set apart)."""
    return OnlineConfig(
        algo="dqn", env="MinAtar/Breakout-v1", critic=critic, K=K, beta=1.0, utd=utd, steps=1_000_000, out="-"
    ).resolve("minatar")


def test_the_replay_ratio_is_part_of_the_method() -> None:
    """DQN at one update per 4 env steps and at one per step are two methods on the board: the run's
    method_config names the ratio set away from the minatar default (1), so their rows never pool."""
    medium, high = _grid_config("td", 1, 0.25), _grid_config("td", 1, 1.0)
    assert "utd=0.25" in medium.method_config("minatar").split()
    assert not any(word.startswith("utd=") for word in high.method_config("minatar").split())
    assert medium.config_hash() != high.config_hash()


def test_two_replay_ratios_get_two_method_keys() -> None:
    """Rows of the two ratios' runs, each with the method_config its run records, get two method keys,
    so ``--baseline`` names the ratio (docs/leaderboard.md#online-boards)."""
    rows = _ratio_rows((0.25, 1.0))
    frame = to_frame(rows)
    keys = sorted(set(method_keys(frame)))
    assert keys == ["dqn:td [loop=compiled utd=0.25]", "dqn:td [loop=compiled]"]
    # --method takes a full key as it is, brackets and all, and '*utd=0.25*' the medium ratio's.
    frame["method"] = method_keys(frame)
    assert set(filter_rows(frame, (), ["dqn:td [loop=compiled]"], None)["method"]) == {"dqn:td [loop=compiled]"}
    assert set(filter_rows(frame, (), ["*utd=0.25*"], None)["method"]) == {"dqn:td [loop=compiled utd=0.25]"}


def test_a_key_with_its_config_names_the_method_before_the_board_needs_it() -> None:
    """The grid's first cells ran one ratio: the key is still ``dqn:td``, and the commands written for
    the whole grid (``--baseline 'dqn:td [loop=compiled utd=0.25]' --method '*utd=0.25*'``) name it,
    so the board publishes with the same commands before and after the other ratio lands."""
    frame = to_frame(_ratio_rows((0.25,)))
    assert set(frame["method"]) == {"dqn:td"}
    assert resolve_baseline(frame, "dqn:td [loop=compiled utd=0.25]") == "dqn:td"
    assert len(filter_rows(frame, (), ["*utd=0.25*"], None)) == len(frame)
    with pytest.raises(UsageError, match="not on the board"):
        resolve_baseline(frame, "dqn:td [loop=compiled]")
    with pytest.raises(UsageError, match="no rows match"):
        filter_rows(frame, (), ["dqn:td [loop=compiled]"], None)
    # once both ratios are on the board, the short key is the ambiguous one
    both = to_frame(_ratio_rows((0.25, 1.0)))
    assert resolve_baseline(both, "dqn:td [loop=compiled utd=0.25]") == "dqn:td [loop=compiled utd=0.25]"
    with pytest.raises(UsageError, match="ambiguous"):
        resolve_baseline(both, "dqn:td")


def _ratio_rows(utds: tuple[float, ...]) -> list[ResultRow]:
    """Two seeds of DQN on Breakout at each replay ratio, each row with its run's method_config."""
    return [
        ResultRow(
            suite="minatar",
            env="Breakout-v1",
            algorithm="dqn",
            critic="td",
            K=1,
            beta=1.0,
            seed=seed,
            step=10_000,
            return_=1.0,
            run_id=f"utd{utd}",
            config_hash=cfg.config_hash(),
            package_version="0.2.0",
            created_at="2026-11-28T00:00:00+00:00",
            method_config=cfg.method_config("minatar"),
        )
        for utd in utds
        for cfg in [_grid_config("td", 1, utd)]
        for seed in range(2)
    ]


def _board(tmp_path: Path, curves: dict[str, list[list[float]]], steps: list[int]) -> Path:
    """A Breakout-v1 board: per method key ``algorithm:critic`` one run per seed with the curve given,
    and a references file (random 0, DQN replay 10: a fixed normaliser, x / 10)."""
    runs = []
    for method, seeds in curves.items():
        algorithm, critic = method.split(":")
        for seed, returns in enumerate(seeds):
            runs.append(
                write_run(
                    tmp_path / f"{critic}-{seed}",
                    env="Breakout-v1",
                    suite="minatar",
                    algorithm=algorithm,
                    critic=critic,
                    seed=seed,
                    steps=steps,
                    returns=returns,
                    run_id=f"{critic}-{seed}",
                    config_hash=f"{abs(hash(critic)) % 16**16:016x}",
                )
            )
    board = tmp_path / "board.csv"
    assert main(["leaderboard", "submit", *map(str, runs), "--board", str(board)]) == 0
    reference = DatasetReference("minatar", "Breakout-v1", BREAKOUT, 0.0, 9.0, 10.0, "by hand")
    (tmp_path / "board.references.csv").write_bytes(encode_references([reference]))
    return board


def test_the_aggregate_auc_interval_resamples_the_baselines_seeds(tmp_path: Path) -> None:
    """A method whose seeds all learned the same curve has no spread of its own: its AUC relative to
    the baseline's still has an interval, because the baseline's IQM AUC, the ratio's denominator,
    is recomputed from a resample of the baseline's seeds in every replication. The interval is
    the exact one of that ratio (every resample of the 4 baseline seeds enumerated) to the
    Monte-Carlo error of 20,000 replications."""
    base = [[v] * 3 for v in (1.0, 2.0, 3.0, 6.0)]
    board = _board(tmp_path, {"dqn:td": base, "dqn:gitd": [[2.0] * 3] * 4}, [1000, 2000, 3000])
    loaded = load(board, "dqn:td", "dqn-replay")
    summaries = {s.method: s for s in summarise(loaded.scored, loaded.baseline, 20_000, 0)}
    gitd = summaries["dqn:gitd"]
    base_aucs = np.array([3 * v[0] / 10 for v in base])
    assert gitd.auc.value == pytest.approx(0.6 / float(bootstrap.iqm(base_aucs[:, None])))
    assert gitd.auc.high - gitd.auc.low > 0.3  # not the degenerate [r, r] of a fixed denominator
    ratios = np.sort(
        [0.6 / float(bootstrap.iqm(base_aucs[list(pick), None])) for pick in itertools.product(range(4), repeat=4)]
    )
    # Percentile ends of the exact distribution (256 equally likely resamples), bracketed by its atoms.
    low_atoms = ratios[[int(0.025 * 256) - 1, int(0.025 * 256) + 1]]
    high_atoms = ratios[[int(0.975 * 256) - 2, int(0.975 * 256)]]
    assert low_atoms[0] - 1e-9 <= gitd.auc.low <= low_atoms[1] + 1e-9
    assert high_atoms[0] - 1e-9 <= gitd.auc.high <= high_atoms[1] + 1e-9
    # The baseline's own ratio is 1 at the point; its interval comes from the same draw as its denominator.
    assert summaries["dqn:td"].auc.value == pytest.approx(1.0)
    # Normalised by DQN's mean final return (the paper's, and the online board's): the normaliser is
    # resampled with the same draw and cancels from the ratio, which keeps the same exact interval.
    loaded = load(board, "dqn:td", "baseline", keep_flagged=True)  # 4 spread seeds: flagged as noisy, kept
    by_baseline = {s.method: s for s in summarise(loaded.scored, loaded.baseline, 20_000, 0)}["dqn:gitd"]
    assert by_baseline.auc.value == pytest.approx(gitd.auc.value)
    assert low_atoms[0] - 1e-9 <= by_baseline.auc.low <= low_atoms[1] + 1e-9
    assert high_atoms[0] - 1e-9 <= by_baseline.auc.high <= high_atoms[1] + 1e-9


def test_per_env_auc_is_the_mean_return_over_logged_steps_with_adjusted_tests(tmp_path: Path) -> None:
    """The AUC table tests learning speed, which final returns miss: two methods that end at the same
    return, one of which got there sooner, tie on the final table and differ on the AUC table."""
    slow = [[0.0, 0.0, 4.0 + 0.1 * s] for s in range(5)]
    fast = [[4.0, 4.0, 4.0 + 0.1 * s] for s in range(5)]
    board = _board(tmp_path, {"dqn:td": slow, "dqn:gitd": fast, "dqn:itd": slow}, [1000, 2000, 3000])
    loaded = load(board, "dqn:td", "baseline")
    aucs = run_values(loaded.everything, "auc")
    assert sorted(aucs[aucs["method"] == "dqn:gitd"]["return"]) == pytest.approx(
        [(8 + 4 + 0.1 * s) / 3 for s in range(5)]
    )
    finals = {line.method: line for line in per_env_lines(loaded.everything, "dqn:td", 1000, 0)}
    by_auc = {line.method: line for line in per_env_lines(loaded.everything, "dqn:td", 1000, 0, value="auc")}
    assert finals["dqn:gitd"].p_value == pytest.approx(1.0)
    assert by_auc["dqn:gitd"].p_value < 0.05 and by_auc["dqn:gitd"].points == "3"
    assert by_auc["dqn:gitd"].mean.value == pytest.approx(np.mean([(8 + 4 + 0.1 * s) / 3 for s in range(5)]))
    # Holm over the table's two tests: the smaller p doubled; itd's identical curves give p = 1.
    assert by_auc["dqn:gitd"].p_holm == pytest.approx(min(1.0, 2 * by_auc["dqn:gitd"].p_value))
    assert by_auc["dqn:itd"].p_value == pytest.approx(1.0) and by_auc["dqn:td"].p_value is None


def test_show_prints_the_auc_table_only_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    board = _board(tmp_path, {"dqn:td": [[1.0, 2.0]] * 3, "dqn:gitd": [[2.0, 2.0]] * 3}, [1000, 2000])
    base = ["leaderboard", "show", "--board", str(board), "--baseline", "dqn:td", "--reps", "200"]
    assert main([*base, "--format", "markdown"]) == 0
    assert "Per env: AUC" not in capsys.readouterr().out
    assert main([*base, "--format", "markdown", "--per-env-auc"]) == 0
    out = capsys.readouterr().out
    assert "**Per env: AUC, the mean raw return over a run's logged steps" in out
    assert "| Breakout-v1 | dqn:gitd | 2 [2, 2] |" in out and "| 3 x 2 |" in out
    assert main([*base, "--format", "json", "--per-env-auc"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {r["row"]: r["mean_final_return"] for r in report["per_env_auc"]} == {"dqn:gitd": 2.0, "dqn:td": 1.5}


def test_an_online_final_return_says_the_window_it_rests_on() -> None:
    """An online row's final return is the mean over the training episodes of its last logged
    window; the board keeps that mean, not the count, so the window is what the table can name:
    the last step less the one before, where the runs agree."""
    import pandas as pd

    from offline_gitd.leaderboard.per_env import EnvLine, basis_text, final_window
    from offline_gitd.leaderboard.stats import Interval

    def logged(runs: dict[str, list[int]]) -> pd.DataFrame:
        return pd.DataFrame([{"run": run, "step": step} for run, steps in runs.items() for step in steps])

    assert final_window(logged({"a": [10_000, 990_000, 1_000_000], "b": [1_000_000, 990_000]})) == 10_000
    assert final_window(logged({"a": [5_000]})) == 5_000  # one window, from step 0
    assert final_window(logged({"a": [10_000, 20_000], "b": [10_000, 15_000]})) is None
    line = EnvLine("Breakout-v1", "dqn:td", 5, None, Interval(1.0, 0.5, 1.5), None, None, None, window=10_000)
    assert basis_text(line) == "training episodes of the last 10,000 steps"
    assert basis_text(dataclasses.replace(line, window=None)) == "?"
    assert basis_text(dataclasses.replace(line, episodes=10)) == "10"


def test_show_names_the_window_behind_online_final_returns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    board = _board(tmp_path, {"dqn:td": [[1.0, 2.0, 3.0]] * 3, "dqn:gitd": [[2.0, 2.0, 2.5]] * 3}, [500, 1500, 2500])
    base = ["leaderboard", "show", "--board", str(board), "--baseline", "dqn:td", "--reps", "200", "--per-env-auc"]
    assert main([*base, "--format", "markdown"]) == 0
    final, auc = capsys.readouterr().out.split("**Per env: AUC")
    assert "| 3 x training episodes of the last 1,000 steps |" in final and "x ?" not in final
    assert "| 3 x 3 |" in auc  # the AUC table keeps its logged steps per run
    assert main([*base, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {r["row"]: r["final_window_steps"] for r in report["per_env"] if "seeds" in r} == {
        "dqn:gitd": 1000,
        "dqn:td": 1000,
    }
    assert all(r["final_window_steps"] is None for r in report["per_env_auc"])


def test_per_env_references_stay_within_the_boards_steps() -> None:
    envs = {"Breakout-v1": {"dqn:td": {"step": [10_000, 500_000], "value": [1.0, 2.0], "low": [], "high": []}}}
    curve = BehaviourCurve(
        name="b",
        dataset=BREAKOUT,
        env="Breakout-v1",
        game="Breakout",
        env_step=(10_000, 20_000, 30_000, 600_000),
        episodes=(5, 0, 5, 5),
        mean_return=(1.0, math.nan, 3.0, 9.0),
    )
    published = {"Breakout-v1": (PublishedPoint(400_000, 7.0, "src"), PublishedPoint(1_000_000, 9.0, "src"))}
    out = per_env_references(envs, {"Breakout-v1": 0.4, "Pong": 0.0}, [curve], published)
    assert list(out) == ["Breakout-v1"]
    ref = out["Breakout-v1"]
    assert ref["random"] == 0.4 and ref["sources"] == ["src"]
    assert ref["published"] == {"step": [400_000], "value": [7.0]}
    # the window without an episode is dropped, the one past the board's last step too; then smoothed
    assert ref["behaviour"]["step"] == [10_000, 30_000] and ref["behaviour"]["value"] == [1.0, 3.0]
    assert per_env_references(envs, {}, [], {}) == {}


def test_the_per_env_figure_writes_the_published_points_source_whole() -> None:
    """Young & Tian's points are read off a plot; their source line travels with the figure, so it
    is written whole under the legend (a method's name may be cut in its middle, a source may not)."""
    from offline_gitd.leaderboard.plot import per_env_figure
    from offline_gitd.leaderboard.reference import minatar_dqn_curve

    (source,) = {point.source for point in minatar_dqn_curve()["Breakout-v1"]}
    curve = {"step": [500_000, 1_000_000], "value": [4.0, 6.0], "low": [3.5, 5.5], "high": [4.5, 6.5]}
    published = {"step": [1_000_000], "value": [9.0]}
    reference = {"random": 0.4, "published": published, "sources": [source], "behaviour": None}
    data = {"methods": ["dqn:td"], "value": "return", "envs": {"Breakout-v1": {"dqn:td": curve}}}
    figure = per_env_figure({**data, "references": {"Breakout-v1": reference}}, "baseline")
    written = " ".join(" ".join(text.get_text().split()) for text in figure.texts)
    assert f"Young & Tian DQN: {source}" in written and "chars)" not in written


def _curve_file(path: Path, steps: list[int], returns: list[float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["env_step", "episodes", "mean_training_return", "epsilon", "q_mean", "window_seconds"])
        writer.writerows([step, 10, value, 0.1, 1.0, 2.0] for step, value in zip(steps, returns))


def test_plot_draws_references_beside_each_games_curves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--per-env return`` panels carry random, Young & Tian's 1M-frame value and the behaviour
    curve, read from ``--behaviour DIR`` (another board's folder); score panels carry none."""
    steps = [250_000, 500_000, 750_000, 1_000_000]
    board = _board(tmp_path / "online", {"dqn:td": [[1.0, 3, 5, 7]] * 3, "dqn:gitd": [[2.0, 4, 6, 8]] * 3}, steps)
    folder = tmp_path / "offline" / "behaviour"
    _curve_file(folder / "offline_gitd-minatar-breakout-dqn-replay-1m-v0.csv", steps, [0.5, 2.0, 5.0, 8.0])
    base = ["leaderboard", "plot", "--board", str(board), "--baseline", "dqn:td", "--reps", "50"]
    assert main([*base, "--per-env", "return", "--behaviour", str(folder), "--out", str(tmp_path / "f")]) == 0
    data = json.loads((tmp_path / "f" / "figure_data.json").read_text())
    ref = data["per_env"]["references"]["Breakout-v1"]
    assert ref["random"] == 0.0 and ref["published"] == {"step": [1_000_000], "value": [9.0]}
    assert ref["behaviour"]["step"] == steps and ref["behaviour"]["value"][-1] == 8.0
    assert "behaviour" in data  # the behaviour figure too, from the same folder
    assert (tmp_path / "f" / "per_env.png").read_bytes().startswith(b"\x89PNG")
    assert main([*base, "--out", str(tmp_path / "g")]) == 0
    assert "references" not in json.loads((tmp_path / "g" / "figure_data.json").read_text())["per_env"]
    capsys.readouterr()
    assert main([*base, "--behaviour", str(tmp_path / "nowhere"), "--out", str(tmp_path / "h")]) == 2
    assert "--behaviour" in capsys.readouterr().err


@pytest.mark.e2e  # two compiled-loop MinAtar runs of 2 seeds, then submit, show and plot: 1-2 minutes on 2 cores
def test_an_online_board_is_published_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The board's README commands on a tiny real grid: DQN and Gi-DQN (K = 5) at one update per 4
    env steps on Breakout, 2 seeds x 2,000 env steps, logged every 500; submitted, shown against DQN
    with both per-env tables, and plotted with the references."""
    board_dir = tmp_path / "board"
    board_dir.mkdir()
    repo = Path(__file__).resolve().parents[2]
    (board_dir / "board.references.csv").write_bytes(
        (repo / "leaderboards" / "minatar_online" / "board.references.csv").read_bytes()
    )
    tiny = ["--steps", "2000", "--seeds", "0-1", "--log-every", "500", "--replay-size", "1000"]
    tiny += ["--initial-samples", "200", "--utd", "1/4", "--T", "50", "--no-progress", "--no-tensorboard"]
    for name, critic in (("dqn", ["--critic", "td"]), ("gi-dqn", ["--critic", "gitd", "--K", "5", "--beta", "1"])):
        args = ["online", "dqn", "--env", "MinAtar/Breakout-v1", *critic, *tiny, "--out", str(tmp_path / name)]
        assert main(args) == 0
    board = board_dir / "board.csv"
    assert main(["leaderboard", "submit", str(tmp_path / "dqn"), str(tmp_path / "gi-dqn"), "--board", str(board)]) == 0
    rows = [row for _, row in read_rows(board)]
    assert len(rows) == 2 * 2 * 4  # one row per seed per logged window
    assert {row.method_config for row in rows} == {"T=50 initial_samples=200 loop=compiled replay_size=1000 utd=0.25"}
    assert main(["leaderboard", "submit", str(tmp_path / "dqn"), "--board", str(board)]) == 0  # again: nothing added
    assert len(read_rows(board)) == 16
    capsys.readouterr()
    # 2,000 steps leave DQN at random's return: its env is flagged, and kept to have something to show.
    show = ["leaderboard", "show", "--board", str(board), "--baseline", "dqn:td", "--normalise", "baseline"]
    show.append("--keep-flagged-envs")
    assert main([*show, "--format", "markdown", "--per-env-auc", "--reps", "500"]) == 0
    out = capsys.readouterr().out
    assert "| Breakout-v1 | random | 0.4 |" in out
    assert "Holm and Benjamini-Hochberg (BH) adjust over the 1 tests" in out and "**Per env: AUC" in out
    figures = tmp_path / "figures"
    plot = ["leaderboard", "plot", "--board", str(board), "--baseline", "dqn:td", "--normalise", "baseline"]
    plot.append("--keep-flagged-envs")
    behaviour = repo / "leaderboards" / "minatar_offline" / "behaviour"
    assert (
        main([*plot, "--per-env", "return", "--behaviour", str(behaviour), "--reps", "100", "--out", str(figures)]) == 0
    )
    data = json.loads((figures / "figure_data.json").read_text())
    ref = data["per_env"]["references"]["Breakout-v1"]
    assert ref["random"] == 0.4 and ref["published"]["step"] == []  # 2,000 steps: Young & Tian's 1M is beyond
    assert ref["behaviour"] is None  # the behaviour curve's first window (10,000 steps) is beyond too
    assert sorted(data["per_env"]["envs"]["Breakout-v1"]) == ["dqn:gitd", "dqn:td"]
    assert (figures / "per_env.png").exists() and (figures / "behaviour.png").exists()


def _flat(text: str) -> str:
    """A command as a page shows it, one line: continuations joined, spaces collapsed."""
    return " ".join(text.replace("\\\n", " ").split())


def test_the_online_boards_published_files_are_its_commands_output(tmp_path: Path) -> None:
    """``iqm.md`` and ``figures/`` beside the MinAtar online board are what the commands its README
    names (``python -m tests.leaderboard.publish_online``) make from the committed board: a cell
    that lands without them being rewritten fails here. The figures' numbers are compared at their
    point estimates (curves, IQMs, profiles, references), which do not depend on ``--reps``: the
    whole grid's (``figures/``), the headline pair's (``figures/gidqn-dqn/``) and, once a
    replay-ratio pair has landed, the two ratios' (``figures/ratio-pairs/``)."""
    from tests.leaderboard.publish_online import (
        BOARD_DIR,
        FIGURES,
        HEADLINE_FIGURES,
        HEADLINE_PLOT,
        IQM,
        PAIR_FIGURES,
        PAIR_PLOT,
        PLOT,
        SHOW,
        pairs_landed,
    )
    from tests.published import ROOT, run

    readme = _flat((ROOT / BOARD_DIR / "README.md").read_text())
    assert f"{SHOW.removeprefix('offline_gitd ')} > {IQM}" in readme
    assert "python -m tests.leaderboard.publish_online" in readme
    assert (ROOT / IQM).read_text() == run(SHOW) + "\n"
    plots = [(PLOT, FIGURES), (HEADLINE_PLOT, HEADLINE_FIGURES)]
    if pairs_landed(row for _, row in read_rows(ROOT / BOARD_DIR / "board.csv")):
        plots.append((PAIR_PLOT, PAIR_FIGURES))
    for plot, figures in plots:
        assert plot.removeprefix("offline_gitd ") in readme, plot
        _assert_figures_are_the_commands(plot, ROOT / figures, tmp_path / Path(figures).name)


# The hand-laid table "DQN beside its references" of the board README: its game names, and for each
# numeric column the command whose per-env final-return line (the first table naming the env and
# method) holds the figures, and that line's method (None: the column is the uniform-random return).
REFERENCE_GAMES = {
    "Asterix": "Asterix-v1",
    "Breakout": "Breakout-v1",
    "Freeway": "Freeway-v1",
    "Seaquest": "Seaquest-v1",
    "Space Invaders": "SpaceInvaders-v1",
}
RATIO_BLOCK = (
    "offline_gitd leaderboard show --board leaderboards/minatar_online/board.csv --env Breakout-v1 --env Asterix-v1 "
    "--baseline 'dqn:td [loop=compiled utd=0.25]' --method 'dqn:td [loop=compiled]' --normalise baseline "
    "--per-env-auc --format markdown"
)


def _first_per_env_cells(output: str) -> dict[tuple[str, str], str]:
    """(env, method) -> the figure cell of the first per-env table line naming both (the final
    returns come before the AUCs in `show`'s output)."""
    cells: dict[tuple[str, str], str] = {}
    for line in output.splitlines():
        parts = [part.strip() for part in line.strip().strip("|").split("|")]
        if len(parts) >= 3 and parts[0] in REFERENCE_GAMES.values():
            cells.setdefault((parts[0], parts[1]), parts[2])
    return cells


def _numbers(text: str) -> list[str]:
    return re.findall(r"-?[0-9]+(?:\.[0-9]+)?", text)


def _agrees(shown: str, printed: str) -> bool:
    """Each number of ``shown`` is the matching number of ``printed`` rounded to as many decimals
    as ``shown`` gives (the table rounds `show`'s four significant digits for reading)."""
    shown_numbers, printed_numbers = _numbers(shown), _numbers(printed)
    return len(shown_numbers) == len(printed_numbers) and all(
        float(a) == round(float(b), len(a.partition(".")[2])) for a, b in zip(shown_numbers, printed_numbers)
    )


def test_the_references_table_quotes_the_boards_commands() -> None:
    """The board README's "DQN beside its references": DQN's final returns at each ratio and the
    uniform-random return, per game, are the figures `show` prints for them from the committed
    board (the main grid's command, and the block setting the two ratios side by side); a cell that
    lands without the table being restated fails here. The other columns are references read off
    other sources (Young & Tian's figure, the behaviour agents' files)."""
    from tests.leaderboard.publish_online import BOARD_DIR, SHOW
    from tests.published import ROOT, run

    text = (ROOT / BOARD_DIR / "README.md").read_text()
    assert RATIO_BLOCK in text
    main_grid, ratios = _first_per_env_cells(run(SHOW)), _first_per_env_cells(run(RATIO_BLOCK))
    columns = (
        (main_grid, "dqn:td [loop=compiled utd=0.25]"),
        (ratios, "dqn:td [loop=compiled]"),
        (main_grid, "random"),
    )
    checked = 0
    for line in text.split("**DQN beside its references**", 1)[1].splitlines():
        parts = [part.strip().replace("**", "") for part in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or parts[0] not in REFERENCE_GAMES:
            continue
        env = REFERENCE_GAMES[parts[0]]
        for shown, (cells, method) in zip(parts[1:4], columns):
            if not _numbers(shown):
                assert (env, method) not in cells, f"{parts[0]}: {method} is on the board but the table reads {shown!r}"
                continue
            assert _agrees(shown, cells[(env, method)]), (
                f"{parts[0]}: {method} reads {shown}, `show` {cells[(env, method)]}"
            )
            checked += 1
        if parts[0] == "Space Invaders":
            break
    assert checked >= 2 * len(REFERENCE_GAMES)  # DQN's and random's on every game, at least


def _assert_figures_are_the_commands(plot: str, committed_dir: Path, fresh_dir: Path) -> None:
    import shlex

    committed = json.loads((committed_dir / "figure_data.json").read_text())
    argv = shlex.split(plot)[1:]
    argv[argv.index("--out") + 1] = str(fresh_dir)
    assert main([*argv, "--reps", "50"]) == 0
    fresh = json.loads((fresh_dir / "figure_data.json").read_text())
    assert fresh["per_env"]["references"] == committed["per_env"]["references"]
    assert fresh["behaviour"] == committed["behaviour"]
    methods = committed["aggregate"]["methods"]
    assert fresh["aggregate"]["methods"] == methods and set(fresh["per_env"]["envs"]) == set(
        committed["per_env"]["envs"]
    )
    for method in methods:
        curves = [(committed["aggregate"]["curves"][method], fresh["aggregate"]["curves"][method])]
        curves += [
            (committed["per_env"]["envs"][env][method], fresh["per_env"]["envs"][env][method])
            for env in fresh["per_env"]["envs"]
        ]
        for before, after in curves:
            assert after["step"] == before["step"]
            np.testing.assert_allclose(after["value"], before["value"], rtol=1e-9)
        assert fresh["aggregate"]["final_iqm"][method] == pytest.approx(committed["aggregate"]["final_iqm"][method])
        points = [values[0] for values in fresh["intervals"]["values"][method]]
        np.testing.assert_allclose(points, [values[0] for values in committed["intervals"]["values"][method]])
        np.testing.assert_allclose(
            fresh["profile"]["profiles"][method]["fraction"], committed["profile"]["profiles"][method]["fraction"]
        )
    for name in ("aggregate", "per_env", "intervals", "profile", "behaviour"):
        assert (committed_dir / f"{name}.png").read_bytes().startswith(b"\x89PNG")


def test_the_replay_ratio_pairs_publish_once_they_land(tmp_path: Path) -> None:
    """The pairs' tables and figures are written once the board holds a whole pair at one update per
    env step (DQN's and Gi-DQN's on one game; DQN's alone is not), and their commands run on such a
    board: the committed main-grid rows of Breakout, with a copy of DQN's and Gi-DQN's relabelled as
    one update per env step (their own config hash and runs)."""
    import shlex

    from tests.leaderboard.publish_online import BOARD_DIR, PAIR_FIGURES, PAIR_PLOT, RATIOS, pairs_landed
    from tests.published import ROOT, run

    board = ROOT / BOARD_DIR / "board.csv"
    landed = pairs_landed(row for _, row in read_rows(board))
    for path, command in RATIOS.items():
        assert (ROOT / path).exists() == landed, path
        if landed:
            assert (ROOT / path).read_text() == run(command) + "\n"
    assert (ROOT / PAIR_FIGURES / "figure_data.json").exists() == landed

    with board.open(newline="") as handle:
        main_grid = [r for r in csv.DictReader(handle) if "utd=0.25" in r["method_config"].split()]
    pairs = [
        {**r, "method_config": "loop=compiled", "config_hash": r["config_hash"][::-1], "run_id": r["run_id"] + "-utd1"}
        for r in main_grid
        if r["env"] == "Breakout-v1" and r["critic"] in ("td", "gitd")
    ]
    assert pairs, "the committed board has no Breakout DQN or Gi-DQN rows to relabel"
    (tmp_path / "board.references.csv").write_bytes((ROOT / BOARD_DIR / "board.references.csv").read_bytes())

    def write_board(rows: list[dict[str, str]]) -> list[ResultRow]:
        with (tmp_path / "board.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(main_grid[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return [row for _, row in read_rows(tmp_path / "board.csv")]

    # one cell of a pair (DQN's, which the grid runs first) is not a pair: nothing to publish yet
    assert not pairs_landed(write_board([*main_grid, *(r for r in pairs if r["critic"] == "td")]))
    assert pairs_landed(write_board([*main_grid, *pairs]))
    for command in [*RATIOS.values(), PAIR_PLOT]:
        argv = shlex.split(command)[1:]
        argv[argv.index("--board") + 1] = str(tmp_path / "board.csv")
        if "--out" in argv:
            argv[argv.index("--out") + 1] = str(tmp_path / "figures")
        assert main([*argv, "--reps", "50"]) == 0, command
    data = json.loads((tmp_path / "figures" / "figure_data.json").read_text())
    assert sorted(data["per_env"]["envs"]["Breakout-v1"]) == [
        "dqn:gitd [loop=compiled utd=0.25]",
        "dqn:gitd [loop=compiled]",
        "dqn:td [loop=compiled utd=0.25]",
        "dqn:td [loop=compiled]",
    ]
    assert data["per_env"]["references"]["Breakout-v1"]["behaviour"] is not None


def test_the_sweep_skips_exactly_the_cells_the_committed_board_holds(tmp_path: Path) -> None:
    """Re-running the grid with its committed board trains none of the cells on it, and only those:
    each cell's computed config hash is one the board's rows record, five seeds each."""
    from offline_gitd.sweeps.core import ON_BOARD, action
    from offline_gitd.sweeps.on_board import BoardCheck
    from offline_gitd.sweeps.spec import expand, load_spec, with_board, with_seeds_per_run
    from offline_gitd.sweeps.state import SweepPaths

    root = Path(__file__).resolve().parents[2]
    board = root / "leaderboards" / "minatar_online" / "board.csv"
    spec = with_board(load_spec(root / "sweeps" / "minatar_online.toml"), board)
    check = BoardCheck(spec)
    skipped = {plan.name for plan in expand(spec) if action(SweepPaths(tmp_path), plan, check) == ON_BOARD}
    with board.open() as handle:
        seeds_per_hash: dict[str, set[str]] = {}
        for row in csv.DictReader(handle):
            seeds_per_hash.setdefault(row["config_hash"], set()).add(row["seed"])
    assert len(skipped) == len(seeds_per_hash) > 0
    assert all(seeds == {"0", "1", "2", "3", "4"} for seeds in seeds_per_hash.values())
    assert {check.expected(plan).config_hash for plan in expand(spec) if plan.name in skipped} == set(seeds_per_hash)
    # The same board read by the grid split into runs of 3 and 2 seeds (--seeds-per-run 3, the way
    # asterix-gidqn-utd1 ran): each split run of a cell on the board is skipped too, and only those.
    split = with_seeds_per_run(spec, 3)
    split_check = BoardCheck(split)
    split_skipped = [plan for plan in expand(split) if action(SweepPaths(tmp_path), plan, split_check) == ON_BOARD]
    assert len(split_skipped) == 2 * len(seeds_per_hash)
    assert {split_check.expected(plan).config_hash for plan in split_skipped} == set(seeds_per_hash)


def test_every_dirty_row_was_dirty_with_the_sweeps_own_board_alone(tmp_path: Path) -> None:
    """A row recorded ``dirty`` ran from a tree whose only local change was the sweep's board and
    timings file (a grid run from a worktree whose tracked board it appended to): checked by
    recreating, at the row's commit, the board and timings as they stood when the cell started (a
    prefix of the committed files, ending at a cell's last row) and matching ``git diff HEAD``'s
    SHA-256 with the row's ``diff_sha256`` (leaderboards/minatar_online/README.md#status-2026-12-01)."""
    import hashlib
    import shutil
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(root), "rev-parse"]).returncode:
        pytest.skip("no git checkout here: the rows' commits cannot be checked out")
    folder = root / "leaderboards" / "minatar_online"
    board_lines = (folder / "board.csv").read_text().splitlines(keepends=True)
    timing_lines = (folder / "timings.csv").read_text().splitlines(keepends=True)
    with (folder / "board.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    ends = [
        i + 1 for i in range(len(rows)) if i + 1 == len(rows) or rows[i + 1]["config_hash"] != rows[i]["config_hash"]
    ]
    dirty = {(row["commit"], row["diff_sha256"], row["config_hash"]) for row in rows if row["dirty"] == "true"}
    for commit, digest, config_hash in sorted(dirty):
        first = next(i for i, row in enumerate(rows) if row["config_hash"] == config_hash)
        tree = tmp_path / commit[:7]
        subprocess.run(["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(tree), commit], check=True)
        try:
            found = False
            for end in (e for e in ends if e <= first):
                for timings in range(2, len(timing_lines) + 1):
                    (tree / "leaderboards/minatar_online/board.csv").write_text("".join(board_lines[: end + 1]))
                    (tree / "leaderboards/minatar_online/timings.csv").write_text("".join(timing_lines[:timings]))
                    diff = subprocess.run(["git", "-C", str(tree), "diff", "HEAD", "--binary"], capture_output=True)
                    found = hashlib.sha256(diff.stdout).hexdigest() == digest
                    if found:
                        break
                if found:
                    break
            assert found, f"rows of {config_hash} at {commit[:7]}: their local change was not the board alone"
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], check=True)
