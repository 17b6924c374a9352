"""The aggregate under every normaliser a board has, and the pairs of methods whose order depends on
which one (docs/leaderboard.md#one-normaliser-per-aggregate).

The IQM pools runs x envs and keeps the middle half of the pooled scores. Which runs are in that
half depends on how the envs are scaled against each other: scaled by the data's references,
one game's scores may sit above the others' and be trimmed, while scaled by the baseline's mean
in each game, another game's may. So two normalisers can keep different games for different
methods and order two methods differently, each order correct for its own scale. ``show`` gives
the point estimates under each normaliser and one warning line for each pair of methods that
changes order, so a ranking is never quoted without knowing whether it depends on the scale.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import TYPE_CHECKING

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.normalise import choose_normalisers, coverage, normalise, unstable_normalisers

if TYPE_CHECKING:
    import pandas as pd

    from offline_gitd.leaderboard.board_references import DatasetReference

METRICS: tuple[str, ...] = ("IQM final", "IQM AUC")


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """The board's aggregate under one normaliser: per method, (IQM of normalised final scores,
    IQM AUC relative to the baseline's), point estimates over ``envs``. ``left_out``: env -> why
    it is not in this aggregate (no such reference, or a flagged baseline normaliser)."""

    kind: str
    envs: tuple[str, ...]
    left_out: dict[str, str]
    points: dict[str, tuple[float, float]]


def aggregates(
    frame: pd.DataFrame,
    baseline: str,
    dataset_references: Mapping[tuple[str, str], DatasetReference],
    keep_flagged: bool = False,
) -> list[Aggregate]:
    """The aggregate under ``baseline`` and under each reference kind that at least one env of
    ``frame`` has, each over the envs it can score (the baseline's flagged envs left out unless
    ``keep_flagged``, as in the main table)."""
    from offline_gitd.leaderboard.stats import point_estimates

    out = []
    all_envs = sorted(set(frame["env"]))
    with_baseline = set(frame.loc[frame["method"] == baseline, "env"])
    for kind, envs in coverage(frame, dataset_references).items():
        left_out = {env: f"no {kind} reference" for env in all_envs if env not in envs}
        left_out |= {env: f"{baseline} has no runs there" for env in envs if env not in with_baseline}
        kept = [env for env in envs if env not in left_out]
        if not kept:
            continue
        sub = frame[frame["env"].isin(kept)]
        normalisers = choose_normalisers(sub, kind, dataset_references)
        flagged = unstable_normalisers(sub, normalisers, baseline)
        if flagged and not keep_flagged:
            left_out |= {env: "baseline normaliser within noise (flagged)" for env in flagged}
            kept = [env for env in kept if env not in flagged]
            if not kept:
                continue
            sub = sub[sub["env"].isin(kept)]
            normalisers = {env: item for env, item in normalisers.items() if env in kept}
        try:
            points = point_estimates(normalise(sub, kind, baseline, normalisers=normalisers), baseline)
        except UsageError as error:  # e.g. a baseline whose IQM AUC is 0 under this scale
            left_out |= {env: str(error) for env in kept}
            continue
        out.append(Aggregate(kind, tuple(kept), left_out, points))
    return out


def order_flips(found: Sequence[Aggregate]) -> list[str]:
    """One line per pair of methods that some normaliser puts one way and another the other way,
    in IQM final or IQM AUC (point estimates; a tie orders nothing)."""
    methods = sorted({method for item in found for method in item.points})
    lines = []
    for a, b in combinations(methods, 2):
        parts = []
        for index, metric in enumerate(METRICS):
            ahead: dict[bool, list[str]] = {True: [], False: []}
            for item in found:
                if a in item.points and b in item.points:
                    x, y = item.points[a][index], item.points[b][index]
                    if x != y:  # the method ahead's value first
                        ahead[x > y].append(f"{item.kind} ({max(x, y):.3f} against {min(x, y):.3f})")
            if ahead[True] and ahead[False]:
                parts.append(
                    f"{metric}: {a} ahead under {', '.join(ahead[True])}; {b} ahead under {', '.join(ahead[False])}"
                )
        if parts:
            lines.append(f"{a} and {b} change order with the normaliser ({' / '.join(parts)})")
    return lines
