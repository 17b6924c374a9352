"""The offline algorithm registry: one record per ``--algo``, the package's four and any installed plug-in's.

An offline algorithm is a learner family (``init``/``step``/``act``,
:class:`~offline_gitd.learners.family.Family`) plus the few facts the rest of the package needs
before any of it is built: the action kinds it takes, the critic it trains unless told (or none,
behaviour cloning), its own hyperparameters (a dataclass, whose fields are ``train`` flags and
config keys, as d3rlpy keeps an ``IQLConfig`` beside its algorithm), its defaults per domain over
the domain's table, and whether online DQN and SAC may continue its learner state
(docs/adding-a-learner.md). A
record names its family builder as a ``"module:function"`` string, imported on first use, so the
registry is plain data on the ground floor: the command line reads its names (``--algo`` choices,
sweep specs) without importing JAX.

Third-party packages add algorithms through the ``offline_gitd.algorithms`` entry-point group; each
entry point's name is the algorithm's name and its object an :class:`AlgorithmSpec`::

    [project.entry-points."offline_gitd.algorithms"]
    awbc = "my_package.spec:AWBC"

Entry points are read once per process with :mod:`importlib.metadata` (no plug-in module is imported
until its family is built); :func:`register_algorithm` adds one in process. Critics are the other
registry (:mod:`offline_gitd.critic_registry`, docs/critic-plugins.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from offline_gitd.choices import NO_CRITIC, did_you_mean
from offline_gitd.errors import ConfigError
from offline_gitd.records import Registry, check_range, import_target, option

ENTRY_POINT_GROUP = "offline_gitd.algorithms"
ACTION_KINDS = ("discrete", "continuous")
# The domains of offline_gitd.config.paper.OFFLINE_DEFAULTS and the action kind of each dataset in them.
DOMAIN_ACTIONS: Mapping[str, str] = {
    "atari": "discrete",
    "gym": "discrete",
    "minatar": "discrete",
    "continuous": "continuous",
}


@dataclass(frozen=True)
class AlgorithmSpec:
    """One offline algorithm.

    name:             what ``--algo`` calls it (also its entry point's name).
    family:           ``"module:function"`` of ``build(cfg, spaces, obs_example) -> Family``: the
                      resolved run config, the dataset's spaces and one network input (a batch of 1).
    summary:          one line for the docs (``"TD3+BC: TD3 with a behaviour-cloning term"``).
    action_kinds:     those of :data:`ACTION_KINDS` it takes; another is refused before any work.
    default_critic:   the critic it trains when a run names none; ``None``: it trains no critic
                      (its critic column is ``none`` and every critic flag is refused).
    params:           its own hyperparameters: a frozen dataclass of
                      :func:`~offline_gitd.records.option` fields, each a ``train`` flag and a
                      config key (flat, beside the shared ones), refused for another algorithm;
                      its ``__post_init__`` refuses a value out of range. The run's values reach
                      the family builder as ``cfg.params``. ``None``: it has none.
    fields:           the shared run config's fields only it reads (CQL's ``cql_alpha``, which
                      predates ``params``); given to another algorithm, refused.
    defaults:         per domain (:data:`DOMAIN_ACTIONS`), values over the domain's table: of
                      shared fields and of its ``params`` left ``None``.
    continues_online: whether ``online dqn|sac --init-from`` may start from its runs (their
                      learner state is the online learners').
    """

    name: str
    family: str
    summary: str
    action_kinds: tuple[str, ...] = ACTION_KINDS
    default_critic: str | None = "gitd"
    params: type | None = None
    fields: tuple[str, ...] = ()
    defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    continues_online: bool = False

    def __post_init__(self) -> None:
        where = f"algorithm {self.name!r}"
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"{where}: an algorithm's name is letters, digits, '-' and '_'")
        module, colon, attribute = self.family.partition(":")
        if not (module and colon and attribute):
            raise ConfigError(f"{where}: family must be 'module:function', got {self.family!r}")
        unknown = sorted(set(self.action_kinds) - set(ACTION_KINDS))
        if not self.action_kinds or unknown:
            raise ConfigError(
                f"{where}: action_kinds must be among {', '.join(ACTION_KINDS)}, got {self.action_kinds!r}"
            )
        if self.default_critic == NO_CRITIC:
            raise ConfigError(f"{where}: an algorithm that trains no critic has default_critic None")
        if self.params is not None:
            if not (isinstance(self.params, type) and dataclasses.is_dataclass(self.params)):
                raise ConfigError(f"{where}: params must be a dataclass (a class), got {self.params!r}")
            needed = [f.name for f in dataclasses.fields(self.params) if f.default is dataclasses.MISSING]
            if needed:
                raise ConfigError(f"{where}: params field {needed[0]!r} needs a default (None: the domain's)")
        for domain in self.defaults:
            if domain not in DOMAIN_ACTIONS:
                raise ConfigError(f"{where}: defaults are per domain ({', '.join(DOMAIN_ACTIONS)}), not {domain!r}")

    @property
    def trains_critic(self) -> bool:
        return self.default_critic is not None

    @property
    def param_names(self) -> tuple[str, ...]:
        """Its ``params`` dataclass's fields (its own flags beside ``fields``)."""
        return tuple(f.name for f in dataclasses.fields(self.params)) if self.params is not None else ()

    def check_action_kind(self, action_kind: str) -> None:
        """Refuse, in one line naming the algorithms that take them, actions this one does not."""
        if action_kind in self.action_kinds:
            return
        takers = [spec.name for spec in algorithm_specs().values() if action_kind in spec.action_kinds]
        use = f" (use {_or(takers)})" if takers else ""
        raise ConfigError(
            f"--algo {self.name} is for {_or(self.action_kinds)} actions; this dataset's are {action_kind}{use}"
        )

    def load_family(self) -> Callable[..., Any]:
        """The family builder (imports its module: JAX, on first use)."""
        return import_target(self.family, f"algorithm {self.name!r}: cannot import its family builder")


def _or(names: tuple[str, ...] | list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


@dataclass(frozen=True)
class TD3BCParams:
    """TD3+BC's own hyperparameters (Fujimoto & Gu 2021, docs/baselines-math.md); ``None``: the
    record's default for the domain (the paper's)."""

    bc_alpha: float | None = option(None, "alpha, the weight of Q against the BC term", unset="2.5, the paper's")
    policy_noise: float | None = option(None, "std of the target policy's smoothing noise", unset="0.2, the paper's")
    noise_clip: float | None = option(None, "clip of the smoothing noise", unset="0.5, the paper's")
    policy_delay: int | None = option(None, "critic updates per policy and target update", unset="2, the paper's")

    def __post_init__(self) -> None:
        if self.bc_alpha is not None and not (math.isfinite(self.bc_alpha) and self.bc_alpha > 0):
            raise ConfigError(f"--bc-alpha must be > 0, got {self.bc_alpha}")
        check_range("--policy-noise", self.policy_noise, 0.0)
        check_range("--noise-clip", self.noise_clip, 0.0)
        check_range("--policy-delay", self.policy_delay, 1)


@dataclass(frozen=True)
class IQLParams:
    """IQL's own hyperparameters (Kostrikov et al. 2022, docs/baselines-math.md); ``None``: the
    record's default for the domain (the paper's)."""

    expectile: float | None = option(None, "expectile of the value regression, in (0, 1)", unset="0.7, the paper's")
    iql_temperature: float | None = option(
        None, "inverse temperature beta of the advantage weights", unset="3, the paper's"
    )

    def __post_init__(self) -> None:
        if self.expectile is not None and not 0.0 < self.expectile < 1.0:
            raise ConfigError(f"--expectile must be in (0, 1), got {self.expectile}")
        check_range("--iql-temperature", self.iql_temperature, 0.0)


BUILTIN: tuple[AlgorithmSpec, ...] = (
    # CQL over any critic (docs/offline.md#the-cql-family): the package's method; --cql-alpha 0 is
    # offline DQN or SAC. Its cql_alpha defaults are the paper's tables' (OFFLINE_DEFAULTS).
    AlgorithmSpec(
        "cql",
        "offline_gitd.learners.family:build_cql_family",
        "CQL: conservative Q-learning over any critic (--cql-alpha 0: offline DQN or SAC)",
        fields=("cql_alpha",),
        continues_online=True,
    ),
    # The baselines (docs/offline.md#baselines), with their papers' values over the domain's row.
    # bc, continuous: CORL's BC (Tarasov et al. 2023, any_percent_bc): Adam lr 3e-4, batch 256, an
    #   FC 256 - FC 256 policy. Discrete bc keeps the domain's network, learning rate and batch.
    AlgorithmSpec(
        "bc",
        "offline_gitd.learners.bc:build_bc_family",
        "behaviour cloning: a policy fit to the data's actions, no critic",
        default_critic=None,
        defaults={"continuous": dict(lr=3e-4, batch_size=256, mlp_hidden="256,256")},
    ),
    # td3bc: Fujimoto & Gu (2021), Appendix C: alpha 2.5, policy noise 0.2 clipped at 0.5, a policy (and
    #   target) update every 2 critic updates, Adam lr 3e-4 for actor and critics, batch 256,
    #   FC 256 - FC 256 networks, soft target rate tau 0.005.
    AlgorithmSpec(
        "td3bc",
        "offline_gitd.learners.td3bc:build_td3bc_family",
        "TD3+BC: TD3 with a behaviour-cloning term, over any critic",
        action_kinds=("continuous",),
        params=TD3BCParams,
        defaults={
            "continuous": dict(
                bc_alpha=2.5,
                policy_noise=0.2,
                noise_clip=0.5,
                policy_delay=2,
                lr=3e-4,
                batch_size=256,
                mlp_hidden="256,256",
                T=1,
                tau=5e-3,
            )
        },
    ),
    # iql: Kostrikov et al. (2022), Appendix B (MuJoCo): expectile 0.7, temperature (their beta) 3.0,
    #   Adam lr 3e-4, batch 256, FC 256 - FC 256 networks, soft target rate tau 0.005. Its bootstrap
    #   V(s') takes only critics with a target network: td by default.
    AlgorithmSpec(
        "iql",
        "offline_gitd.learners.iql:build_iql_family",
        "IQL: implicit Q-learning (expectile value, advantage-weighted policy)",
        action_kinds=("continuous",),
        default_critic="td",
        params=IQLParams,
        defaults={
            "continuous": dict(
                expectile=0.7, iql_temperature=3.0, lr=3e-4, batch_size=256, mlp_hidden="256,256", T=1, tau=5e-3
            )
        },
    ),
)
ALGORITHMS: Registry[AlgorithmSpec] = Registry(
    "algorithm",
    AlgorithmSpec,
    ENTRY_POINT_GROUP,
    BUILTIN,
    points=lambda group: entry_points(group=group),  # this module's name, read when called
    source=lambda spec: f"family {spec.family}",
    suggest=did_you_mean,
)
_plugins = ALGORITHMS.plugins  # the installed plug-ins' records, read once per process


def algorithm_specs() -> dict[str, AlgorithmSpec]:
    """Every algorithm by name: the package's four, then installed plug-ins, then those registered here."""
    return ALGORITHMS.records()


def algorithm_names() -> tuple[str, ...]:
    """The names ``--algo`` accepts."""
    return ALGORITHMS.names()


def algorithm_spec(name: str) -> AlgorithmSpec:
    """The record of algorithm ``name``; an unknown name is one line listing the known ones."""
    return ALGORITHMS.get(name)


def register_algorithm(spec: AlgorithmSpec) -> None:
    """Add an algorithm in this process (a notebook, a test); installed packages use the entry point."""
    ALGORITHMS.register(spec)


def unregister_algorithm(name: str) -> None:
    """Remove an algorithm added by :func:`register_algorithm`."""
    ALGORITHMS.unregister(name)
