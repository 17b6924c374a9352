"""A run's metrics over a window of updates, as both pipelines log them (docs/runs.md#what-a-run-directory-holds).

A training step returns its metrics per update (leading axis: updates, then seeds). A window (an
offline epoch, an online logging window) sums them in float64, so that its means do not depend on
how the updates were chunked, and :meth:`MetricWindow.means` gives one seed's means per update.
Per-sample vectors (``td_abs``, the |TD errors| prioritised replay needs) are not metrics: the
online loop logs their batch mean as ``td_abs_mean``; the offline loop, which has no prioritised
replay, leaves them out (its ``metrics.csv`` columns stay those of the runs it may resume).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from offline_gitd.rundir.lifecycle import flatten_metrics

# Per-sample metric -> the column of its batch mean.
PER_SAMPLE = {"td_abs": "td_abs_mean"}


def loggable_metrics(aux: Mapping[str, Any], per_sample_means: bool) -> dict[str, np.ndarray]:
    """Metrics per update: a per-sample vector becomes its batch mean (``per_sample_means``) or is
    left out; everything else is logged as it is."""
    out = {}
    for name, value in aux.items():
        value = np.asarray(value)
        if name in PER_SAMPLE:
            if not per_sample_means:
                continue
            name, value = PER_SAMPLE[name], value.mean(axis=-1)
        out[name] = value
    return out


class MetricWindow:
    """Sums of a step's metrics over a window of updates, every seed at once."""

    def __init__(self, per_sample_means: bool) -> None:
        self.per_sample_means = per_sample_means
        self.sums: dict[str, np.ndarray] = {}
        self.updates = 0

    def add(self, aux: Mapping[str, Any]) -> None:
        """Add the metrics of a chunk of updates (``aux``: name -> [updates, seeds, ...])."""
        for name, value in loggable_metrics(aux, self.per_sample_means).items():
            self.sums[name] = self.sums.get(name, 0.0) + np.asarray(value, np.float64).sum(axis=0)
        self.updates += len(np.asarray(aux["loss"]))

    def means(self, seed_index: int) -> dict[str, float]:
        """Seed ``seed_index``'s mean of each metric per update in the window, flattened to columns
        (nothing when the window has no update)."""
        return flatten_metrics({name: total[seed_index] / self.updates for name, total in self.sums.items()})

    def columns(self, one_update: Mapping[str, Any]) -> list[str]:
        """The columns :meth:`means` gives for a step whose metrics of one update are ``one_update``
        (name -> array of one update's shape: the step's abstract output)."""
        ones = {name: np.zeros((1, *value.shape)) for name, value in one_update.items()}
        return list(
            flatten_metrics({name: value[0] for name, value in loggable_metrics(ones, self.per_sample_means).items()})
        )
