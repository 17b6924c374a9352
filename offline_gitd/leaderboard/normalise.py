"""From board rows to normalised scores: method keys, final scores and the normalisations.

Pure functions over a pandas frame with one row per (run, step). A *run* is one seed of one
``run_id`` (a run directory trains all its seeds under one run_id), column ``run``; its *final
score* is its return at its last logged step, which is what the paper's "mean final score" of
the baseline refers to.

Every normalisation is affine in the return with a positive slope, per env: score = offset +
slope x return (docs/leaderboard.md#normalisation). A reference normalisation has constant
coefficients; the baseline normalisation's depend on the baseline's mean final return, an
estimate, which the bootstrap resamples (:mod:`offline_gitd.leaderboard.stats`). The frame keeps
per row the env's point coefficients (``offset``, ``slope``) and what set them (``normaliser``:
the reference kind, or ``baseline:<method>``), so every consumer can rebuild the normaliser.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.reference import MINARI_TO_D4RL, atari_scores, d4rl_scores
from offline_gitd.leaderboard.schema import COLUMNS, NOT_RECORDED, ResultRow

if TYPE_CHECKING:
    import pandas as pd

    from offline_gitd.leaderboard.board_references import DatasetReference

# ``auto`` takes the first kind of REFERENCE_ORDER that every env has, else the baseline for all: one
# normaliser per aggregate, since a pooled IQM over envs scored on different scales ranks methods
# by which envs it keeps (docs/leaderboard.md#one-normaliser-per-aggregate). A DQN-replay
# dataset's last checkpoint mean (every episode of its last 10% of the replay) comes before its
# Minari ``ref_max_score`` (the agent's last 10 episodes): the same agent, less noise.
NORMALISATIONS: tuple[str, ...] = ("auto", "baseline", "minari", "dqn-replay", "d4rl", "human")
REFERENCE_ORDER: tuple[str, ...] = ("dqn-replay", "minari", "d4rl", "human")
DEFAULT_NORMALISATION = "auto"
# D4RL (and Minari, which copies its convention) report 100 x the fraction from min to max.
PERCENT_KINDS = frozenset({"minari", "d4rl"})
DESCRIPTION = {
    "minari": "dataset's ref_min_score -> ref_max_score",
    "dqn-replay": "random -> the DQN replay's last checkpoint",
    "d4rl": "D4RL table: ref_min_score -> ref_max_score",
    "human": "Atari random -> human",
    "baseline": "relative to the baseline's mean final return",
}


def to_frame(rows: Sequence[ResultRow]) -> pd.DataFrame:
    """Rows as a frame (columns as in the schema, ``return`` spelt as on disk), plus ``method``
    and ``run`` (run_id and seed: one learning curve)."""
    import pandas as pd

    frame = pd.DataFrame(
        [[getattr(row, "return_" if name == "return" else name) for name in COLUMNS] for row in rows],
        columns=list(COLUMNS),
    )
    frame["method"] = method_keys(frame)
    frame["run"] = frame["run_id"] + "/seed=" + frame["seed"].astype(str)
    return frame


def method_keys(frame: pd.DataFrame) -> pd.Series:
    """``algorithm:critic``, extended where that pair covers several methods: ``:K=..,beta=..``
    when K or beta vary, `` [method_config]`` when the other method-defining fields vary.

    A method is (algorithm, critic, K, beta, method_config), never fewer fields, so two
    experiments are never pooled into one line (docs/architecture.md#runs-are-self-contained). The short key keeps the common board
    (one setting per critic) readable; the long key appears only where it tells methods apart.
    Rows from boards written before ``method_config`` existed show ``[config not recorded]``
    when they share a pair with recorded ones.
    """
    short = frame["algorithm"] + ":" + frame["critic"]
    settings = frame.groupby(short)[["K", "beta", "method_config"]].nunique()
    varies = set(settings.index[(settings["K"] > 1) | (settings["beta"] > 1)])
    configs = set(settings.index[settings["method_config"] > 1])
    k_beta = ":K=" + frame["K"].astype(str) + ",beta=" + frame["beta"].map("{:g}".format)
    label = frame["method_config"].where(frame["method_config"] != NOT_RECORDED, "config not recorded")
    key = short.where(~short.isin(varies), short + k_beta)
    return key.where(~short.isin(configs), key + " [" + label + "]")


def full_keys(frame: pd.DataFrame) -> pd.Series:
    """Each row's key (``frame["method"]``, from :func:`method_keys`) with its `` [method_config]``
    whether or not the board needs it (the key has it only where one pair covers several configs).

    ``--baseline`` and ``--method`` accept this form too, so a command written for a grid whose
    critics will run at two settings (``dqn:td [loop=compiled utd=0.25]``) already runs on the
    board's first cells, where the key is still ``dqn:td`` (docs/leaderboard.md#online-boards)."""
    keys = frame["method"]
    label = frame["method_config"].where(frame["method_config"] != NOT_RECORDED, "config not recorded")
    return keys.where(keys.str.endswith("]"), keys + " [" + label + "]")


def filter_rows(frame: pd.DataFrame, envs: Sequence[str], methods: Sequence[str], keep: str | None) -> pd.DataFrame:
    """Rows whose env matches one of ``envs`` and whose method one of ``methods`` (shell-style
    patterns; a method pattern matches its key, that key with its config in brackets
    (:func:`full_keys`) or its ``algorithm:critic``); empty sequences keep everything, and the
    method ``keep`` (the baseline) is always kept. A pattern
    equal to a value matches it too: a full key's `` [method_config]`` would otherwise read as a
    character class (``dqn:td [loop=compiled]``)."""
    from fnmatch import fnmatchcase

    def matches(value: str, patterns: Sequence[str]) -> bool:
        return any(value == pattern or fnmatchcase(value, pattern) for pattern in patterns)

    kept = frame
    if envs:
        kept = kept[kept["env"].map(lambda env: matches(env, envs))]
        if kept.empty:
            raise UsageError(f"no rows match --env {' '.join(envs)}; envs: {', '.join(sorted(set(frame['env'])))}")
    if methods:
        short = kept["algorithm"] + ":" + kept["critic"]
        chosen = kept["method"].map(lambda m: matches(m, methods)) | short.map(lambda m: matches(m, methods))
        chosen |= full_keys(kept).map(lambda m: matches(m, methods))
        if not chosen.any():
            raise UsageError(
                f"no rows match --method {' '.join(methods)}; methods: {', '.join(sorted(set(kept['method'])))}"
            )
        kept = kept[chosen | (kept["method"] == keep)]
    return kept


def resolve_baseline(frame: pd.DataFrame, baseline: str) -> str:
    """The method key that ``--baseline`` names: a full key, the key with its config in brackets
    where the board does not need them (:func:`full_keys`), or ``algorithm:critic`` if unique."""
    methods = sorted(frame["method"].unique())
    if baseline in methods:
        return baseline
    named = sorted(set(frame.loc[full_keys(frame) == baseline, "method"]))
    if len(named) == 1:
        return named[0]
    matches = [method for method in methods if method.startswith((baseline + ":", baseline + " ["))]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UsageError(f"baseline {baseline!r} is ambiguous: use one of {', '.join(matches)}")
    raise UsageError(f"baseline {baseline!r} is not on the board; methods: {', '.join(methods)}")


def final_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the row at the run's last logged step."""
    last = frame.loc[frame.groupby("run")["step"].idxmax()]
    return last.reset_index(drop=True)


def baseline_denominators(frame: pd.DataFrame, baseline: str) -> pd.Series:
    """Per env, the baseline's mean final raw return (the paper's normaliser).

    Every env normalised by the baseline needs one: a score in an env the baseline never ran in
    has nothing to be compared against. A mean of zero, or one within noise of zero or of random,
    is flagged by :func:`unstable_normalisers`.
    """
    finals = final_scores(frame[frame["method"] == baseline])
    means = finals.groupby("env")["return"].mean()
    missing = sorted(set(frame["env"]) - set(means.index))
    if missing:
        raise UsageError(f"baseline {baseline} has no runs in env(s): {', '.join(missing)}")
    return means


def relative_to(value: Any, reference: Any) -> Any:
    """``1 + (value - reference) / |reference|``: the paper's ``value / reference`` when the
    reference is positive, and still order-preserving (higher value, higher result; the reference
    itself maps to 1) when it is negative, where the plain ratio would rank a better value lower.
    Works on floats, numpy arrays and pandas series alike."""
    return 1.0 + (value - reference) / abs(reference)


@dataclasses.dataclass(frozen=True)
class EnvReference:
    """A low and a high reference return of one env: score = scale (x - low) / (high - low).

    ``low`` is a random policy's return in every kind; ``high`` the dataset's behaviour
    (``minari``), the DQN replay's last checkpoint (``dqn-replay``), D4RL's expert (``d4rl``) or
    a human (``human``). ``source`` says where the numbers come from.
    """

    kind: str
    low: float
    high: float
    source: str


def available_references(
    suite: str, env: str, dataset_references: Mapping[tuple[str, str], DatasetReference]
) -> list[EnvReference]:
    """Every reference (suite, env) has, best first (:data:`REFERENCE_ORDER`); a pair whose high
    is not above its low is left out (it cannot scale)."""
    found = []
    recorded = dataset_references.get((suite, env))
    if recorded is not None and recorded.ref_min_score is not None:
        # The full provenance stays in the side file; a line names the dataset.
        where = f"dataset {recorded.dataset} (the board's references file)"
        if recorded.ref_max_score is not None:
            found.append(EnvReference("minari", recorded.ref_min_score, recorded.ref_max_score, where))
        if recorded.dqn_replay_score is not None:
            found.append(EnvReference("dqn-replay", recorded.ref_min_score, recorded.dqn_replay_score, where))
    if suite in ("minari", "d4rl"):
        d4rl_id = MINARI_TO_D4RL.get(env, env)
        scores = d4rl_scores().get(d4rl_id)
        if scores is not None:
            found.append(EnvReference("d4rl", scores[0], scores[1], f"D4RL infos.py ({d4rl_id})"))
    if suite == "atari":
        random, human = atari_scores().get(env, (None, None))
        if random is not None and human is not None:
            found.append(EnvReference("human", random, human, "DQN Zoo atari_data.py"))
    return sorted((item for item in found if item.high > item.low), key=lambda item: REFERENCE_ORDER.index(item.kind))


@dataclasses.dataclass(frozen=True)
class EnvNormaliser:
    """How one env's returns become scores: a reference (fixed) or the baseline (estimated)."""

    env: str
    kind: str  # a reference kind or "baseline"
    reference: EnvReference | None  # None for the baseline
    random: float | None  # a random policy's return where any reference knows it
    scale: float  # 100 for D4RL-style percentages, else 1

    def coefficients(self, baseline_mean: float | None = None) -> tuple[float, float]:
        """(offset, slope) with score = offset + slope x return; the baseline kind needs the
        baseline's mean final return b: 1 + (x - b) / |b| = (1 - sign b) + x / |b|."""
        if self.reference is not None:
            span = self.reference.high - self.reference.low
            return -self.scale * self.reference.low / span, self.scale / span
        if baseline_mean is None or baseline_mean == 0:
            return math.nan, math.nan
        return 1.0 - math.copysign(1.0, baseline_mean), 1.0 / abs(baseline_mean)

    def describe(self) -> str:
        """One line: which normalisation this env uses and the numbers behind it."""
        if self.reference is None:
            return f"{self.env}: baseline ({DESCRIPTION['baseline']})"
        ref = self.reference
        scale = f"{self.scale:g} x " if self.scale != 1 else ""
        return f"{self.env}: {ref.kind}, {scale}(x - {ref.low:g}) / ({ref.high:g} - {ref.low:g}); from {ref.source}"


def _env_options(
    frame: pd.DataFrame, dataset_references: Mapping[tuple[str, str], DatasetReference]
) -> dict[str, list[EnvReference]]:
    """Env -> every reference it has over its suites, best first."""
    pairs = frame[["suite", "env"]].drop_duplicates()
    suites: dict[str, set[str]] = {}
    for suite, env in pairs.itertuples(index=False):
        suites.setdefault(env, set()).add(suite)
    return {
        env: [ref for suite in sorted(suites[env]) for ref in available_references(suite, env, dataset_references)]
        for env in sorted(suites)
    }


def coverage(
    frame: pd.DataFrame, dataset_references: Mapping[tuple[str, str], DatasetReference]
) -> dict[str, list[str]]:
    """Normaliser kind -> the envs of ``frame`` it can score, for ``baseline`` (every env) and each
    reference kind that at least one env has, in :data:`REFERENCE_ORDER`."""
    options = _env_options(frame, dataset_references)
    out = {"baseline": sorted(options)}
    for kind in REFERENCE_ORDER:
        envs = [env for env, refs in options.items() if any(ref.kind == kind for ref in refs)]
        if envs:
            out[kind] = envs
    return out


def auto_kind(frame: pd.DataFrame, dataset_references: Mapping[tuple[str, str], DatasetReference]) -> str:
    """What ``auto`` normalises every env by: the first reference kind that every env has, else
    the baseline (which every env has)."""
    covered = coverage(frame, dataset_references)
    envs = covered["baseline"]
    return next((kind for kind in REFERENCE_ORDER if covered.get(kind) == envs), "baseline")


def choose_normalisers(
    frame: pd.DataFrame, how: str, dataset_references: Mapping[tuple[str, str], DatasetReference]
) -> dict[str, EnvNormaliser]:
    """Per env of ``frame``, the normalisation ``how`` asks for: one kind for every env.

    ``auto`` is :func:`auto_kind`. The scale is D4RL's 100 for a D4RL-style reference (``minari``,
    ``d4rl``) and 1 otherwise (random = 0, reference = 1, baseline = 1). A named reference kind
    must exist for every env of ``frame`` (callers leave out those that lack it:
    :func:`coverage`).
    """
    if how not in NORMALISATIONS:
        raise UsageError(f"unknown normalisation {how!r}; choose from {', '.join(NORMALISATIONS)}")
    options = _env_options(frame, dataset_references)
    kind = auto_kind(frame, dataset_references) if how == "auto" else how
    chosen: dict[str, tuple[str, EnvReference | None, float | None]] = {}
    lacking = []
    for env, refs in options.items():
        random = refs[0].low if refs else None
        if kind == "baseline":
            chosen[env] = ("baseline", None, random)
            continue
        pick = next((ref for ref in refs if ref.kind == kind), None)
        if pick is None:
            lacking.append(env)
        else:
            chosen[env] = (kind, pick, random)
    if lacking:
        raise UsageError(f"no {how} reference score for env(s): {', '.join(lacking)}")
    scale = 100.0 if kind in PERCENT_KINDS else 1.0
    return {env: EnvNormaliser(env, kind, ref, random, scale) for env, (kind, ref, random) in chosen.items()}


def normalise(
    frame: pd.DataFrame,
    how: str,
    baseline: str,
    dataset_references: Mapping[tuple[str, str], DatasetReference] | None = None,
    normalisers: Mapping[str, EnvNormaliser] | None = None,
) -> pd.DataFrame:
    """A copy of ``frame`` with a ``score`` column: each return normalised ``how`` (point estimate).

    baseline: 1 + (return - b) / |b| with b the baseline's mean final return in that env. For
    b > 0 this is exactly the paper's return / b; for b < 0 (MountainCar, early LunarLander) the
    plain ratio would rank a better return lower, while this keeps the baseline at 1 and higher
    returns higher, on the same relative scale.
    minari: 100 (return - ref_min_score) / (ref_max_score - ref_min_score), the dataset's own
    references (D4RL's formula). dqn-replay: (return - random) / (DQN replay - random).
    human: (return - random) / (human - random), Atari only (DQN Zoo's table).
    d4rl: 100 * (return - min) / (max - min), D4RL ids and the Minari ids mapped to them.
    auto: one kind for every env, the first of REFERENCE_ORDER that every env has, else baseline
    (:func:`auto_kind`).
    Also adds ``offset``, ``slope`` and ``normaliser`` (see the module docstring).
    """
    import numpy as np

    chosen = dict(normalisers) if normalisers is not None else choose_normalisers(frame, how, dataset_references or {})
    scored = frame.copy()
    means = None
    if any(item.kind == "baseline" for item in chosen.values()):
        needed = [env for env, item in chosen.items() if item.kind == "baseline"]
        means = baseline_denominators(frame[frame["env"].isin(needed)], baseline)
    coefficients = {
        env: item.coefficients(None if means is None or env not in means.index else float(means[env]))
        for env, item in chosen.items()
    }
    scored["offset"] = scored["env"].map({env: c[0] for env, c in coefficients.items()}).astype(float)
    scored["slope"] = scored["env"].map({env: c[1] for env, c in coefficients.items()}).astype(float)
    labels = {env: f"baseline:{baseline}" if item.kind == "baseline" else item.kind for env, item in chosen.items()}
    scored["normaliser"] = scored["env"].map(labels)
    zero = sorted(env for env, (offset, _) in coefficients.items() if np.isnan(offset))
    if zero:
        raise UsageError(f"baseline {baseline} has mean final return 0 in: {', '.join(zero)}")
    scored["score"] = scored["offset"] + scored["slope"] * scored["return"]
    return scored


# Student's t 97.5% quantiles for 1..30 degrees of freedom (any statistics table).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_quantile_975(dof: int) -> float:
    """Student's t 97.5% quantile; past 30 degrees of freedom the first-order expansion
    z + (z^3 + z) / (4 dof) about the normal's 1.96, within 0.001 of the exact value."""
    if dof < 1:
        return math.inf
    if dof <= len(_T975):
        return _T975[dof - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * dof)


def unstable_normalisers(
    frame: pd.DataFrame, normalisers: Mapping[str, EnvNormaliser], baseline: str
) -> dict[str, str]:
    """Env -> a one-line reason, for every env normalised by the baseline whose normaliser is
    within noise of zero, or not above a random policy's return beyond noise.

    The normaliser is the mean b of the baseline's n final returns; its 95% interval is
    b +- t(n - 1) s / sqrt(n). Zero in it means the ratio can change sign or blow up between
    resamples; a random policy's return in it or above it means "1" is not distinguishable from
    random (a random policy would score 1 or more), so scores there measure noise (docs/leaderboard.md#flagged-envs). With one seed there is no
    noise estimate and only an exact zero is flagged.
    """
    import numpy as np

    flagged = {}
    needed = [env for env, item in normalisers.items() if item.kind == "baseline"]
    if not needed:
        return flagged
    finals = final_scores(frame[(frame["method"] == baseline) & frame["env"].isin(needed)])
    for env, returns in finals.groupby("env")["return"]:
        values = returns.to_numpy(dtype=float)
        b = float(values.mean())
        half = (
            t_quantile_975(len(values) - 1) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
            if len(values) > 1
            else 0.0
        )
        low, high = b - half, b + half
        random = normalisers[env].random
        where = f"{baseline}'s mean final return {b:.4g} [{low:.4g}, {high:.4g}] (95%, {len(values)} seeds)"
        if b == 0 or (len(values) > 1 and low <= 0 <= high):
            flagged[env] = f"{env}: {where} is within noise of zero"
        elif random is not None and low <= random:
            flagged[env] = f"{env}: {where} is not above a random policy's {random:.4g} beyond noise"
    return flagged
