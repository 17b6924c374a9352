"""The offline learner's configuration and the paper's defaults per domain (REFERENCE tables).

A run is a function of its resolved config alone (DESIGN §5): ``resolve`` fills every ``None``
from the domain's defaults, validates, and the result is what ``config.json`` holds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from offline_gitd.config_cli import check_common_ranges, describe_overrides, option, parse_seeds, parse_widths
from offline_gitd.critics import CRITIC_KINDS, CriticConfig
from offline_gitd.errors import ConfigError
from offline_gitd.learners.drivers import DRIVERS
from offline_gitd.learners.feed import FRAME_PLACEMENTS
from offline_gitd.networks import HEAD_LAYOUTS, TORSOS

# REFERENCE "Hyperparameters". Atari offline: the CQL table; gym: the offline Gym ablation
# (LunarLander, MountainCar); continuous: the MuJoCo SAC table with CQL(H)'s alpha = 5 for
# continuous control (Kumar et al. 2020's Gym-MuJoCo setting).
DOMAIN_DEFAULTS: dict[str, dict[str, Any]] = {
    "atari": dict(
        T=2000,
        cql_alpha=0.1,
        lr=5e-5,
        adam_eps=3.125e-4,
        batch_size=32,
        torso="nature",
        mlp_hidden="256,256",
        heads="shared_linear",
        fraction=0.1,
        steps_per_epoch=62_500,
        epochs=50,
        eval_episodes=10,
        eval_epsilon=0.001,
        clip_rewards=True,
        horizon=27_000,
    ),
    "gym": dict(
        T=1000,
        cql_alpha=0.1,
        lr=5e-4,
        adam_eps=1e-8,
        batch_size=32,
        torso="mlp",
        mlp_hidden="50,50",
        heads="shared_linear",
        fraction=1.0,
        steps_per_epoch=10_000,
        epochs=10,
        eval_episodes=10,
        eval_epsilon=0.0,
        clip_rewards=False,
        horizon=None,
    ),
    "continuous": dict(
        T=1,
        tau=5e-3,
        cql_alpha=5.0,
        lr=1e-3,
        adam_eps=1e-8,
        batch_size=256,
        torso="mlp",
        mlp_hidden="256,256",
        heads="independent",
        fraction=1.0,
        steps_per_epoch=10_000,
        epochs=100,
        eval_episodes=10,
        eval_epsilon=0.0,
        clip_rewards=False,
        horizon=None,
    ),
}


@dataclass(frozen=True)
class OfflineConfig:
    """Hyperparameters of ``offline_gitd train``; ``None`` means "the domain's default"."""

    dataset: str = option("", "rlu-atari:GAME/RUN[:CHECKPOINTS] or minari:DATASET_ID")
    out: str = option("", "run directory (config.json, metrics.csv, results.csv, checkpoints/)")
    algo: str = option("cql", "offline algorithm family (cql; --cql-alpha 0 gives offline DQN/SAC)", choices=("cql",))
    critic: str = option("gitd", "critic kind", choices=CRITIC_KINDS)
    K: int | None = option(None, "online Q-heads (1 for td/tdrc, paper: 5 for itd/gitd)", flag="--K")
    beta: float = option(1.0, "weight decay on the H-heads (tdrc, gitd)")
    T: int | None = option(None, "target update / head roll period in gradient steps", flag="--T")
    D: int = option(1, "i-TD stale-copy sync period", flag="--D")
    tau: float | None = option(None, "soft target update rate (continuous default 0.005; unset: hard updates)")
    heads: str | None = option(None, "head layout", choices=HEAD_LAYOUTS)
    cql_alpha: float | None = option(None, "weight of the CQL penalty (0: no penalty)")
    lr: float | None = option(None, "Adam learning rate")
    adam_eps: float | None = option(None, "Adam epsilon")
    batch_size: int | None = option(None, "transitions per gradient step")
    gamma: float = option(0.99, "discount factor")
    n_step: int = option(1, "n-step returns")
    torso: str | None = option(None, "torso network", choices=TORSOS)
    mlp_hidden: str | None = option(None, "MLP torso widths, comma separated")
    head_hidden: int = option(512, "hidden width of shared_nonlinear heads")
    fraction: float | None = option(None, "fraction of each checkpoint / dataset kept (paper Atari: first 10%)")
    epochs: int | None = option(None, "epochs (an evaluation after each)")
    steps_per_epoch: int | None = option(None, "gradient steps per epoch")
    eval_episodes: int | None = option(None, "evaluation episodes per seed after each epoch")
    eval_epsilon: float | None = option(None, "epsilon-greedy evaluation (Atari protocol: 0.001)")
    clip_rewards: bool | None = option(None, "clip rewards to [-1, 1] for learning (Atari default)")
    horizon: int | None = option(None, "evaluation episode step cap (env default if unset)")
    seeds: str = option("0", "seeds, e.g. 0-4: all seeds train in one compiled program")
    driver: str = option("auto", "update driver: scan (lax.scan), loop (jitted step), auto", choices=DRIVERS)
    updates_per_call: int = option(250, "updates per compiled call (scan) / per host read of metrics")
    frames: str = option(
        "auto",
        "where Atari frames are gathered: device (store copied there once), host (per chunk), "
        "auto (device when the store takes at most half its free memory); results are identical",
        choices=FRAME_PLACEMENTS,
    )
    data_dir: str | None = option(None, "data root (default $OFFLINE_GITD_DATA or the user cache dir)")

    @property
    def seed_list(self) -> list[int]:
        return parse_seeds(self.seeds)

    def critic_config(self) -> CriticConfig:
        return CriticConfig(
            kind=self.critic, K=self.K, beta=self.beta, T=self.T, D=self.D, tau=self.tau, heads=self.heads
        )

    def resolve(self, domain: str) -> "OfflineConfig":
        """Fill domain defaults, apply the paper's per-critic rules, validate; returns a new config."""
        defaults = DOMAIN_DEFAULTS[domain]
        values = dataclasses.asdict(self)
        for name, default in defaults.items():
            if values.get(name) is None:
                values[name] = default
        if domain == "continuous" and self.heads is None and self.critic == "tdrc":
            values["heads"] = "shared_linear"  # paper: independent networks for all but TDRC
        if values["tau"] is not None and self.T is None:
            values["T"] = 1
        resolved = OfflineConfig(**values)
        resolved.validate()
        critic = resolved.critic_config()
        return dataclasses.replace(resolved, K=critic.K)

    def validate(self) -> None:
        if not self.out:
            raise ConfigError("--out RUN_DIR is required")
        positive_ints = ("epochs", "steps_per_epoch", "updates_per_call")
        for name in positive_ints:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
        check_common_ranges(self)
        if self.eval_episodes is not None and self.eval_episodes < 0:
            raise ConfigError(f"--eval-episodes must be >= 0, got {self.eval_episodes}")
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"--gamma must be in (0, 1], got {self.gamma}")
        if self.fraction is not None and not 0.0 < self.fraction <= 1.0:
            raise ConfigError(f"--fraction must be in (0, 1], got {self.fraction}")
        for name in ("lr", "adam_eps"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {value}")
        if self.cql_alpha is not None and not (math.isfinite(self.cql_alpha) and self.cql_alpha >= 0):
            raise ConfigError(f"--cql-alpha must be >= 0, got {self.cql_alpha}")
        if self.eval_epsilon is not None and not 0.0 <= self.eval_epsilon <= 1.0:
            raise ConfigError(f"--eval-epsilon must be in [0, 1], got {self.eval_epsilon}")
        if self.mlp_hidden is not None:
            self.hidden_sizes  # noqa: B018 - parses and validates
        self.seed_list  # noqa: B018
        self.critic_config()

    @property
    def hidden_sizes(self) -> tuple[int, ...]:
        return parse_widths(self.mlp_hidden, "--mlp-hidden")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def algorithm_name(self, action_kind: str) -> str:
        """What the board calls the algorithm: ``cql``, or without a CQL penalty
        (``--cql-alpha 0``) what it then is, offline DQN or offline SAC."""
        if self.cql_alpha is None or self.cql_alpha > 0:
            return self.algo
        return "offline-dqn" if action_kind == "discrete" else "offline-sac"

    def method_config(self, domain: str) -> str:
        """The method-defining fields set away from ``domain``'s defaults (see
        :func:`~offline_gitd.config_cli.describe_overrides`); identity columns of the board
        (algorithm, critic, K, beta), paths, seeds, drivers and the run's length are not."""
        blank = OfflineConfig(dataset=self.dataset, out=self.out or "-", algo=self.algo, critic=self.critic, K=self.K)
        ignored = ("dataset", "out", "data_dir", "seeds", "driver", "updates_per_call", "epochs", "algo", "critic")
        return describe_overrides(self.to_dict(), blank.resolve(domain).to_dict(), ignored + ("K", "beta"))

    def config_hash(self) -> str:
        """Hash of everything that defines the learning problem (not seeds, output or data paths,
        nor the run's length, which resume may extend), so runs of the same method on the same
        data share it across seeds."""
        identity = {
            k: v
            for k, v in self.to_dict().items()
            if k not in ("seeds", "out", "data_dir", "driver", "updates_per_call", "epochs", "frames")
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
