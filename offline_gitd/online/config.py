"""The online learners' configuration and the paper's defaults per domain (REFERENCE tables).

A run is a function of its resolved config alone (DESIGN §5): ``resolve`` fills every ``None``
from the environment's domain (and, for classic control, the environment's own row of the Gym
data-collection table), applies ``--preset``, validates, and the result is what ``config.json``
holds. ``T`` (target period / head roll) counts gradient updates, as everywhere in the critics.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from offline_gitd.config_cli import (
    check_common_ranges,
    check_range,
    describe_overrides,
    option,
    parse_ratio,
    parse_seeds,
    parse_widths,
)
from offline_gitd.critics import CRITIC_KINDS, CriticConfig
from offline_gitd.errors import ConfigError
from offline_gitd.learners.drivers import DRIVERS
from offline_gitd.networks import HEAD_LAYOUTS, TORSOS
from offline_gitd.online.schedules import utd_fraction

ALGOS = ("dqn", "sac")
PRESETS = ("none", "strong")

# REFERENCE "Hyperparameters".
# atari: the online DQN table (UTD 1/4 is the "medium" point of the UTD study and Nature DQN's
#   one update per 4 agent steps); results are logged every 10,000 env steps and checkpointed
#   once per 250,000-step epoch.
# gym: the Gym data-collection table (LunarLander / MountainCar rows in GYM_ENV_DEFAULTS); the
#   table's learning-rate cell is garbled, so lr = 5e-4 is taken from the offline Gym table of
#   the same paper (same networks and tasks), and epsilon decays over 10,000 steps (the table's
#   epoch length). Any other discrete vector env (CartPole-v1) gets the LunarLander row with an
#   FC 128-128 torso: our choice, documented, not the paper's.
# continuous: the MuJoCo SAC table (independent networks for all but TDRC; T = 1 with tau).
DOMAIN_DEFAULTS: dict[str, dict[str, Any]] = {
    "atari": dict(
        T=8000,
        lr=6.25e-5,
        adam_eps=1.5e-4,
        batch_size=32,
        torso="nature",
        mlp_hidden="256,256",
        heads="shared_linear",
        initial_samples=20_000,
        replay_size=1_000_000,
        epsilon_steps=250_000,
        utd=0.25,
        clip_rewards=True,
        horizon=27_000,
        log_every=10_000,
        checkpoint_every=250_000,
    ),
    "gym": dict(
        T=100,
        lr=5e-4,
        adam_eps=1e-8,
        batch_size=64,
        torso="mlp",
        mlp_hidden="128,128",
        heads="shared_linear",
        initial_samples=1_000,
        replay_size=10_000,
        epsilon_steps=10_000,
        utd=1.0,
        clip_rewards=False,
        horizon=None,
        log_every=1_000,
        checkpoint_every=10_000,
    ),
    "continuous": dict(
        T=1,
        tau=5e-3,
        lr=1e-3,
        adam_eps=1e-8,
        batch_size=256,
        torso="mlp",
        mlp_hidden="256,256",
        heads="independent",
        initial_samples=5_000,
        replay_size=1_000_000,
        epsilon_steps=0,
        utd=1.0,
        clip_rewards=False,
        horizon=None,
        log_every=1_000,
        checkpoint_every=10_000,
    ),
}
# Rows of the Gym data-collection table (horizon 500 for LunarLander as in the paper's ablation).
GYM_ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    "LunarLander-v3": dict(T=100, batch_size=64, mlp_hidden="200", horizon=500),
    "MountainCar-v0": dict(T=200, batch_size=32, mlp_hidden="50", horizon=200),
}
# The strong DQN baseline (REFERENCE "UTD study"): IMPALA + GAP, prioritised replay, 3-step returns.
STRONG_PRESET: dict[str, Any] = dict(torso="impala-gap", per=True, n_step=3)


@dataclass(frozen=True)
class OnlineConfig:
    """Hyperparameters of ``offline_gitd online dqn|sac``; ``None`` means "the domain's default"."""

    algo: str = option("dqn", "online algorithm family", choices=ALGOS)
    env: str = option("", "environment id: atari:Pong or Pong (Machado protocol), CartPole-v1, HalfCheetah-v5 ...")
    out: str = option("", "run directory (config.json, metrics.csv, episodes.csv, results.csv, checkpoints/)")
    critic: str = option(
        "gitd",
        "critic kind (td: DQN/SAC, tdrc: QRC/SACRC, itd: i-DQN/i-SAC, gitd: Gi-DQN/Gi-SAC)",
        choices=CRITIC_KINDS,
    )
    K: int | None = option(None, "online Q-heads (1 for td/tdrc, paper: 5 for itd/gitd)", flag="--K")
    beta: float = option(1.0, "weight decay on the H-heads (tdrc, gitd)")
    T: int | None = option(None, "target update / head roll period in gradient updates", flag="--T")
    D: int = option(1, "i-TD stale-copy sync period", flag="--D")
    tau: float | None = option(None, "soft target update rate (SAC default 0.005)")
    heads: str | None = option(None, "head layout", choices=HEAD_LAYOUTS)
    lr: float | None = option(None, "Adam learning rate")
    adam_eps: float | None = option(None, "Adam epsilon")
    batch_size: int | None = option(None, "transitions per gradient update")
    gamma: float = option(0.99, "discount factor")
    n_step: int = option(1, "n-step returns")
    per: bool = option(False, "prioritised replay (Schaul et al. 2016), priorities from |TD error|")
    per_alpha: float = option(0.6, "PER priority exponent")
    per_beta: float = option(0.4, "PER importance-sampling exponent")
    torso: str | None = option(None, "torso network", choices=TORSOS)
    mlp_hidden: str | None = option(None, "MLP widths, comma separated (SAC: critic and actor)")
    head_hidden: int = option(512, "hidden width of shared_nonlinear heads")
    preset: str = option(
        "none", "strong: IMPALA + GAP torso, PER, 3-step returns (the strong DQN baseline)", choices=PRESETS
    )
    steps: int = option(100_000, "environment steps per seed")
    utd: float | None = option(
        None, "updates per env step: an integer >= 1, or 1/n for one update every n steps", parse=parse_ratio
    )
    initial_samples: int | None = option(None, "uniformly random actions before learning starts")
    replay_size: int | None = option(None, "replay capacity in transitions (sampling window of the newest rows)")
    epsilon_start: float = option(1.0, "DQN exploration: initial epsilon")
    epsilon_end: float = option(0.01, "DQN exploration: final epsilon")
    epsilon_steps: int | None = option(
        None, "DQN exploration: env steps of the linear decay (after the initial samples)"
    )
    clip_rewards: bool | None = option(None, "clip rewards to [-1, 1] for learning (Atari default)")
    horizon: int | None = option(None, "episode step cap (env default if unset)")
    seeds: str = option("0", "seeds, e.g. 0-4: all seeds run in lockstep in one compiled program")
    log_every: int | None = option(None, "env steps between metrics/results rows")
    checkpoint_every: int | None = option(None, "env steps between checkpoints (a multiple of --log-every)")
    driver: str = option("auto", "update driver: scan (lax.scan), loop (jitted step), auto", choices=DRIVERS)

    @property
    def seed_list(self) -> list[int]:
        return parse_seeds(self.seeds)

    @property
    def hidden_sizes(self) -> tuple[int, ...]:
        return parse_widths(self.mlp_hidden, "--mlp-hidden")

    def critic_config(self) -> CriticConfig:
        return CriticConfig(
            kind=self.critic, K=self.K, beta=self.beta, T=self.T, D=self.D, tau=self.tau, heads=self.heads
        )

    def resolve(self, domain: str) -> OnlineConfig:
        """Fill the defaults of ``domain`` (atari | gym | continuous) and the preset; validate."""
        values = dataclasses.asdict(self)
        if self.preset == "strong":
            if self.algo != "dqn":
                raise ConfigError("--preset strong is the strong DQN baseline; it needs online dqn")
            values.update(STRONG_PRESET)
        defaults = dict(DOMAIN_DEFAULTS[domain])
        if domain == "gym":
            defaults.update(GYM_ENV_DEFAULTS.get(self.env, {}))
        for name, default in defaults.items():
            if values.get(name) is None:
                values[name] = default
        if domain == "continuous" and self.heads is None and self.critic == "tdrc":
            values["heads"] = "shared_linear"  # paper: independent networks for all but TDRC
        resolved = OnlineConfig(**values)
        resolved.validate()
        return dataclasses.replace(resolved, K=resolved.critic_config().K)

    def validate(self) -> None:
        if not self.env:
            raise ConfigError("--env ENV_ID is required")
        if not self.out:
            raise ConfigError("--out RUN_DIR is required")
        for name in ("steps", "log_every", "checkpoint_every"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
        check_common_ranges(self)
        # The window must hold a transition and its successor row (online.replay.WindowedReplay).
        check_range("--replay-size", self.replay_size, 2, why="a transition and the row after it")
        for name in ("initial_samples", "epsilon_steps"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 0, got {value}")
        if self.utd is not None:
            utd_fraction(self.utd)
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"--gamma must be in (0, 1], got {self.gamma}")
        for name in ("lr", "adam_eps"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {value}")
        for name in ("epsilon_start", "epsilon_end", "per_beta"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(self, name)}")
        if not (math.isfinite(self.per_alpha) and self.per_alpha >= 0):
            raise ConfigError(f"--per-alpha must be >= 0, got {self.per_alpha}")
        if self.log_every and self.checkpoint_every and self.checkpoint_every % self.log_every:
            raise ConfigError(
                f"--checkpoint-every ({self.checkpoint_every}) must be a multiple of --log-every ({self.log_every})"
            )
        if self.mlp_hidden is not None:
            self.hidden_sizes  # noqa: B018 - parses and validates
        self.seed_list  # noqa: B018
        self.critic_config()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def method_config(self, domain: str) -> str:
        """The method-defining fields set away from the env's defaults (see
        :func:`~offline_gitd.config_cli.describe_overrides`); identity columns of the board
        (algorithm, critic, K, beta), paths, seeds, the driver, length and logging are not."""
        blank = OnlineConfig(algo=self.algo, env=self.env, out=self.out or "-", critic=self.critic, K=self.K)
        ignored = ("env", "out", "seeds", "driver", "steps", "log_every", "checkpoint_every", "algo", "critic")
        return describe_overrides(self.to_dict(), blank.resolve(domain).to_dict(), ignored + ("K", "beta"))

    def config_hash(self) -> str:
        """Hash of what defines the learning problem (not seeds, output, length or logging)."""
        ignored = ("seeds", "out", "driver", "steps", "log_every", "checkpoint_every")
        identity = {k: v for k, v in self.to_dict().items() if k not in ignored}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
