"""The board's estimators against rliable and against synthetic boards whose answer is known.

- Point estimates equal rliable's (Agarwal et al. 2021) to rounding; the stratified-bootstrap
  intervals agree with rliable's to Monte-Carlo error.
- Baseline normalisation divides by an estimate; the intervals resample it. Over a few hundred
  synthetic boards with a known population answer the 95% interval covers it about 95% of the
  time, while holding the normaliser fixed (what the board did before) covers it far less often.
- The per-env permutation test and probability of improvement agree with direct computations.
"""

from __future__ import annotations

import math
import warnings
from itertools import combinations

import numpy as np
import pytest

from offline_gitd.leaderboard import bootstrap
from offline_gitd.leaderboard.normalise import (
    choose_normalisers,
    normalise,
    t_quantile_975,
    to_frame,
    unstable_normalisers,
)
from offline_gitd.leaderboard.stats import MethodRuns, Normaliser, method_estimates, rliable_modules, summarise
from tests.leaderboard.test_leaderboard import row


@pytest.fixture(scope="module")
def rliable():
    library, metrics = rliable_modules()
    return library, metrics


def test_point_estimates_equal_rliables(rliable) -> None:
    _, metrics = rliable
    rng = np.random.default_rng(3)
    for runs, envs in ((5, 5), (7, 3), (10, 10), (3, 1)):
        scores = rng.normal(size=(runs, envs)) * rng.uniform(0.1, 10, size=envs)
        other = rng.normal(size=(runs + 2, envs))
        assert bootstrap.iqm(scores[None])[0] == pytest.approx(metrics.aggregate_iqm(scores), abs=1e-12)
        assert bootstrap.median(scores[None])[0] == pytest.approx(metrics.aggregate_median(scores), abs=1e-12)
        assert bootstrap.mean(scores[None])[0] == pytest.approx(metrics.aggregate_mean(scores), abs=1e-12)
        gap = metrics.aggregate_optimality_gap(scores, 0.5)
        assert bootstrap.optimality_gap(scores[None], 0.5)[0] == pytest.approx(gap, abs=1e-12)
        ties = np.round(scores * 2) / 2  # ties count one half
        expected = metrics.probability_of_improvement(ties[:, :], np.round(other * 2) / 2)
        got = bootstrap.improvement_samples(ties, np.round(other * 2) / 2, None, None).mean()
        assert got == pytest.approx(expected, abs=1e-12)


def test_improvement_from_counts_equals_the_resampled_pairs() -> None:
    """P(X > Y) of a resample, from run counts, equals the direct pairwise mean on the resample."""
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 4, size=(6, 2)).astype(float), rng.integers(0, 4, size=(4, 2)).astype(float)
    dx, dy = bootstrap.resample_indices(rng, 50, 6, 2), bootstrap.resample_indices(rng, 50, 4, 2)
    fast = bootstrap.improvement_samples(x, y, bootstrap.counts(dx, 6), bootstrap.counts(dy, 4))
    for r in range(50):
        for e in range(2):
            xs, ys = x[dx[r, :, e], e], y[dy[r, :, e], e]
            direct = np.mean([(a > b) + 0.5 * (a == b) for a in xs for b in ys])
            assert fast[r, e] == pytest.approx(direct, abs=1e-12)


def test_iqm_interval_agrees_with_rliables_bootstrap(rliable) -> None:
    """A fixed normaliser (slope 1): the interval is rliable's stratified bootstrap's, to MC error."""
    library, metrics = rliable
    rng = np.random.default_rng(1)
    scores = rng.gamma(2.0, 1.0, size=(8, 4))
    saved = np.random.get_state()
    np.random.seed(0)  # rliable's stratified bootstrap draws from numpy's global generator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arch's RandomState deprecation
        _, theirs = library.get_interval_estimates(
            {"x": scores}, metrics.aggregate_iqm, reps=4000, random_state=np.random.RandomState(0)
        )
    np.random.set_state(saved)
    samples = bootstrap.iqm(bootstrap.gather(scores, bootstrap.resample_indices(rng, 4000, 8, 4)))
    low, high = bootstrap.percentile_interval(samples)
    width = float(theirs["x"][1, 0] - theirs["x"][0, 0])
    assert low == pytest.approx(theirs["x"][0, 0], abs=0.06 * width)
    assert high == pytest.approx(theirs["x"][1, 0], abs=0.06 * width)


# --- coverage on synthetic boards -----------------------------------------------------------------

BASE_MEANS = np.array([10.0, 20.0, 5.0, 40.0])
METHOD_GAIN = np.array([1.3, 1.0, 1.5, 1.2])  # method mean / baseline mean per env
BASE_CV, METHOD_CV = 0.35, 0.3  # standard deviation / mean
BASE_SEEDS, METHOD_SEEDS = 5, 10


def true_normalised_iqm() -> float:
    """The population IQM of X_e / mu_b,e over envs (equal weights): the 25% trimmed mean of a
    mixture of normals N(g_e, (cv g_e)^2), by integrating its density on a fine grid."""
    grid = np.linspace(-2.0, 5.0, 400_001)
    step = grid[1] - grid[0]
    sd = METHOD_CV * METHOD_GAIN
    density = np.mean(np.exp(-0.5 * ((grid[:, None] - METHOD_GAIN) / sd) ** 2) / (sd * math.sqrt(2 * math.pi)), axis=1)
    cdf = np.cumsum(density) * step
    middle = (cdf >= 0.25) & (cdf <= 0.75)
    return float(np.sum(grid[middle] * density[middle]) * step / 0.5)


def coverage(boards: int, reps: int, resample_normaliser: bool) -> float:
    """The fraction of synthetic boards whose 95% IQM interval holds the true value, with the
    estimator ``summarise`` uses (``method_estimates`` on a ``Normaliser``)."""
    truth = true_normalised_iqm()
    rng = np.random.default_rng(12345)
    envs = tuple(f"env{e}" for e in range(len(BASE_MEANS)))
    hits = 0
    for _ in range(boards):
        base = BASE_MEANS * (1 + BASE_CV * rng.standard_normal((BASE_SEEDS, len(envs))))
        mean = BASE_MEANS * METHOD_GAIN
        finals = mean * (1 + METHOD_CV * rng.standard_normal((METHOD_SEEDS, len(envs))))
        b = base.mean(axis=0)
        normaliser = Normaliser(
            envs=envs,
            offset=1.0 - np.sign(b),
            slope=1.0 / np.abs(b),
            baseline="cql:td",
            baseline_envs=envs,
            baseline_finals=base,
            estimated=envs,
        )
        mine = MethodRuns("m", list(envs), finals, finals, np.ones_like(finals), METHOD_SEEDS)
        base_draw = bootstrap.resample_indices(rng, reps, BASE_SEEDS, len(envs))
        point = normaliser.resampled(None)
        coeffs = normaliser.resampled(base_draw) if resample_normaliser else tuple(np.repeat(c, reps, 0) for c in point)
        draw = bootstrap.resample_indices(rng, reps, METHOD_SEEDS, len(envs))
        iqm, _, _ = method_estimates(mine, draw, point, coeffs, np.ones(reps))
        hits += iqm.low <= truth <= iqm.high
    return hits / boards


def test_true_iqm_is_computed_independently() -> None:
    """The grid integral agrees with a large Monte-Carlo sample of the population."""
    rng = np.random.default_rng(7)
    draws = METHOD_GAIN * (1 + METHOD_CV * rng.standard_normal((400_000, len(METHOD_GAIN))))
    assert true_normalised_iqm() == pytest.approx(bootstrap.iqm(draws[None])[0], abs=2e-3)


def test_intervals_that_resample_the_baseline_cover_the_true_value() -> None:
    """400 synthetic boards: resampling the normaliser's seeds covers about 95%; holding it fixed
    (the estimator before) misses the normaliser's noise and covers far less."""
    with_noise = coverage(boards=400, reps=1000, resample_normaliser=True)
    fixed = coverage(boards=400, reps=1000, resample_normaliser=False)
    assert 0.90 <= with_noise <= 0.99, with_noise
    assert fixed < 0.80, fixed


# --- the board-level estimator, against an independent loop ----------------------------------------


def test_summarise_resamples_the_baseline_like_a_plain_loop() -> None:
    """``summarise``'s IQM interval under baseline normalisation equals, to Monte-Carlo error, a
    plain per-replication loop that resamples both methods' seeds and recomputes the baseline mean."""
    rng = np.random.default_rng(5)
    rows, data = [], {}
    for env, scale in (("Pong", 10.0), ("Breakout", 30.0), ("Qbert", 300.0)):
        base = scale * (1 + 0.3 * rng.standard_normal(4))
        gitd = 1.4 * scale * (1 + 0.3 * rng.standard_normal(6))
        data[env] = (gitd, base)
        rows += [row(env=env, seed=s, step=1, value=float(v)) for s, v in enumerate(base)]
        rows += [row(env=env, critic="gitd", K=5, seed=s, step=1, value=float(v)) for s, v in enumerate(gitd)]
    scored = normalise(to_frame(rows), "baseline", "cql:td")
    (gitd_line,) = [s for s in summarise(scored, "cql:td", reps=4000, seed=0) if s.method == "cql:gitd"]

    loop = np.random.default_rng(99)
    samples = []
    for _ in range(4000):
        values = []
        for gitd, base in data.values():
            b = loop.choice(base, size=len(base)).mean()
            values.extend(loop.choice(gitd, size=len(gitd)) / b)
        values = np.sort(values)
        cut = len(values) // 4
        samples.append(values[cut : len(values) - cut].mean())
    low, high = np.percentile(samples, [2.5, 97.5])
    width = high - low
    assert gitd_line.iqm.low == pytest.approx(low, abs=0.05 * width)
    assert gitd_line.iqm.high == pytest.approx(high, abs=0.05 * width)


def test_the_baselines_own_line_uses_one_draw() -> None:
    """The baseline compared with itself: AUC exactly 1 and P(improvement) exactly 1/2 in every
    replication, since its runs and its normaliser are the same draw."""
    rows = [row(env="Pong", seed=s, step=t, value=float(s + t)) for s in range(5) for t in (1, 2)]
    rows += [row(env="Pong", critic="gitd", seed=s, step=t, value=float(2 * s + t)) for s in range(5) for t in (1, 2)]
    scored = normalise(to_frame(rows), "baseline", "cql:td")
    td = next(s for s in summarise(scored, "cql:td", reps=200, seed=0) if s.method == "cql:td")
    assert (td.auc.low, td.auc.value, td.auc.high) == pytest.approx((1.0, 1.0, 1.0))
    assert (td.improvement.low, td.improvement.high) == pytest.approx((0.5, 0.5))


def test_an_env_whose_baseline_is_within_noise_of_zero_or_random_is_flagged() -> None:
    """Pong's random return is -20.7 (DQN Zoo): a baseline at -20 +- 1 is not above it beyond
    noise; a Breakout baseline of (0, 0.4, 0, 0.2, 0.4) is within noise of zero; Qbert is clear."""
    rows = [row(env="Pong", seed=s, step=1, value=v) for s, v in enumerate((-21.0, -20.0, -19.0))]
    rows += [row(env="Breakout", seed=s, step=1, value=v) for s, v in enumerate((0.0, 0.4, 0.0, 0.2, 0.4))]
    rows += [row(env="Qbert", seed=s, step=1, value=v) for s, v in enumerate((5000.0, 5200.0, 5100.0))]
    frame = to_frame(rows)
    flagged = unstable_normalisers(frame, choose_normalisers(frame, "baseline", {}), "cql:td")
    assert set(flagged) == {"Pong", "Breakout"}
    assert "within noise of zero" in flagged["Breakout"] and "random policy's -20.7" in flagged["Pong"]
    assert t_quantile_975(4) == 2.776 and t_quantile_975(200) == pytest.approx(1.972, abs=1e-3)


# --- per-env tests --------------------------------------------------------------------------------


def test_permutation_test_enumerates_every_split() -> None:
    x, y = np.array([3.0, 5.0, 9.0]), np.array([1.0, 2.0, 2.0, 4.0])
    p, how = bootstrap.permutation_test(x, y, split_seed=0)
    pooled = np.concatenate([x, y])
    observed = abs(x.mean() - y.mean())
    extreme = [
        abs(pooled[list(c)].mean() - np.delete(pooled, list(c)).mean()) >= observed - 1e-12
        for c in combinations(range(7), 3)
    ]
    assert how == "exact" and p == pytest.approx(np.mean(extreme))
    assert bootstrap.permutation_test(x, x.copy(), 0)[0] == pytest.approx(1.0)


def test_monte_carlo_permutation_test_is_close_to_the_exact_one(monkeypatch) -> None:
    rng = np.random.default_rng(2)
    x, y = rng.normal(0.8, 1, 8), rng.normal(0, 1, 8)  # C(16, 8) = 12,870 splits
    exact, how = bootstrap.permutation_test(x, y, 0)
    assert how == "exact"
    monkeypatch.setattr(bootstrap, "EXACT_PERMUTATION_LIMIT", 10)
    sampled, how = bootstrap.permutation_test(x, y, 0)
    assert how == "monte-carlo" and sampled == pytest.approx(exact, abs=0.01)


def test_episodes_per_seed_come_from_the_rows_or_the_domains_offline_default() -> None:
    """``seeds x episodes``: an explicit ``eval_episodes=N`` wins; rows that ran their domain's
    defaults get the offline default of the suite's domain (config/paper.py); legacy rows (method
    not recorded), online algorithms and disagreeing rows give ``None`` ("?")."""
    import pandas as pd

    from offline_gitd.config.paper import OFFLINE_DEFAULTS
    from offline_gitd.leaderboard.per_env import episodes_of

    minatar = OFFLINE_DEFAULTS["minatar"]["eval_episodes"]
    assert episodes_of(pd.Series(["eval_episodes=5 lr=0.1"]), "minatar", "cql") == 5
    assert episodes_of(pd.Series(["defaults"]), "minatar", "cql") == minatar
    assert episodes_of(pd.Series(["steps_per_epoch=5000"]), "minatar", "bc") == minatar
    assert episodes_of(pd.Series(["defaults"]), "minatar", "offline-dqn") == minatar
    assert episodes_of(pd.Series([""]), "minatar", "cql") is None  # not recorded
    assert episodes_of(pd.Series(["defaults"]), "minatar", "dqn") is None  # online: training episodes
    # a suite that names no domain (a Minari dataset of any domain): every domain's default is 10
    assert episodes_of(pd.Series(["steps_per_epoch=5000"]), "minari", "cql") == minatar == 10
    assert episodes_of(pd.Series(["defaults"]), "minari", "dqn") is None
    assert episodes_of(pd.Series(["eval_episodes=5", "eval_episodes=7"]), "minatar", "cql") is None
    assert episodes_of(pd.Series(["eval_episodes=5", "defaults"]), "minatar", "cql") is None
