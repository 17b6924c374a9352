"""Per-env answers (docs/leaderboard.md#per-env-table): what each method scored in each env.

The aggregate over envs says which method is better overall; a reader of one game wants that
game's numbers. Per env and method: the mean raw final return over seeds with its 95% bootstrap
interval (seeds resampled), how many seeds and evaluation episodes it rests on (for an online
run, whose final return is the mean over the training episodes of its last logged window, that
window's length), and against the
baseline the probability of improvement P(X > Y) (Agarwal et al. 2021; both methods' seeds
resampled) and a two-sided permutation test of equal mean final returns.

The permutation test is *unpaired*: seed i of one method and seed i of another share neither
their network initialisation (their parameters differ in shape) nor anything else that would make
their outcomes correlated, so pairing by seed index would only discard information. It is exact
(every split of the pooled seeds) while there are at most 20,000 splits, and Monte-Carlo (20,000
random splits, p = (1 + hits) / (1 + draws)) beyond; the table says which. Beside each raw p are
Holm's and Benjamini-Hochberg's adjustments over every test of the table
(:mod:`~offline_gitd.leaderboard.multiple`): a claim made from the table should say which it
survives.

Each env also gets a ``random`` line and a ``reference`` line (the high reference: the dataset's
behaviour, the DQN replay, D4RL's expert or a human), where a reference exists.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from offline_gitd.leaderboard import bootstrap
from offline_gitd.leaderboard.multiple import benjamini_hochberg, holm
from offline_gitd.leaderboard.normalise import EnvNormaliser, final_scores
from offline_gitd.leaderboard.schema import NOT_RECORDED, ONLINE_ALGORITHMS
from offline_gitd.leaderboard.stats import Interval

if TYPE_CHECKING:
    import pandas as pd

_EPISODES = re.compile(r"(?:^|\s)eval_episodes=(\d+)(?:\s|$)")


@dataclasses.dataclass(frozen=True)
class EnvLine:
    """One method in one env. ``episodes``: evaluation episodes per seed behind each final
    return (from the rows' ``method_config``; ``None`` where the board does not record it).
    ``window``: for online rows, the env steps of the logged window whose training episodes
    make each final return (:func:`final_window`; ``None`` for offline rows, or where runs differ)."""

    env: str
    method: str
    seeds: int
    episodes: int | None
    mean: Interval
    improvement: Interval | None
    p_value: float | None
    test: str | None
    flagged: bool = False
    p_holm: float | None = None  # p_value adjusted over every test of the table (adjusted_tests)
    p_bh: float | None = None
    points: str | None = None  # AUC lines: the logged steps per run ("100", or "90-100" where they differ)
    window: int | None = None


@dataclasses.dataclass(frozen=True)
class ReferenceLine:
    """A reference return of one env: ``random`` or ``reference`` (the high one)."""

    env: str
    kind: str
    value: float
    source: str


def episodes_of(method_configs: pd.Series, suite: str, algorithm: str) -> int | None:
    """The evaluation episodes per seed a method's rows record: ``eval_episodes=N`` in their
    ``method_config`` if they agree on one; where every row says it ran its domain's defaults for
    it (``defaults``, or other fields only), an offline algorithm's default for the suite's domain
    (:func:`offline_eval_episodes`). Rows that do not record their method (legacy files) and online
    rows (returns of training episodes, not a fixed evaluation) give ``None``."""
    texts = [str(text) for text in method_configs.unique()]
    found = {int(match.group(1)) for text in texts if (match := _EPISODES.search(text))}
    if found:
        return found.pop() if len(found) == 1 and all(_EPISODES.search(text) for text in texts) else None
    if any(text == NOT_RECORDED for text in texts):
        return None
    return offline_eval_episodes(suite, algorithm)


def final_window(steps: pd.DataFrame) -> int | None:
    """The length in env steps of the window behind every run's final return: a run's last logged
    step less the one before it (its first window starts at step 0), where all runs agree, else
    ``None``. ``steps`` has a ``run`` and a ``step`` column, a row per logged step.

    An online run's row is the mean return of the training episodes that ended in its logging window
    (docs/online.md), so its final return rests on the episodes of its last window; the board keeps
    the window's mean, not how many episodes made it, and this length is what it can say of them."""
    lengths = set()
    for _, run in steps.groupby("run"):
        logged = sorted(set(run["step"].astype(int)))
        lengths.add(logged[-1] - (logged[-2] if len(logged) > 1 else 0))
    return lengths.pop() if len(lengths) == 1 else None


def basis_text(line: EnvLine) -> str:
    """What each of a line's figures rests on, after ``seeds x``: the logged steps per run (AUC
    lines), the evaluation episodes per seed, for online rows the training episodes of the final
    window (:func:`final_window`), or ``?`` where the board does not say."""
    if line.points:
        return line.points
    if line.episodes is not None:
        return str(line.episodes)
    if line.window is not None:
        return f"training episodes of the last {line.window:,} steps"
    return "?"


def offline_eval_episodes(suite: str, algorithm: str) -> int | None:
    """An offline algorithm's default evaluation episodes per seed in the domain named like
    ``suite`` (config/paper.py's offline row, with the algorithm's own defaults for it); ``None`` for
    an online algorithm. A suite that names no domain (``minari``: a dataset of any domain, as the
    demo's are) gives the default every domain agrees on, which is then the run's whatever its
    domain was, and ``None`` where they disagree."""
    from offline_gitd.algorithm_registry import algorithm_specs
    from offline_gitd.config.paper import OFFLINE_DEFAULTS

    specs = algorithm_specs()
    if algorithm not in specs and not algorithm.startswith("offline-"):
        return None
    own = specs[algorithm].defaults if algorithm in specs else {}
    domains = [suite] if suite in OFFLINE_DEFAULTS else list(OFFLINE_DEFAULTS)
    found = {{**OFFLINE_DEFAULTS[domain], **own.get(domain, {})}.get("eval_episodes") for domain in domains}
    value = found.pop() if len(found) == 1 else None
    return None if value is None else int(value)


def reference_lines(normalisers: Mapping[str, EnvNormaliser]) -> list[ReferenceLine]:
    """The random and high reference of each env that has them."""
    lines = []
    for env, item in sorted(normalisers.items()):
        if item.reference is not None:
            ref = item.reference
            lines.append(ReferenceLine(env, "random", ref.low, ref.source))
            lines.append(ReferenceLine(env, f"reference ({ref.kind})", ref.high, ref.source))
        elif item.random is not None:
            lines.append(ReferenceLine(env, "random", item.random, "best available reference"))
    return lines


VALUES = ("final", "auc")


def run_values(scored: pd.DataFrame, value: str = "final") -> pd.DataFrame:
    """One row per run, its ``return`` the run's value: its final return (``final``), or its AUC
    as a mean return over its logged steps (``auc``: the area under its learning curve divided by
    the number of steps logged, so it stays on the return's scale and an env's runs compare when
    they logged the same steps; the table says how many each logged)."""
    finals = final_scores(scored)
    if value == "final":
        return finals
    if value != "auc":
        raise ValueError(f"unknown per-env value {value!r}; choose from {', '.join(VALUES)}")
    grouped = scored.groupby("run")["return"]
    return finals.assign(**{"return": finals["run"].map(grouped.mean()), "points": finals["run"].map(grouped.size())})


def per_env_lines(
    scored: pd.DataFrame,
    baseline: str,
    reps: int,
    seed: int,
    flagged: Mapping[str, str] | None = None,
    value: str = "final",
) -> list[EnvLine]:
    """Every (env, method) of ``scored``: raw final returns (or AUCs, ``value="auc"``:
    :func:`run_values`) and the comparison with the baseline.

    The interval of a mean is the bootstrap's without a draw (:func:`~offline_gitd.leaderboard.
    bootstrap.mean_intervals`: every resample enumerated up to 11 seeds, a convolution beyond), so
    it does not depend on ``reps`` or ``seed`` (docs/leaderboard.md#monte-carlo-error).
    """
    rng = np.random.default_rng(seed)
    split_seed = int(rng.integers(2**32))
    finals = run_values(scored, value)
    lines = []
    samples: list[np.ndarray] = []
    for env in sorted(finals["env"].unique()):
        in_env = finals[finals["env"] == env]
        base = in_env[in_env["method"] == baseline].sort_values(["seed", "run"])["return"].to_numpy(float)
        base_counts = None
        if len(base):
            base_draw = rng.integers(0, len(base), size=(reps, len(base), 1))
            base_counts = bootstrap.counts(base_draw, len(base))
        for method in sorted(in_env["method"].unique()):
            runs = in_env[in_env["method"] == method].sort_values(["seed", "run"])
            online = value == "final" and runs["algorithm"].iloc[0] in ONLINE_ALGORITHMS
            logged = scored[(scored["env"] == env) & (scored["method"] == method)] if online else None
            x = runs["return"].to_numpy(float)
            is_base = method == baseline
            draw = base_draw if is_base and base_counts is not None else rng.integers(0, len(x), size=(reps, len(x), 1))
            x_counts = base_counts if is_base and base_counts is not None else bootstrap.counts(draw, len(x))
            samples.append(x)
            improvement = p_value = test = None
            if base_counts is not None:
                point = float(bootstrap.improvement_samples(x[:, None], base[:, None], None, None)[0])
                samples_pi = bootstrap.improvement_samples(x[:, None], base[:, None], x_counts, base_counts)[:, 0]
                improvement = Interval(point, *(float(v) for v in bootstrap.percentile_interval(samples_pi)))
                if not is_base:
                    p_value, test = bootstrap.permutation_test(x, base, split_seed)
            lines.append(
                EnvLine(
                    env=env,
                    method=method,
                    seeds=len(x),
                    episodes=episodes_of(runs["method_config"], runs["suite"].iloc[0], runs["algorithm"].iloc[0]),
                    points=_points(runs) if value == "auc" else None,
                    window=None if logged is None else final_window(logged),
                    mean=Interval(float(x.mean()), math.nan, math.nan),
                    improvement=improvement,
                    p_value=p_value,
                    test=test,
                    flagged=env in (flagged or {}),
                )
            )
    intervals = bootstrap.mean_intervals(samples)
    return adjusted_tests(
        [dataclasses.replace(line, mean=Interval(line.mean.value, *intervals[i])) for i, line in enumerate(lines)]
    )


def _points(runs: pd.DataFrame) -> str:
    """How many steps the runs logged: one number, or the range where they differ."""
    low, high = int(runs["points"].min()), int(runs["points"].max())
    return str(low) if low == high else f"{low}-{high}"


def adjusted_tests(lines: Sequence[EnvLine]) -> list[EnvLine]:
    """``lines`` with Holm's and Benjamini-Hochberg's adjusted p values beside the raw ones. The
    family is every test of the table: each method against the baseline in each env shown
    (docs/leaderboard.md#per-env-table)."""
    raw = [line.p_value for line in lines]
    return [
        dataclasses.replace(line, p_holm=h, p_bh=b) for line, h, b in zip(lines, holm(raw), benjamini_hochberg(raw))
    ]


def family_size(lines: Sequence[EnvLine]) -> int:
    """How many tests the adjustments are over."""
    return sum(line.p_value is not None for line in lines)
