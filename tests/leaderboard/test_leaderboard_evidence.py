"""Intervals that do not move with the draw, adjusted per-env tests and one normaliser per aggregate
(docs/leaderboard.md#monte-carlo-error, #per-env-table, #one-normaliser-per-aggregate)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.leaderboard import bootstrap
from offline_gitd.leaderboard.multiple import benjamini_hochberg, holm
from offline_gitd.leaderboard.normalise import auto_kind, choose_normalisers, coverage, to_frame
from offline_gitd.leaderboard.per_env import per_env_lines
from offline_gitd.leaderboard.sensitivity import Aggregate, order_flips
from offline_gitd.leaderboard.show import load
from tests.leaderboard.test_leaderboard import row
from tests.support.runs import write_run

MINATAR = Path(__file__).resolve().parents[2] / "leaderboards" / "minatar_offline" / "board.csv"


# --- the exact bootstrap of a mean -------------------------------------------------------------


def brute_force_interval(values: np.ndarray, size: float = 0.95) -> tuple[float, float]:
    """Every one of the n^n ordered resamples, equally likely; the q-quantile is the smallest mean
    whose share of resamples at or below it reaches q."""
    n = len(values)
    means = np.sort([values[list(draw)].mean() for draw in itertools.product(range(n), repeat=n)])
    tail = (1 - size) / 2

    def quantile(q: float) -> float:
        return float(means[math.ceil(q * len(means) - 1e-9) - 1])

    return quantile(tail), quantile(1 - tail)


@pytest.mark.parametrize("seed", range(4))
def test_exact_interval_is_the_enumerated_bootstrap(seed: int) -> None:
    rng = np.random.default_rng(seed)
    samples = [rng.normal(size=n) * 5 for n in (2, 3, 4, 5, 6)]
    samples.append(np.array([1.0, 1.0, 2.0, 5.0, 5.0]))  # ties
    for values, interval in zip(samples, bootstrap.exact_mean_intervals(samples)):
        assert interval == pytest.approx(brute_force_interval(values), abs=1e-12)


def test_exact_interval_is_the_limit_of_the_monte_carlo_one() -> None:
    rng = np.random.default_rng(7)
    values = rng.gamma(2.0, 3.0, size=10)  # skewed, like Freeway tdrc's seeds
    ((low, high),) = bootstrap.exact_mean_intervals([values])
    draws = rng.integers(0, 10, size=(400_000, 10))
    mc_low, mc_high = bootstrap.percentile_interval(values[draws].mean(axis=1))
    # Monte-Carlo error of a 2.5% quantile at 400,000 draws: about 0.006 here.
    assert abs(low - mc_low) < 0.03 and abs(high - mc_high) < 0.03


@pytest.mark.parametrize("n", [3, 7, 10, 11])
def test_convolved_interval_is_within_half_a_grid_step_of_the_exact_one(n: int) -> None:
    values = np.random.default_rng(n).gamma(2.0, 3.0, size=n)
    ((low, high),) = bootstrap.exact_mean_intervals([values])
    half_step = (values.max() - values.min()) / bootstrap.GRID_STEPS / 2
    assert bootstrap.convolved_mean_interval(values) == pytest.approx((low, high), abs=half_step + 1e-12)


def test_more_seeds_than_can_be_enumerated_are_convolved_not_drawn() -> None:
    rng = np.random.default_rng(11)
    values = rng.gamma(2.0, 3.0, size=20)
    (interval,) = bootstrap.mean_intervals([values])
    assert interval == bootstrap.convolved_mean_interval(values)
    draws = rng.integers(0, 20, size=(400_000, 20))
    # Monte-Carlo error of a 2.5% quantile at 400,000 draws: about 0.003 here; the grid's 0.002.
    assert interval == pytest.approx(tuple(bootstrap.percentile_interval(values[draws].mean(axis=1))), abs=0.02)
    assert bootstrap.mean_intervals([np.array([2.0] * 15)]) == [(2.0, 2.0)]


def test_compositions_cover_every_resample_once() -> None:
    for n in (1, 2, 5, 10):
        draws, probability = bootstrap._compositions(n)
        assert len(draws) == bootstrap.exact_bootstrap_size(n) == math.comb(2 * n - 1, n)
        assert (draws.sum(axis=1) == n).all() and len({tuple(d) for d in draws}) == len(draws)
        assert probability.sum() == pytest.approx(1.0, abs=1e-12)
    assert bootstrap.exact_bootstrap_size(11) <= bootstrap.EXACT_BOOTSTRAP_LIMIT < bootstrap.exact_bootstrap_size(12)


def test_improvement_samples_match_the_pairwise_kernel_with_ties() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, size=(10, 3)).astype(float)
    y = rng.integers(0, 4, size=(12, 3)).astype(float)
    x_counts = bootstrap.counts(bootstrap.resample_indices(rng, 500, 10, 3), 10)
    y_counts = bootstrap.counts(bootstrap.resample_indices(rng, 500, 12, 3), 12)
    kernels = np.stack([bootstrap.comparison_matrix(x[:, e], y[:, e]) for e in range(3)])
    expected = np.einsum("rei,eij,rej->re", x_counts, kernels, y_counts) / 120
    assert np.array_equal(bootstrap.improvement_samples(x, y, x_counts, y_counts), expected)


def test_iqm_is_the_25_percent_trimmed_mean() -> None:
    stats = pytest.importorskip("scipy.stats")
    values = np.random.default_rng(0).normal(size=(50, 7, 4))
    expected = [stats.trim_mean(v.ravel(), 0.25) for v in values]
    before = values.copy()
    assert bootstrap.iqm(values) == pytest.approx(expected, abs=1e-12)
    assert np.array_equal(values, before)


# --- a small board: Pong (human reference) and Carnival (none) ---------------------------------


@pytest.fixture(scope="module")
def mixed_board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cql:td and cql:gitd on Pong and Carnival, 4 seeds, 3 logged steps."""
    root = tmp_path_factory.mktemp("mixed")
    runs = []
    for critic, K, beta, gain in (("td", 1, 0.0, 1.0), ("gitd", 5, 1.0, 1.2)):
        for env, scale in (("Pong", 10.0), ("Carnival", 300.0)):
            for seed in range(4):
                returns = [scale * gain * (step + 1) / 3 * (1 + 0.3 * seed) for step in range(3)]
                path = write_run(
                    root / f"{critic}-{env}-{seed}",
                    env=env,
                    algorithm="cql",
                    critic=critic,
                    seed=seed,
                    steps=[0, 1000, 2000],
                    returns=returns,
                    K=K,
                    beta=beta,
                )
                runs.append(str(path))
    board = root / "board.csv"
    assert main(["leaderboard", "submit", *runs, "--board", str(board), "--allow-new-env"]) == 0
    return board


def test_auto_uses_one_normaliser_for_every_env() -> None:
    """Pong has Atari's human reference and Carnival none: auto scores both by the baseline rather
    than mixing the two scales; a board where every env has the reference uses it."""
    mixed = to_frame([row(env="Pong"), row(env="Carnival")])
    assert auto_kind(mixed, {}) == "baseline"
    assert {item.kind for item in choose_normalisers(mixed, "auto", {}).values()} == {"baseline"}
    assert coverage(mixed, {}) == {"baseline": ["Carnival", "Pong"], "human": ["Pong"]}
    pong = to_frame([row(env="Pong"), row(env="Breakout")])
    assert {item.kind for item in choose_normalisers(pong, "auto", {}).values()} == {"human"}


def test_a_named_reference_leaves_out_the_envs_without_it(mixed_board: Path, capsys) -> None:
    loaded = load(mixed_board, "cql:td", "human")
    assert set(loaded.scored["env"]) == {"Pong"} and loaded.lacking == ("Carnival",)
    assert set(loaded.everything["env"]) == {"Pong", "Carnival"}  # the per-env table keeps it
    assert any(note.startswith("left out: Carnival has no human reference") for note in loaded.notes())
    assert [item.kind for item in loaded.aggregates] == ["baseline", "human"]
    assert loaded.aggregates[1].left_out == {"Carnival": "no human reference"}
    capsys.readouterr()
    assert main(["leaderboard", "show", "--board", str(mixed_board), "--normalise", "human", "--reps", "50"]) == 0
    text = capsys.readouterr().out
    assert "left out: Carnival has no human reference" in text
    assert "IQM final (baseline, 2 envs)" in text and "IQM final (human, 1 env)" in text


def test_json_and_html_carry_the_left_out_envs_the_adjustments_and_the_normalisers(
    mixed_board: Path, tmp_path: Path, capsys
) -> None:
    capsys.readouterr()
    argv = ["--board", str(mixed_board), "--normalise", "human", "--reps", "20"]
    assert main(["leaderboard", "show", *argv, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["no_reference"] == ["Carnival"] and list(report["envs"]) == ["Pong"]
    assert [item["normaliser"] for item in report["normalisers"]] == ["baseline", "human"]
    tested = [r for r in report["per_env"] if r.get("p_value") is not None]
    assert len(tested) == 2 and all(r["p_holm"] >= r["p_bh"] >= r["p_value"] for r in tested)
    assert main(["leaderboard", "html", *argv, "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    assert "<th>p Holm</th><th>p BH</th>" in page and 'id="normalisers"' in page
    assert "adjust over the 2 tests of this table" in page


def test_mean_intervals_do_not_depend_on_the_seed(mixed_board: Path) -> None:
    everything = load(mixed_board, "cql:td").everything
    first = per_env_lines(everything, "cql:td", 300, seed=0)
    second = per_env_lines(everything, "cql:td", 300, seed=1)
    assert [line.mean for line in first] == [line.mean for line in second]
    assert all(line.mean.low < line.mean.value < line.mean.high for line in first)


def test_order_flips_name_each_pair_once() -> None:
    found = [
        Aggregate("dqn-replay", ("A", "B"), {}, {"bc": (0.80, 1.40), "gitd": (0.79, 1.32), "td": (0.6, 1.0)}),
        Aggregate("baseline", ("A", "B"), {}, {"bc": (1.12, 1.24), "gitd": (1.28, 1.39), "td": (0.9, 1.0)}),
    ]
    (line,) = order_flips(found)
    assert line.startswith("bc and gitd change order")
    assert (
        "IQM AUC: bc ahead under dqn-replay (1.400 against 1.320); gitd ahead under baseline (1.390 against 1.240)"
        in line
    )
    assert "IQM final: bc ahead under dqn-replay (0.800 against 0.790)" in line
    assert order_flips(found[:1]) == []
    tied = [found[0], Aggregate("minari", ("A",), {}, {"bc": (0.8, 1.0), "gitd": (0.8, 1.0)})]
    assert order_flips(tied) == []


# --- the MinAtar board: the claims its README makes ----------------------------------------------


@pytest.fixture(scope="module")
def minatar_report() -> dict:
    import contextlib
    import io

    out = io.StringIO()
    argv = ["leaderboard", "show", "--board", str(MINATAR), "--baseline", "cql:td", "--normalise", "dqn-replay"]
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--format", "json", "--reps", "200"]) == 0
    return json.loads(out.getvalue())


def test_minatar_per_game_claims_after_correction(minatar_report: dict) -> None:
    """With Holm over the 20 tests only Gi-CQL on Asterix and BC on Breakout and Space Invaders
    survive at 0.05; Benjamini-Hochberg keeps all four of Gi-CQL's wins."""
    tests = [r for r in minatar_report["per_env"] if r.get("p_value") is not None]
    assert len(tests) == 20
    assert [r["p_holm"] for r in tests] == pytest.approx(holm([r["p_value"] for r in tests]))
    assert [r["p_bh"] for r in tests] == pytest.approx(benjamini_hochberg([r["p_value"] for r in tests]))
    holm_survivors = {(r["env"], r["row"]) for r in tests if r["p_holm"] < 0.05}
    assert holm_survivors == {("Asterix-v1", "cql:gitd"), ("Breakout-v1", "bc:none"), ("SpaceInvaders-v1", "bc:none")}
    bh_gitd = {r["env"] for r in tests if r["p_bh"] < 0.05 and r["row"] == "cql:gitd"}
    assert bh_gitd == {"Asterix-v1", "Freeway-v1", "Seaquest-v1", "SpaceInvaders-v1"}
    assert "over the 20 tests of this table" in minatar_report["per_env_adjustment"]


def test_minatar_bc_and_gicql_change_order_with_the_normaliser(minatar_report: dict) -> None:
    by_kind = {item["normaliser"]: item["methods"] for item in minatar_report["normalisers"]}
    assert {"baseline", "dqn-replay"} <= set(by_kind)
    assert by_kind["dqn-replay"]["bc:none"]["auc"] > by_kind["dqn-replay"]["cql:gitd"]["auc"]
    assert by_kind["baseline"]["bc:none"]["auc"] < by_kind["baseline"]["cql:gitd"]["auc"]
    assert any(line.startswith("bc:none and cql:gitd change order") for line in minatar_report["order_flips"])
