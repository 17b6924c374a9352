"""``offline_gitd train``'s configuration: a :class:`~offline_gitd.config.base.RunConfig` on a dataset.

The domain's defaults are the paper's offline tables (:data:`offline_gitd.config.paper.OFFLINE_DEFAULTS`),
with the algorithm's own values over them (its record's ``defaults``,
:mod:`offline_gitd.algorithm_registry`). What an algorithm takes (action kinds, its own fields, its
default critic) is read from its record, never from its name (docs/adding-a-learner.md). An
algorithm that trains no critic (behaviour cloning) has ``critic`` ``none``, and every critic flag
is refused (docs/offline.md#baselines).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from offline_gitd.algorithm_registry import (
    BUILTIN,
    DOMAIN_ACTIONS,
    AlgorithmSpec,
    algorithm_names,
    algorithm_spec,
    algorithm_specs,
)
from offline_gitd.choices import FRAME_PLACEMENTS, NO_CRITIC
from offline_gitd.config.base import RunConfig
from offline_gitd.config.fields import check_range, option
from offline_gitd.config.paper import OFFLINE_DEFAULTS
from offline_gitd.critic_registry import critic_names
from offline_gitd.errors import ConfigError

# The fields hashed even when unset: cql_alpha was hashed before any other algorithm existed; the
# other built-in algorithms' own fields enter the hash only when set (:meth:`OfflineConfig.hash_identity`).
HASHED_WHEN_UNSET = ("cql_alpha",)
# The fields that configure a critic: behaviour cloning has none, so it takes none of them. Each
# with the value that means "not set".
CRITIC_FIELDS: dict[str, object] = {"K": None, "T": None, "tau": None, "heads": None, "beta": 1.0, "D": 1}


def offline_critic_names() -> tuple[str, ...]:
    """The registered critics, and ``none`` for the algorithm that trains none (``bc``)."""
    return (*critic_names(), NO_CRITIC)


@dataclass(frozen=True)
class OfflineConfig(RunConfig):
    """Hyperparameters of ``offline_gitd train``; ``None`` means "the domain's default"."""

    dataset: str = option("", "rlu-atari:GAME/RUN[:CHECKPOINTS] or minari:DATASET_ID")
    critic: str | None = option(
        None,
        "critic (td: DQN/SAC/CQL, tdrc: QRC, itd: i-TD, gitd: Gi-TD, or an installed plug-in's; none: --algo bc)",
        choices=offline_critic_names,
        unset="gitd; td with --algo iql; none with --algo bc",
    )
    algo: str = option(
        "cql",
        "offline algorithm: cql (--cql-alpha 0 gives offline DQN/SAC), bc (behaviour cloning, no critic), "
        "td3bc (TD3+BC) or iql (IQL); td3bc and iql need continuous actions",
        choices=algorithm_names,
    )
    cql_alpha: float | None = option(None, "cql: weight of the CQL penalty (0: no penalty)")
    bc_alpha: float | None = option(None, "td3bc: alpha, the weight of Q against the BC term (paper: 2.5)")
    policy_noise: float | None = option(None, "td3bc: std of the target policy's smoothing noise (paper: 0.2)")
    noise_clip: float | None = option(None, "td3bc: clip of the smoothing noise (paper: 0.5)")
    policy_delay: int | None = option(None, "td3bc: critic updates per policy and target update (paper: 2)")
    expectile: float | None = option(None, "iql: expectile of the value regression, in (0, 1) (paper: 0.7)")
    iql_temperature: float | None = option(None, "iql: inverse temperature beta of the advantage weights (paper: 3)")
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
        """Fill domain defaults (the algorithm's over the domain's), apply the paper's per-critic
        rules, validate; returns a new config."""
        self.check_algo_flags()
        self.check_algo(domain)
        spec = algorithm_spec(self.algo)
        values = dataclasses.asdict(self)
        if values["tau"] is not None and self.T is None:
            values["T"] = 1
        defaults = {**OFFLINE_DEFAULTS[domain], **spec.defaults.get(domain, {})}
        for name in others_fields(spec):  # the domain's cql_alpha stays unset for every other algorithm
            defaults.pop(name, None)
        if not spec.trains_critic:
            for name in CRITIC_FIELDS:
                defaults.pop(name, None)
            values["critic"] = NO_CRITIC
            for name, default in defaults.items():
                if values.get(name) is None:
                    values[name] = default
            resolved = OfflineConfig(**values)
            resolved.validate()
            return resolved
        values["critic"] = values["critic"] or spec.default_critic
        return dataclasses.replace(self, critic=values["critic"]).filled(values, defaults, domain)

    def validate(self) -> None:
        """Every check; an algorithm that trains no critic (behaviour cloning) has none to check."""
        if algorithm_spec(self.algo).trains_critic:
            super().validate()
        else:
            self.check_flags()

    def check_algo(self, domain: str) -> None:
        """Refuse an algorithm on a domain of actions it does not take (td3bc and iql on every
        domain but ``continuous``)."""
        algorithm_spec(self.algo).check_action_kind(DOMAIN_ACTIONS[domain])

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
        self.check_algo_flags()

    def check_algo_flags(self) -> None:
        """The algorithm's own flags in range, other algorithms' refused, and no critic for an
        algorithm that trains none (bc)."""
        spec = algorithm_spec(self.algo)
        for name in others_fields(spec):
            if getattr(self, name) is not None:
                owner = next(other.name for other in algorithm_specs().values() if name in other.fields)
                raise ConfigError(f"{flag(name)} is for --algo {owner}, not --algo {self.algo}")
        if not spec.trains_critic:
            if self.critic not in (None, NO_CRITIC):
                raise ConfigError(f"--algo {self.algo} trains no critic: drop --critic {self.critic}")
            for name, unset in CRITIC_FIELDS.items():
                if getattr(self, name) != unset:
                    raise ConfigError(f"--algo {self.algo} trains no critic: drop {flag(name)}")
        elif self.critic == NO_CRITIC:
            without = " or ".join(
                f"--algo {other.name}" for other in algorithm_specs().values() if not other.trains_critic
            )
            raise ConfigError(f"--critic {NO_CRITIC} is for {without}; --algo {self.algo} trains a critic")
        for name in ("policy_noise", "noise_clip", "iql_temperature"):
            check_range(flag(name), getattr(self, name), 0.0)
        if self.bc_alpha is not None and not (math.isfinite(self.bc_alpha) and self.bc_alpha > 0):
            raise ConfigError(f"--bc-alpha must be > 0, got {self.bc_alpha}")
        check_range("--policy-delay", self.policy_delay, 1)
        if self.expectile is not None and not 0.0 < self.expectile < 1.0:
            raise ConfigError(f"--expectile must be in (0, 1), got {self.expectile}")

    def hash_identity(self) -> dict[str, Any]:
        """The hashed fields, less the baselines' own where unset: a CQL run hashes as it did
        before they existed, so its rows still pool with those of earlier runs of its method."""
        own_fields = {name for spec in BUILTIN for name in spec.fields} - set(HASHED_WHEN_UNSET)
        identity = super().hash_identity()
        return {k: v for k, v in identity.items() if not (k in own_fields and v is None)}

    def algorithm_name(self, action_kind: str) -> str:
        """What the board calls the algorithm: its name (``cql``, ``bc``, ``td3bc``, ``iql``), or for
        CQL without its penalty (``--cql-alpha 0``, a field no other algorithm takes) what it then
        is, offline DQN or offline SAC."""
        if self.cql_alpha is None or self.cql_alpha > 0:
            return self.algo
        return "offline-dqn" if action_kind == "discrete" else "offline-sac"

    def board_identity(self) -> tuple[str, int, float]:
        """The board's critic, K and beta columns: those of an algorithm that trains no critic
        (behaviour cloning) are ``none``, 1 and 0."""
        if not algorithm_spec(self.algo).trains_critic:
            return NO_CRITIC, 1, 0.0
        return self.critic, self.K, self.beta

    def method_config(self, domain: str) -> str:
        """What sets this run's method apart from ``domain``'s defaults (paths, seeds, drivers and
        the run's length are not the method)."""
        blank = OfflineConfig(dataset=self.dataset, out=self.out or "-", algo=self.algo, critic=self.critic, K=self.K)
        ignored = ("dataset", "out", "data_dir", "seeds", "driver", "updates_per_call", "epochs")
        return self.describe_method(blank, domain, ignored)


def others_fields(spec: AlgorithmSpec) -> list[str]:
    """The fields other algorithms' records declare their own and ``spec``'s does not: refused when
    set, left unset when defaulted. A field a record names that the config lacks is refused."""
    known = {f.name for f in dataclasses.fields(OfflineConfig)}
    names = []
    for other in algorithm_specs().values():
        for name in (*other.fields, *(key for values in other.defaults.values() for key in values)):
            if name not in known:
                raise ConfigError(f"algorithm {other.name!r} names {name!r}, which is not a train config field")
        names += [name for name in other.fields if name not in spec.fields and name not in names]
    return names


def flag(name: str) -> str:
    """A field's command-line flag (``bc_alpha`` -> ``--bc-alpha``, ``K`` -> ``--K``)."""
    field = next(f for f in dataclasses.fields(OfflineConfig) if f.name == name)
    return field.metadata.get("flag") or f"--{name.replace('_', '-')}"
