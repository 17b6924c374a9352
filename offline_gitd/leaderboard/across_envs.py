"""One test per method over every env of the aggregate (docs/leaderboard.md#across-envs-test).

The per-env tables test each method against the baseline in each env. With few seeds those tests
cannot be strong: 5 seeds against 5 give an exact permutation test no p below 2/252 = 0.008, and
a table of 3 methods x 5 games adjusts over 15 tests, where Holm's smallest threshold is
0.05 / 15 = 0.003. No single game can then carry a claim, however consistent the games are. The
aggregate's question ("is the method better over the suite?") is one hypothesis per method, and
it has a test of its own:

**A stratified permutation test.** Under the null hypothesis that a method and the baseline do not
differ in any env, the labels of an env's runs are exchangeable within that env (not across envs,
whose returns have other scales). The statistic is

    T = sum over envs e of (mean_x(e) - mean_y(e)) / s(e),

where s(e) is the standard deviation of the env's pooled runs of both methods (the same under
every relabelling, so it is a constant of the test; an env whose pooled runs are all equal adds
nothing). Each env thus weighs by how far apart its methods are relative to its own spread, and
an affine normalisation with a positive slope per env (every normaliser the board offers) leaves T
unchanged, so the test runs on raw values. The p value is two-sided: the fraction of relabellings,
each env relabelled independently, whose |T| reaches the observed |T|. All relabellings are
enumerated where their number (the product over envs of C(n + m, n)) is at most
:data:`~offline_gitd.leaderboard.bootstrap.EXACT_PERMUTATION_LIMIT` (``exact``); otherwise
:data:`~offline_gitd.leaderboard.bootstrap.MONTE_CARLO_PERMUTATIONS` random ones are drawn,
independently per env, and p = (1 + hits) / (1 + draws) (``monte-carlo``). With one env it is the
per-env table's test.

The test runs for the final return and for the AUC (the mean raw return over the run's logged
steps), and Holm's and Benjamini-Hochberg's adjustments go over every test of the table: each
method but the baseline, twice.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from offline_gitd.leaderboard.bootstrap import EXACT_PERMUTATION_LIMIT, MONTE_CARLO_PERMUTATIONS, all_splits
from offline_gitd.leaderboard.multiple import benjamini_hochberg, holm

if TYPE_CHECKING:
    import pandas as pd

VALUES = ("final", "auc")


@dataclasses.dataclass(frozen=True)
class SuiteTest:
    """One stratified permutation test: raw p, how it was computed, and its adjusted p values."""

    p: float
    kind: str  # "exact" or "monte-carlo"
    holm: float | None = None
    bh: float | None = None


@dataclasses.dataclass(frozen=True)
class AcrossLine:
    """A method against the baseline over ``envs`` (the envs of the aggregate both ran), with
    ``runs`` of its own and ``baseline_runs`` of the baseline's there; one test per value."""

    method: str
    envs: int
    runs: int
    baseline_runs: int
    final: SuiteTest
    auc: SuiteTest


def _spread(x: np.ndarray, y: np.ndarray) -> float | None:
    """s(e): the standard deviation of the env's pooled runs; ``None`` where they are all equal
    (to rounding), so the env adds nothing under any relabelling."""
    pooled = np.concatenate([x, y])
    spread = float(pooled.std())
    return spread if spread > 1e-12 * max(1.0, float(np.abs(pooled).max())) else None


def _env_terms(x: np.ndarray, y: np.ndarray, spread: float, splits: np.ndarray) -> np.ndarray:
    """The env's term of T for each split (a row of the positions taken as the method's runs)."""
    pooled = np.concatenate([x, y])
    n, m = len(x), len(y)
    sums = pooled[splits].sum(axis=1)
    return (sums / n - (pooled.sum() - sums) / m) / spread


def stratified_permutation_test(
    xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], split_seed: int
) -> tuple[float, str]:
    """Two-sided stratified permutation test of "no difference in any env" (module docstring):
    ``xs[e]`` and ``ys[e]`` are the two methods' values in env e. The p value and ``exact`` or
    ``monte-carlo``; ``(nan, "none")`` where no env has runs of both with any spread."""
    pairs = [(np.asarray(x, float), np.asarray(y, float)) for x, y in zip(xs, ys, strict=True)]
    strata = [(x, y, spread) for x, y in pairs if len(x) and len(y) and (spread := _spread(x, y)) is not None]
    if not strata:
        return float("nan"), "none"
    observed = abs(sum(float((x.mean() - y.mean()) / spread) for x, y, spread in strata))
    tolerance = 1e-12 * max(1.0, observed) * len(strata)
    relabellings = math.prod(math.comb(len(x) + len(y), len(x)) for x, y, _ in strata)
    if relabellings <= EXACT_PERMUTATION_LIMIT:
        statistic = np.zeros(1)
        for x, y, spread in strata:  # every combination of the envs' splits: an outer sum
            statistic = np.add.outer(statistic, _env_terms(x, y, spread, all_splits(len(x), len(y)))).ravel()
        hits = int(np.count_nonzero(np.abs(statistic) >= observed - tolerance))
        return hits / len(statistic), "exact"
    statistic = np.zeros(MONTE_CARLO_PERMUTATIONS)
    for env, (x, y, spread) in enumerate(strata):  # independent per env: a uniform draw of the product
        rng = np.random.default_rng([split_seed, env])
        keys = rng.random((MONTE_CARLO_PERMUTATIONS, len(x) + len(y)))
        statistic += _env_terms(x, y, spread, np.argpartition(keys, len(x) - 1, axis=1)[:, : len(x)])
    hits = int(np.count_nonzero(np.abs(statistic) >= observed - tolerance))
    return (1 + hits) / (1 + MONTE_CARLO_PERMUTATIONS), "monte-carlo"


def _values_by_env(runs: pd.DataFrame, method: str, envs: Sequence[str]) -> list[np.ndarray]:
    mine = runs[runs["method"] == method]
    return [mine[mine["env"] == env].sort_values(["seed", "run"])["return"].to_numpy(float) for env in envs]


def across_env_lines(scored: pd.DataFrame, baseline: str, seed: int) -> list[AcrossLine]:
    """Every method but ``baseline`` against it over the envs of ``scored`` (the aggregate's rows)
    that both ran: the stratified test of final returns and of AUCs, adjusted over the table."""
    from offline_gitd.leaderboard.per_env import run_values

    split_seed = int(np.random.default_rng(seed).integers(2**32))
    values = {value: run_values(scored, value) for value in VALUES}
    finals = values["final"]
    base_envs = set(finals.loc[finals["method"] == baseline, "env"])
    raw: list[tuple[str, int, int, int, dict[str, tuple[float, str]]]] = []
    for method in sorted(set(finals["method"]) - {baseline}):
        envs = sorted(set(finals.loc[finals["method"] == method, "env"]) & base_envs)
        if not envs:
            continue
        tests = {
            value: stratified_permutation_test(
                _values_by_env(table, method, envs), _values_by_env(table, baseline, envs), split_seed
            )
            for value, table in values.items()
        }
        in_envs = finals[finals["env"].isin(envs)]
        raw.append(
            (
                method,
                len(envs),
                int((in_envs["method"] == method).sum()),
                int((in_envs["method"] == baseline).sum()),
                tests,
            )
        )
    p_values: list[float | None] = [
        None if math.isnan(tests[value][0]) else tests[value][0] for *_, tests in raw for value in VALUES
    ]
    adjusted = iter(zip(holm(p_values), benjamini_hochberg(p_values)))
    lines = []
    for method, n_envs, runs, base_runs, tests in raw:
        made = {}
        for value in VALUES:
            p_holm, p_bh = next(adjusted)
            made[value] = SuiteTest(tests[value][0], tests[value][1], p_holm, p_bh)
        lines.append(AcrossLine(method, n_envs, runs, base_runs, made["final"], made["auc"]))
    return lines
