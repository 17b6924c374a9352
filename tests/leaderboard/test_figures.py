"""Figures fit for a paper: end points equal the table, legends fit, styles differ, formats,
method selection, rliable's other estimates, and the committed examples regenerate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from offline_gitd.cli import main  # noqa: E402
from offline_gitd.leaderboard.curves import centred_smooth  # noqa: E402
from offline_gitd.leaderboard.plot import (  # noqa: E402
    aggregate_figure,
    figure_data,
    method_styles,
    per_env_figure,
    plain,
    profile_figure,
)
from offline_gitd.leaderboard.show import load_scored  # noqa: E402
from offline_gitd.leaderboard.stats import summarise  # noqa: E402
from tests.support.runs import write_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "leaderboards" / "figures"
REPS = 20


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 methods (td; gitd with K = 3 and 5) x 2 envs x 3 seeds x 6 steps, noisy returns."""
    root = tmp_path_factory.mktemp("figures")
    rng = np.random.default_rng(0)
    runs = []
    methods = [("td", 1), ("gitd", 3), ("gitd", 5)]
    for critic, K in methods:
        for env, scale in (("Pong", 10.0), ("Breakout", 100.0)):
            for seed in range(3):
                returns = scale * (1 + 0.1 * K) * np.linspace(0.2, 1, 6) * (1 + 0.2 * rng.random(6))
                run = write_run(
                    root / f"{critic}{K}-{env}-{seed}",
                    env=env,
                    algorithm="cql",
                    critic=critic,
                    seed=seed,
                    steps=[1000 * (step + 1) for step in range(6)],
                    returns=returns.tolist(),
                    K=K,
                    beta=1.0,
                )
                runs.append(str(run))
    path = root / "board.csv"
    assert main(["leaderboard", "submit", *runs, "--board", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def analysed(board: Path):
    scored, key = load_scored(board, "cql:td", "baseline")
    summaries = summarise(scored, key, REPS, 0)
    return scored, key, summaries, figure_data(scored, summaries, "baseline", REPS, 0)


def test_centred_smoothing_keeps_both_ends() -> None:
    values = np.array([0.0, 10.0, 2.0, 4.0, 6.0, 30.0])
    expected = [0.0, 4.0, 4.4, 10.4, 40 / 3, 30.0]  # half-widths 0, 1, 2, 2, 1, 0
    np.testing.assert_allclose(centred_smooth(values), expected)


def test_curve_ends_at_the_tables_iqm_final_and_baseline_panels_at_one(analysed) -> None:
    _, key, summaries, data = analysed
    for item in summaries:
        assert data["aggregate"]["curves"][item.method]["value"][-1] == pytest.approx(item.iqm.value, abs=1e-12)
        assert data["aggregate"]["final_iqm"][item.method] == item.iqm.value
    for env in data["per_env"]["envs"].values():
        assert env[key]["value"][-1] == pytest.approx(1.0, abs=1e-12)
    intervals = data["intervals"]
    for item in summaries:
        assert intervals["values"][item.method][1][0] == pytest.approx(item.iqm.value)  # IQM beside the table's


def test_performance_profile_counts_runs_above_tau(analysed) -> None:
    scored, key, _, data = analysed
    finals = scored[scored["method"] == key].sort_values("step").groupby("run").tail(1)["score"].to_numpy()
    taus = np.asarray(data["profile"]["tau"])
    expected = [(finals > tau).mean() for tau in taus]
    np.testing.assert_allclose(data["profile"]["profiles"][key]["fraction"], expected)
    gap = data["intervals"]["values"][key][3][0]
    assert gap == pytest.approx(np.mean(1.0 - np.minimum(finals, 1.0)))


def _synthetic_figure_data(methods: list[str]) -> dict:
    """Drawing input for many methods with long names (the shape figure_data returns)."""
    steps = [1000 * (i + 1) for i in range(10)]

    def curve(k: int) -> dict:
        value = np.linspace(0.5, 1 + 0.05 * k, 10)
        return {"step": steps, "value": value.tolist(), "low": (value - 0.1).tolist(), "high": (value + 0.1).tolist()}

    return {
        "aggregate": {
            "methods": methods,
            "curves": {m: curve(k) for k, m in enumerate(methods)},
            "auc": {m: [1.0, 0.9, 1.1] for m in methods},
        },
        "per_env": {
            "methods": methods,
            "value": "score",
            "envs": {env: {m: curve(k) for k, m in enumerate(methods)} for env in ("LunarLander-v3", "MountainCar-v0")},
        },
    }


def test_nine_methods_have_distinct_styles_and_an_unclipped_legend() -> None:
    methods = [f"cql:gitd:K={k},beta=0.01,heads=shared_nonlinear" for k in range(8)] + ["cql:td"]
    styles = method_styles(methods)
    assert len({(str(s["color"]), s["linestyle"], s["marker"]) for s in styles.values()}) == 9
    data = _synthetic_figure_data(methods)
    for figure in (
        aggregate_figure(data["aggregate"], "cql:td", "baseline"),
        per_env_figure(data["per_env"], "baseline"),
    ):
        canvas = FigureCanvasAgg(figure)
        canvas.draw()  # as saving does
        renderer = canvas.get_renderer()
        box, page = figure.legends[0].get_window_extent(renderer), figure.bbox
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
        assert [text.get_text() for text in figure.legends[0].get_texts()] == methods
        # The hand-set margins hold every label, tick label and title (all of the drawing, in inches).
        drawn, (width, height) = figure.get_tightbbox(renderer), figure.get_size_inches()
        assert -0.01 <= drawn.x0 and drawn.x1 <= width + 0.01 and -0.01 <= drawn.y0 and drawn.y1 <= height + 0.01


@pytest.mark.parametrize("baseline", ["dqn:td", "dqn:td [loop=compiled utd=0.25]", "cql:" + "g" * 60])
def test_the_auc_bars_label_names_a_long_baseline_inside_the_figure(baseline: str) -> None:
    """The bars' x label names the baseline; a long key (a replay ratio in brackets, or a name cut
    to 48 characters) breaks onto two lines flush right instead of running off the right edge."""
    methods = ["dqn:gitd [loop=compiled utd=0.25]", "dqn:itd", baseline]
    figure = aggregate_figure(_synthetic_figure_data(methods)["aggregate"], baseline, "baseline")
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    label = figure.axes[1].xaxis.label
    assert plain(baseline) in label.get_text()
    drawn, (width, height) = figure.get_tightbbox(renderer), figure.get_size_inches()
    assert -0.01 <= drawn.x0 and drawn.x1 <= width + 0.01 and -0.01 <= drawn.y0 and drawn.y1 <= height + 0.01
    # ... and clear of the tick labels above it and of the legend below it
    ticks = min(tick.get_window_extent(renderer).y0 for tick in figure.axes[1].get_xticklabels() if tick.get_text())
    box = label.get_window_extent(renderer)
    assert box.y1 <= ticks and figure.legends[0].get_window_extent(renderer).y1 <= box.y0


def test_plot_formats_dpi_methods_and_raw_returns(board: Path, analysed, tmp_path: Path, capsys) -> None:
    base = ["leaderboard", "plot", "--board", str(board), "--reps", str(REPS)]
    k3 = next(m for m in analysed[0]["method"].unique() if "K=3" in m)
    assert main([*base, "--out", str(tmp_path / "svg"), "--format", "svg", "--methods", f"{k3},cql:td"]) == 0
    names = sorted(p.name for p in (tmp_path / "svg").iterdir())
    assert names == ["aggregate.svg", "figure_data.json", "intervals.svg", "per_env.svg", "profile.svg"]
    assert (tmp_path / "svg" / "profile.svg").read_text().lstrip().startswith("<?xml")
    data = json.loads((tmp_path / "svg" / "figure_data.json").read_text())
    assert data["aggregate"]["methods"] == [k3, "cql:td"]
    assert (
        main([*base, "--out", str(tmp_path / "pdf"), "--format", "pdf", "--per-env", "return", "--methods", "cql:td"])
        == 0
    )
    assert (tmp_path / "pdf" / "per_env.pdf").read_bytes().startswith(b"%PDF")
    data = json.loads((tmp_path / "pdf" / "figure_data.json").read_text())
    assert data["per_env"]["value"] == "return" and max(data["per_env"]["envs"]["Breakout"]["cql:td"]["value"]) > 50
    assert main([*base, "--out", str(tmp_path / "png"), "--dpi", "50", "--methods", "cql:td"]) == 0
    width = int.from_bytes((tmp_path / "png" / "profile.png").read_bytes()[16:20], "big")  # PNG IHDR width
    assert width == pytest.approx(50 * profile_figure(data["profile"], "baseline").get_figwidth(), abs=2)
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "x"), "--methods", "cql:gitd"]) == 2
    assert "'cql:gitd' is ambiguous" in capsys.readouterr().err


def test_committed_example_figures_regenerate() -> None:
    """leaderboards/figures/ holds one of each figure; the numbers behind them must still come
    out of the board they were drawn from (point estimates: they do not depend on --reps)."""
    from benchmarks.example_figures import example_data

    committed = json.loads((EXAMPLES / "figure_data.json").read_text())
    for name in ("aggregate", "per_env", "per_env_return", "intervals", "profile"):
        assert (EXAMPLES / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    fresh = example_data(reps=REPS)
    assert fresh["aggregate"]["methods"] == committed["aggregate"]["methods"]
    for method in committed["aggregate"]["methods"]:
        for name in ("aggregate", "per_env", "per_env_return"):
            old, new = committed[name], fresh[name]
            curves = [(old["curves"][method], new["curves"][method])] if name == "aggregate" else []
            curves += [(old["envs"][env][method], new["envs"][env][method]) for env in old.get("envs", {})]
            for before, after in curves:
                assert after["step"] == before["step"]
                np.testing.assert_allclose(after["value"], before["value"], rtol=1e-9)
        np.testing.assert_allclose(
            [v[0] for v in fresh["intervals"]["values"][method]],
            [v[0] for v in committed["intervals"]["values"][method]],
            rtol=1e-9,
        )
        np.testing.assert_allclose(
            fresh["profile"]["profiles"][method]["fraction"], committed["profile"]["profiles"][method]["fraction"]
        )
        assert fresh["aggregate"]["final_iqm"][method] == pytest.approx(committed["aggregate"]["final_iqm"][method])


def test_methods_option_keeps_commas_inside_method_keys() -> None:
    from offline_gitd.leaderboard.command import _method_list

    assert _method_list("cql:gitd:K=5,beta=1, cql:td,cql:itd:K=5,beta=0.01") == [
        "cql:gitd:K=5,beta=1",
        "cql:td",
        "cql:itd:K=5,beta=0.01",
    ]


def test_vectorised_per_step_statistics_equal_rliables() -> None:
    from offline_gitd.leaderboard.curves import iqm_per_step, mean_per_step
    from offline_gitd.leaderboard.stats import rliable_modules

    _, metrics = rliable_modules()
    scores = np.random.default_rng(1).normal(size=(7, 3, 5))
    np.testing.assert_allclose(iqm_per_step(scores), [metrics.aggregate_iqm(scores[..., t]) for t in range(5)])
    np.testing.assert_allclose(mean_per_step(scores), [metrics.aggregate_mean(scores[..., t]) for t in range(5)])
