"""The stratified permutation test over the aggregate's envs (docs/leaderboard.md#across-envs-test),
checked against a brute-force enumeration written from its definition, against the per-env test it
must equal for one env, for its size under the null hypothesis, and for what it is for: a shift
that every env shows a little of, which no single env's test can carry."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.leaderboard import across_envs
from offline_gitd.leaderboard.across_envs import across_env_lines, stratified_permutation_test
from offline_gitd.leaderboard.bootstrap import permutation_test
from offline_gitd.leaderboard.show import load
from tests.leaderboard.test_online_board import _board


def brute_force(xs: list[np.ndarray], ys: list[np.ndarray]) -> float:
    """Every relabelling of every env, T computed from its definition for each."""

    def statistic(groups: list[tuple[np.ndarray, np.ndarray]]) -> float:
        total = 0.0
        for x, y in groups:
            spread = np.concatenate([x, y]).std()
            total += (x.mean() - y.mean()) / spread
        return total

    observed = abs(statistic(list(zip(xs, ys))))
    per_env = []
    for x, y in zip(xs, ys):
        pooled = np.concatenate([x, y])
        choices = []
        for taken in itertools.combinations(range(len(pooled)), len(x)):
            rest = [i for i in range(len(pooled)) if i not in taken]
            choices.append((pooled[list(taken)], pooled[rest]))
        per_env.append(choices)
    values = [abs(statistic(list(combo))) for combo in itertools.product(*per_env)]
    return float(np.mean([value >= observed - 1e-9 for value in values]))


def test_the_exact_test_is_the_enumeration_of_its_definition():
    rng = np.random.default_rng(0)
    for _ in range(5):
        xs = [rng.normal(0.3, 1.0, 3), rng.normal(5.0, 4.0, 2), rng.normal(0.0, 0.1, 3)]
        ys = [rng.normal(0.0, 1.0, 2), rng.normal(4.0, 4.0, 3), rng.normal(0.1, 0.1, 2)]
        p, kind = stratified_permutation_test(xs, ys, split_seed=0)
        assert kind == "exact"  # 10 x 10 x 10 relabellings
        assert p == pytest.approx(brute_force(xs, ys), abs=1e-12)


def test_with_one_env_it_is_the_per_env_test():
    rng = np.random.default_rng(1)
    for n, m in ((5, 5), (4, 6), (3, 7)):
        x, y = rng.normal(0.5, 1.0, n), rng.normal(0.0, 1.0, m)
        assert stratified_permutation_test([x], [y], 0) == permutation_test(x, y, 0)


def test_a_positive_affine_map_per_env_leaves_it_unchanged():
    rng = np.random.default_rng(2)
    xs = [rng.normal(1.0, 1.0, 5) for _ in range(3)]
    ys = [rng.normal(0.0, 1.0, 5) for _ in range(3)]
    scales = [(0.0, 1.0), (-3.0, 20.0), (7.0, 0.01)]
    moved_x = [a + b * x for (a, b), x in zip(scales, xs)]
    moved_y = [a + b * y for (a, b), y in zip(scales, ys)]
    assert stratified_permutation_test(moved_x, moved_y, 5)[0] == pytest.approx(
        stratified_permutation_test(xs, ys, 5)[0], abs=1e-12
    )


def test_monte_carlo_agrees_with_exact_where_both_can_run(monkeypatch):
    rng = np.random.default_rng(3)
    xs = [rng.normal(0.4, 1.0, 4) for _ in range(3)]
    ys = [rng.normal(0.0, 1.0, 4) for _ in range(3)]
    monkeypatch.setattr(across_envs, "EXACT_PERMUTATION_LIMIT", 400_000)  # 70^3 relabellings: enumerated
    exact, kind = stratified_permutation_test(xs, ys, 0)
    assert kind == "exact"
    monkeypatch.setattr(across_envs, "EXACT_PERMUTATION_LIMIT", 10)
    sampled, kind = stratified_permutation_test(xs, ys, 0)
    assert kind == "monte-carlo"
    error = np.sqrt(exact * (1 - exact) / across_envs.MONTE_CARLO_PERMUTATIONS)
    assert abs(sampled - exact) < 5 * error + 1e-4


def test_its_size_under_the_null_is_at_most_the_level():
    """Three envs of 3 runs against 3 (8,000 relabellings, exact): under exchangeability
    P(p <= 0.05) <= 0.05; 400 draws, so the bound is checked to three standard errors."""
    rng = np.random.default_rng(4)
    ps = []
    for _ in range(400):
        xs = [rng.normal(mu, sd, 3) for mu, sd in ((0, 1), (10, 5), (-2, 0.1))]
        ys = [rng.normal(mu, sd, 3) for mu, sd in ((0, 1), (10, 5), (-2, 0.1))]
        ps.append(stratified_permutation_test(xs, ys, 0)[0])
    rejected = np.mean(np.array(ps) <= 0.05)
    assert rejected <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 400)
    assert rejected > 0.005  # it is not a test that never rejects


def test_a_small_shift_in_every_env_passes_where_no_env_alone_can():
    """Five envs of 5 runs against 5, each method's runs above the other's in every env: each env's
    own exact test stops at 2/252, above Holm's first threshold over 15 tests; the test over the
    five envs gives the smallest p a Monte-Carlo test can."""
    rng = np.random.default_rng(5)
    xs = [np.sort(rng.normal(10, 1, 5)) + 3 for _ in range(5)]
    ys = [np.sort(rng.normal(10, 1, 5)) for _ in range(5)]
    per_env = [permutation_test(x, y, 0)[0] for x, y in zip(xs, ys)]
    assert min(per_env) >= 2 / 252 - 1e-12 and min(per_env) > 0.05 / 15
    p, kind = stratified_permutation_test(xs, ys, 0)
    assert kind == "monte-carlo" and p == pytest.approx(1 / (1 + across_envs.MONTE_CARLO_PERMUTATIONS))


def test_envs_without_both_methods_or_without_spread_add_nothing():
    x, y = np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.5, 1.0])
    alone = stratified_permutation_test([x], [y], 0)
    flat = np.full(3, 4.0)
    assert stratified_permutation_test([x, flat, x[:0]], [y, flat, y], 0) == alone
    assert stratified_permutation_test([flat], [flat], 0)[1] == "none"


def test_the_table_tests_each_method_twice_and_adjusts_over_all_of_them(tmp_path):
    """Two methods against DQN on one board (one env: each test is then the per-env test): a
    method that learned sooner and ends level is separated on the AUC alone, and Holm's
    adjustment runs over the table's four tests."""
    slow = [[0.0, 0.0, 4.0 + 0.1 * s] for s in range(5)]
    fast = [[4.0, 4.0, 4.0 + 0.1 * s] for s in range(5)]
    board = _board(tmp_path, {"dqn:td": slow, "dqn:gitd": fast, "dqn:itd": slow}, [1000, 2000, 3000])
    loaded = load(board, "dqn:td", "baseline")
    gitd, itd = across_env_lines(loaded.scored, loaded.baseline, seed=0)
    assert (gitd.method, itd.method) == ("dqn:gitd", "dqn:itd")
    assert gitd.envs == 1 and gitd.runs == 5 and gitd.baseline_runs == 5
    assert gitd.final.p == pytest.approx(1.0) and gitd.auc.p == pytest.approx(2 / 252) and gitd.auc.kind == "exact"
    assert itd.auc.p == pytest.approx(1.0)
    assert gitd.auc.holm == pytest.approx(4 * 2 / 252) and gitd.final.holm == pytest.approx(1.0)


def test_show_prints_the_across_envs_table_and_its_json(tmp_path, capsys):
    board = _board(tmp_path, {"dqn:td": [[1.0, 2.0]] * 3, "dqn:gitd": [[2.0, 3.0]] * 3}, [1000, 2000])
    base = ["leaderboard", "show", "--board", str(board), "--baseline", "dqn:td", "--reps", "200"]
    assert main([*base, "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "**Across envs: each method against the baseline" in out and "adjust over the 2 tests" in out
    assert "| method | envs | runs (baseline's) | p final | Holm | BH | p AUC | Holm | BH |" in out
    assert "| dqn:gitd | 1 | 3 (3) | 0.100 (exact) | 0.200 | 0.100 | 0.100 (exact) | 0.200 | 0.100 |" in out
    assert main([*base, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (line,) = report["across_envs"]
    assert line["method"] == "dqn:gitd" and line["p_auc"] == pytest.approx(0.1) and line["p_final_test"] == "exact"
    assert main([*base, "--format", "csv"]) == 0
    assert "Across" not in capsys.readouterr().out  # the CSV is the summary alone


def test_the_html_page_has_the_across_envs_table(tmp_path):
    board = _board(tmp_path, {"dqn:td": [[1.0, 2.0]] * 3, "dqn:gitd": [[2.0, 3.0]] * 3}, [1000, 2000])
    out = tmp_path / "site"
    assert (
        main(["leaderboard", "html", "--board", str(board), "--baseline", "dqn:td", "--reps", "50", "--out", str(out)])
        == 0
    )
    page = (out / "index.html").read_text()
    assert '<table id="across-envs">' in page and "<h2>Across envs</h2>" in page
    assert "<td>0.100 (exact)</td><td>0.200</td><td>0.100</td>" in page
