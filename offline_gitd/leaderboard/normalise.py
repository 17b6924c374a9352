"""From board rows to normalised scores: method keys, final scores and the three normalisations.

Pure functions over a pandas frame with one row per (run, step). A *run* is one seed of one
``run_id`` (a run directory trains all its seeds under one run_id), column ``run``; its *final
score* is its return at its last logged step, which is what the paper's "mean final score" of
the baseline refers to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.reference import MINARI_TO_D4RL, atari_scores, d4rl_scores
from offline_gitd.leaderboard.schema import COLUMNS, NOT_RECORDED, ResultRow

if TYPE_CHECKING:
    import pandas as pd

NORMALISATIONS: tuple[str, ...] = ("baseline", "human", "d4rl")


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


def filter_rows(frame: pd.DataFrame, envs: Sequence[str], methods: Sequence[str], keep: str | None) -> pd.DataFrame:
    """Rows whose env matches one of ``envs`` and whose method one of ``methods`` (shell-style
    patterns; a method pattern matches its full key or its ``algorithm:critic``); empty
    sequences keep everything, and the method ``keep`` (the baseline) is always kept."""
    from fnmatch import fnmatchcase

    def matches(value: str, patterns: Sequence[str]) -> bool:
        return any(fnmatchcase(value, pattern) for pattern in patterns)

    kept = frame
    if envs:
        kept = kept[kept["env"].map(lambda env: matches(env, envs))]
        if kept.empty:
            raise UsageError(f"no rows match --env {' '.join(envs)}; envs: {', '.join(sorted(set(frame['env'])))}")
    if methods:
        short = kept["algorithm"] + ":" + kept["critic"]
        chosen = kept["method"].map(lambda m: matches(m, methods)) | short.map(lambda m: matches(m, methods))
        if not chosen.any():
            raise UsageError(
                f"no rows match --method {' '.join(methods)}; methods: {', '.join(sorted(set(kept['method'])))}"
            )
        kept = kept[chosen | (kept["method"] == keep)]
    return kept


def resolve_baseline(frame: pd.DataFrame, baseline: str) -> str:
    """The method key that ``--baseline`` names: a full key, or ``algorithm:critic`` if unique."""
    methods = sorted(frame["method"].unique())
    if baseline in methods:
        return baseline
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

    Every env on the board needs one: a score in an env the baseline never ran in has nothing to
    be compared against, and a zero mean cannot divide.
    """
    finals = final_scores(frame[frame["method"] == baseline])
    means = finals.groupby("env")["return"].mean()
    missing = sorted(set(frame["env"]) - set(means.index))
    if missing:
        raise UsageError(f"baseline {baseline} has no runs in env(s): {', '.join(missing)}")
    zero = sorted(means.index[means == 0])
    if zero:
        raise UsageError(f"baseline {baseline} has mean final return 0 in: {', '.join(zero)}")
    return means


def relative_to(value: Any, reference: Any) -> Any:
    """``1 + (value - reference) / |reference|``: the paper's ``value / reference`` when the
    reference is positive, and still order-preserving (higher value, higher result; the reference
    itself maps to 1) when it is negative, where the plain ratio would rank a better value lower.
    Works on floats, numpy arrays and pandas series alike."""
    return 1.0 + (value - reference) / abs(reference)


def normalise(frame: pd.DataFrame, how: str, baseline: str) -> pd.DataFrame:
    """A copy of ``frame`` with a ``score`` column: each return normalised ``how``.

    baseline: 1 + (return - b) / |b| with b the baseline's mean final return in that env. For
    b > 0 this is exactly the paper's return / b; for b < 0 (MountainCar, early LunarLander) the
    plain ratio would rank a better return lower, while this keeps the baseline at 1 and higher
    returns higher, on the same relative scale.
    human: (return - random) / (human - random), Atari only (DQN Zoo's table).
    d4rl: 100 * (return - min) / (max - min), D4RL ids and the Minari ids mapped to them.
    """
    scored = frame.copy()
    if how == "baseline":
        reference = scored["env"].map(baseline_denominators(frame, baseline))
        scored["score"] = relative_to(scored["return"], reference)
        return scored
    if how == "human":
        table = {env: scores for env, scores in atari_scores().items() if None not in scores}
        low = scored["env"].map(lambda env: table.get(env, (None, None))[0])
        high = scored["env"].map(lambda env: table.get(env, (None, None))[1])
        lacking = (scored["suite"] != "atari") | low.isna()
        scale = 1.0
    elif how == "d4rl":
        table = d4rl_scores()
        ids = scored["env"].map(lambda env: MINARI_TO_D4RL.get(env, env))
        low = ids.map(lambda env: table.get(env, (None, None))[0])
        high = ids.map(lambda env: table.get(env, (None, None))[1])
        lacking = ~scored["suite"].isin(["minari", "d4rl"]) | low.isna()
        scale = 100.0
    else:
        raise UsageError(f"unknown normalisation {how!r}; choose from {', '.join(NORMALISATIONS)}")
    if lacking.any():
        envs = sorted(set(scored.loc[lacking, "env"]))
        raise UsageError(f"no {how} reference score for env(s): {', '.join(envs)}")
    low, high = low.astype(float), high.astype(float)
    scored["score"] = scale * (scored["return"] - low) / (high - low)
    return scored
