"""``offline_gitd train``'s configuration: a :class:`~offline_gitd.config.base.RunConfig` on a dataset.

The domain's defaults are the paper's offline tables (:data:`offline_gitd.config.paper.OFFLINE_DEFAULTS`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

from offline_gitd.choices import FRAME_PLACEMENTS
from offline_gitd.config.base import RunConfig
from offline_gitd.config.fields import option
from offline_gitd.config.paper import OFFLINE_DEFAULTS
from offline_gitd.errors import ConfigError


@dataclass(frozen=True)
class OfflineConfig(RunConfig):
    """Hyperparameters of ``offline_gitd train``; ``None`` means "the domain's default"."""

    dataset: str = option("", "rlu-atari:GAME/RUN[:CHECKPOINTS] or minari:DATASET_ID")
    algo: str = option("cql", "offline algorithm family (cql; --cql-alpha 0 gives offline DQN/SAC)", choices=("cql",))
    cql_alpha: float | None = option(None, "weight of the CQL penalty (0: no penalty)")
    fraction: float | None = option(None, "fraction of each checkpoint / dataset kept (paper Atari: first 10%)")
    epochs: int | None = option(None, "epochs (an evaluation after each)")
    steps_per_epoch: int | None = option(None, "gradient steps per epoch")
    eval_episodes: int | None = option(None, "evaluation episodes per seed after each epoch")
    eval_epsilon: float | None = option(None, "epsilon-greedy evaluation (Atari protocol: 0.001)")
    updates_per_call: int = option(250, "updates per compiled call (scan) / per host read of metrics")
    frames: str = option(
        "auto",
        "where Atari frames are gathered: device (store copied there once), host (per chunk), "
        "auto (device when the store takes at most half its free memory); results are identical",
        choices=FRAME_PLACEMENTS,
    )
    data_dir: str | None = option(None, "data root (default $OFFLINE_GITD_DATA or the user cache dir)")

    NOT_HASHED: ClassVar[tuple[str, ...]] = (
        *RunConfig.NOT_HASHED,
        "data_dir",
        "updates_per_call",
        "epochs",
        "frames",
    )

    def resolve(self, domain: str) -> OfflineConfig:
        """Fill domain defaults, apply the paper's per-critic rules, validate; returns a new config."""
        values = dataclasses.asdict(self)
        if values["tau"] is not None and self.T is None:
            values["T"] = 1
        return self.filled(values, OFFLINE_DEFAULTS[domain], domain)

    def check_flags(self) -> None:
        super().check_flags()
        for name in ("epochs", "steps_per_epoch", "updates_per_call"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
        if self.eval_episodes is not None and self.eval_episodes < 0:
            raise ConfigError(f"--eval-episodes must be >= 0, got {self.eval_episodes}")
        if self.fraction is not None and not 0.0 < self.fraction <= 1.0:
            raise ConfigError(f"--fraction must be in (0, 1], got {self.fraction}")
        if self.cql_alpha is not None and not (math.isfinite(self.cql_alpha) and self.cql_alpha >= 0):
            raise ConfigError(f"--cql-alpha must be >= 0, got {self.cql_alpha}")
        if self.eval_epsilon is not None and not 0.0 <= self.eval_epsilon <= 1.0:
            raise ConfigError(f"--eval-epsilon must be in [0, 1], got {self.eval_epsilon}")

    def algorithm_name(self, action_kind: str) -> str:
        """What the board calls the algorithm: ``cql``, or without a CQL penalty
        (``--cql-alpha 0``) what it then is, offline DQN or offline SAC."""
        if self.cql_alpha is None or self.cql_alpha > 0:
            return self.algo
        return "offline-dqn" if action_kind == "discrete" else "offline-sac"

    def method_config(self, domain: str) -> str:
        """What sets this run's method apart from ``domain``'s defaults (paths, seeds, drivers and
        the run's length are not the method)."""
        blank = OfflineConfig(dataset=self.dataset, out=self.out or "-", algo=self.algo, critic=self.critic, K=self.K)
        ignored = ("dataset", "out", "data_dir", "seeds", "driver", "updates_per_call", "epochs")
        return self.describe_method(blank, domain, ignored)
