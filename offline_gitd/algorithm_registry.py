"""The offline algorithm registry: one record per ``--algo``, the package's four and any installed plug-in's.

An offline algorithm is a learner family (``init``/``step``/``act``,
:class:`~offline_gitd.learners.family.Family`) plus the few facts the rest of the package needs
before any of it is built: the action kinds it takes, the critic it trains unless told (or none,
behaviour cloning), the config fields only it reads, its defaults per domain over the domain's
table, and whether online DQN and SAC may continue its learner state (docs/adding-a-learner.md). A
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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from offline_gitd.choices import NO_CRITIC, did_you_mean
from offline_gitd.errors import ConfigError
from offline_gitd.records import Registry, import_target

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
    fields:           the run config's fields only it reads; given to another algorithm, refused.
    defaults:         per domain (:data:`DOMAIN_ACTIONS`), values over the domain's table.
    continues_online: whether ``online dqn|sac --init-from`` may start from its runs (their
                      learner state is the online learners').
    """

    name: str
    family: str
    summary: str
    action_kinds: tuple[str, ...] = ACTION_KINDS
    default_critic: str | None = "gitd"
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
        for domain in self.defaults:
            if domain not in DOMAIN_ACTIONS:
                raise ConfigError(f"{where}: defaults are per domain ({', '.join(DOMAIN_ACTIONS)}), not {domain!r}")

    @property
    def trains_critic(self) -> bool:
        return self.default_critic is not None

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
        fields=("bc_alpha", "policy_noise", "noise_clip", "policy_delay"),
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
        fields=("expectile", "iql_temperature"),
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
