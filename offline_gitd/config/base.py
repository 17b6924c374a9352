"""The fields and rules that offline and online runs share: the critic, its network and optimiser.

A run is a function of its resolved config alone (docs/architecture.md#runs-are-self-contained):
``None`` means "the domain's default" (:mod:`offline_gitd.config.paper`), filled by ``resolve``,
and the resolved config is what ``config.json`` holds. :class:`RunConfig` holds what every run
has (which critic, on which network, trained how, for which seeds); ``OfflineConfig`` adds the
dataset and epochs, ``OnlineConfig`` the environment and its exploration.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from offline_gitd.choices import DRIVERS, HEAD_LAYOUTS, TORSOS
from offline_gitd.config.fields import (
    check_common_ranges,
    describe_overrides,
    parse_seeds,
    parse_widths,
)
from offline_gitd.critic_registry import critic_names, critic_spec
from offline_gitd.errors import ConfigError
from offline_gitd.records import option

if TYPE_CHECKING:
    from offline_gitd.critics.config import CriticConfig


@dataclass(frozen=True)
class RunConfig:
    """What every run is: a critic on a network, its optimiser, its data's discounting, its seeds."""

    out: str = option("", "run directory (config.json, metrics.csv, results.csv, checkpoints/)")
    critic: str = option(
        "gitd",
        "critic (td: DQN/SAC/CQL, tdrc: QRC, itd: i-TD, gitd: Gi-TD, or an installed plug-in's)",
        choices=critic_names,
    )
    K: int | None = option(None, "online Q-heads (1 for td/tdrc, paper: 5 for itd/gitd)", flag="--K")
    beta: float = option(1.0, "weight decay on the H-heads (tdrc, gitd)")
    T: int | None = option(None, "target update / head roll period in gradient updates", flag="--T")
    D: int = option(1, "i-TD stale-copy sync period", flag="--D")
    tau: float | None = option(None, "soft target update rate (continuous default 0.005; unset: hard updates)")
    heads: str | None = option(None, "head layout", choices=HEAD_LAYOUTS)
    lr: float | None = option(None, "Adam learning rate")
    adam_eps: float | None = option(None, "Adam epsilon")
    batch_size: int | None = option(None, "transitions per gradient update")
    gamma: float = option(0.99, "discount factor")
    n_step: int = option(1, "n-step returns")
    torso: str | None = option(None, "torso network", choices=TORSOS)
    mlp_hidden: str | None = option(None, "MLP widths, comma separated (continuous: critic and actor)")
    head_hidden: int = option(512, "hidden width of shared_nonlinear heads")
    clip_rewards: bool | None = option(None, "clip rewards to [-1, 1] for learning (Atari default)")
    horizon: int | None = option(None, "episode step cap (env default if unset)")
    seeds: str = option("0", "seeds, e.g. 0-4: all seeds train in one compiled program")
    driver: str = option("auto", "update driver: scan (lax.scan), loop (jitted step), auto", choices=DRIVERS)

    # Fields that say where, how long or how fast a run is, not what it learns: left out of its
    # config hash, so runs of one method on the same data share it across seeds and lengths.
    NOT_HASHED: ClassVar[tuple[str, ...]] = ("seeds", "out", "driver")

    @property
    def seed_list(self) -> list[int]:
        return parse_seeds(self.seeds)

    @property
    def hidden_sizes(self) -> tuple[int, ...]:
        return parse_widths(self.mlp_hidden, "--mlp-hidden")

    def critic_config(self) -> CriticConfig:
        from offline_gitd.critics.config import CriticConfig  # imports JAX: not at --help time

        return CriticConfig(
            kind=self.critic, K=self.K, beta=self.beta, T=self.T, D=self.D, tau=self.tau, heads=self.heads
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def filled(self, values: dict[str, Any], defaults: dict[str, Any], domain: str) -> RunConfig:
        """``values`` (this config's fields, possibly changed) with every ``None`` taken from
        ``defaults`` (the critic's own for ``domain`` first: TDRC's shared heads on MuJoCo),
        validated, and ``K`` resolved."""
        defaults = {**defaults, **critic_spec(self.critic).defaults.get(domain, {})}
        for name, default in defaults.items():
            if values.get(name) is None:
                values[name] = default
        resolved = type(self)(**values)
        resolved.validate()
        return dataclasses.replace(resolved, K=resolved.critic_config().K)

    def validate(self) -> None:
        """Every check: the flags' own, then the critic's (which needs JAX)."""
        self.check_flags()
        self.critic_config()

    def check_flags(self) -> None:
        """The checks that need nothing heavy, so a command refuses bad flags at once; subclasses
        add their own and call this."""
        if not self.out:
            raise ConfigError("--out RUN_DIR is required")
        check_common_ranges(self)
        if not 0.0 < self.gamma <= 1.0:
            raise ConfigError(f"--gamma must be in (0, 1], got {self.gamma}")
        for name in ("lr", "adam_eps"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"--{name.replace('_', '-')} must be > 0, got {value}")
        if self.mlp_hidden is not None:
            self.hidden_sizes  # noqa: B018 - parses and validates
        self.seed_list  # noqa: B018

    def describe_method(self, blank: RunConfig, domain: str, ignored: tuple[str, ...]) -> str:
        """The method-defining fields set away from ``domain``'s defaults (``blank`` is this run
        with nothing set, see :func:`~offline_gitd.config.fields.describe_overrides`); the board's
        identity columns (algorithm, critic, K, beta) and the ``ignored`` fields are left out."""
        left_out = (*ignored, "algo", "critic", "K", "beta")
        return describe_overrides(self.to_dict(), blank.resolve(domain).to_dict(), left_out)

    def config_hash(self) -> str:
        """Hash of everything that defines the learning problem (not seeds, output or data paths,
        nor the run's length, which resume may extend), so runs of one method share it across seeds."""
        return hashlib.sha256(json.dumps(self.hash_identity(), sort_keys=True).encode()).hexdigest()[:16]

    def hash_identity(self) -> dict[str, Any]:
        """The fields :meth:`config_hash` hashes."""
        return {k: v for k, v in self.to_dict().items() if k not in self.NOT_HASHED}

    def resolve(self, domain: str) -> RunConfig:  # pragma: no cover - every subclass defines it
        raise NotImplementedError
