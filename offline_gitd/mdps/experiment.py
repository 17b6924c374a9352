"""One Section 5 experiment: every requested critic on one MDP, its JSON record and its figure.

Shared by ``offline_gitd mdp`` and ``offline_gitd demo``. JSON schema::

    {"mdp": "star", "settings": {...}, "steps": [0, ...],
     "critics": {"td": {"value_error": [...], "sum_bellman_errors": [...]}, ...}}

All critics are logged at the same ``steps``. A diverged run keeps its place in the lists: values
that overflowed float64 (inf / nan) are written as ``null`` (JSON has no infinity), so a reader
sees where the run left the representable range.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from offline_gitd.mdps.expected_updates import History, run
from offline_gitd.mdps.processes import ControlledMDP, TriangleMDP, hall, star, triangle

# About 500 logged points per run: smooth curves, small JSON, no per-step host traffic.
LOG_POINTS = 500
# i-TD's last function equals TD's for the first K steps (expected_updates), so the sequence
# methods are dashed: overlapping curves stay visible.
LINE_STYLES = {"td": "-", "tdrc": "-", "itd": "--", "gitd": "--"}


def build_mdp(name: str, eps: float = -1.0) -> ControlledMDP:
    """The named process; ``eps`` only shapes the triangle."""
    if name == "star":
        return star()
    if name == "hall":
        return hall()
    if name == "triangle":
        return triangle(eps)
    raise ValueError(f"unknown MDP {name!r}")


def label(mdp: ControlledMDP) -> str:
    """File-name-safe tag: ``star``, ``hall``, ``triangle_eps-1``, ``triangle_eps+1``."""
    if isinstance(mdp, TriangleMDP):
        return f"{mdp.name}_eps{int(mdp.eps):+d}"
    return mdp.name


@dataclass(frozen=True)
class Experiment:
    mdp: ControlledMDP
    settings: dict
    histories: dict[str, History]

    @property
    def steps(self) -> np.ndarray:
        return next(iter(self.histories.values())).steps


def run_experiment(mdp: ControlledMDP, critics: list[str], *, steps: int, lr: float, K: int) -> Experiment:
    """Run each critic from the MDP's initial weights with the same settings."""
    log_every = max(1, steps // LOG_POINTS)
    settings = {
        "gamma": mdp.gamma,
        "lr": lr,
        "K": K,
        "steps": steps,
        "log_every": log_every,
        "init_weights": [float(x) for x in mdp.init_weights],
        "n_states": mdp.n_states,
        "state_weights": "uniform",
        "value_error": "||V||_d = sqrt(sum_s d(s) V(s)^2) of the last online function",
        "sum_bellman_errors": "sum_k ||T V_{k-1} - V_k||_d^2 (td, tdrc: ||T V - V||_d^2)",
        "dtype": "float64",
    }
    if isinstance(mdp, TriangleMDP):
        settings["eps"] = mdp.eps
    histories = {critic: run(mdp, critic, steps=steps, lr=lr, K=K, log_every=log_every) for critic in critics}
    return Experiment(mdp=mdp, settings=settings, histories=histories)


def _finite_or_none(values: np.ndarray) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in values]


def to_json(experiment: Experiment) -> dict:
    return {
        "mdp": experiment.mdp.name,
        "settings": experiment.settings,
        "steps": [int(s) for s in experiment.steps],
        "critics": {
            critic: {
                "value_error": _finite_or_none(h.value_error),
                "sum_bellman_errors": _finite_or_none(h.sum_bellman_errors),
            }
            for critic, h in experiment.histories.items()
        },
    }


def write_json(experiment: Experiment, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(experiment), indent=1) + "\n")


def _overflow_step(history: History) -> int | None:
    """First logged step whose metrics are not finite, or None."""
    bad = ~(np.isfinite(history.value_error) & np.isfinite(history.sum_bellman_errors))
    return int(history.steps[np.argmax(bad)]) if bad.any() else None


def plot(experiment: Experiment, path: Path) -> None:
    """Value error and sum of Bellman errors against steps, log y (diverging runs span many
    decades); a run that overflows stops where it did, noted in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    panels = (
        ("value_error", "value error ||V_last||_d"),
        ("sum_bellman_errors", "sum of Bellman errors"),
    )
    for critic, history in experiment.histories.items():
        overflow = _overflow_step(history)
        name = critic if overflow is None else f"{critic} (overflow at step {overflow})"
        for ax, (key, _) in zip(axes, panels):
            values = getattr(history, key).astype(float)
            values[~np.isfinite(values)] = np.nan
            ax.plot(history.steps, values, LINE_STYLES[critic], label=name)
    for ax, (_, ylabel) in zip(axes, panels):
        ax.set_yscale("log")
        ax.set_xlabel("expected update steps")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend()
    s = experiment.settings
    eps = f", eps = {s['eps']:+g}" if "eps" in s else ""
    fig.suptitle(f"{experiment.mdp.name}{eps}: gamma {s['gamma']}, lr {s['lr']}, K {s['K']} (true value 0)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_rows(experiment: Experiment) -> list[str]:
    """One line per critic: final value error and sum of Bellman errors."""
    tag = label(experiment.mdp)
    rows = []
    for critic, history in experiment.histories.items():
        overflow = _overflow_step(history)
        if overflow is None:
            final = f"{history.value_error[-1]:>12.4g} {history.sum_bellman_errors[-1]:>12.4g}"
        else:
            final = f"{'overflow at step ' + str(overflow):>25}"
        rows.append(f"{tag:<16} {critic:<5} {final}")
    return rows


SUMMARY_HEADER = f"{'mdp':<16} {'critic':<5} {'value_error':>12} {'sum_BEs':>12}"
