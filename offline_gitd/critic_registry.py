"""The critic registry: one record per critic, the four of the paper and any installed plug-in's.

A critic is a loss over :class:`~offline_gitd.critics.inputs.CriticInputs` plus a few facts the
rest of the package needs before any loss runs: what its targets bootstrap from, how many H-heads
it trains, its number of heads, the head layouts it supports and its per-domain defaults
(docs/critic-plugins.md). A record names its loss as a ``"module:attribute"`` string, imported on
first use, so the registry is plain data on the ground floor: the command line reads its names
(``--critic`` choices, sweep specs) without importing JAX.

Third-party packages add critics through the ``offline_gitd.critics`` entry-point group; each entry
point's name is the critic's name and its object a :class:`CriticSpec`::

    [project.entry-points."offline_gitd.critics"]
    huber = "my_package.spec:HUBER"

Entry points are read once per process with :mod:`importlib.metadata` (no plug-in module is imported
until its record is needed); :func:`register_critic` adds one in process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from offline_gitd.choices import HEAD_LAYOUTS
from offline_gitd.errors import ConfigError
from offline_gitd.records import Registry, import_target

ENTRY_POINT_GROUP = "offline_gitd.critics"
# What a critic's targets bootstrap from (docs/critics.md):
#   frozen:            theta_0 only (TD);
#   online:            its own online head, no target network (TDRC, as QRC);
#   iterated:          theta_0 for head 1, stop-gradient copies of head k-1 for head k (i-TD, D steps);
#   iterated_gradient: theta_0 for head 1, head k-1 *with gradient* for head k (Gi-TD).
TARGETS = ("frozen", "online", "iterated", "iterated_gradient")
# H-heads it trains: none; one (TDRC's h for head 1); per_target (Gi-TD's H_2..H_K, one for each
# target that carries a gradient).
H_HEADS = ("none", "one", "per_target")
# Fields a critic may default per domain (atari | gym | continuous) over the domain's own table:
# those a run leaves unset (None) until its domain fills them.
DEFAULTABLE = ("heads", "T", "tau")


@dataclass(frozen=True)
class CriticSpec:
    """One critic.

    name:      what ``--critic`` calls it (also its entry point's name).
    loss:      ``"module:attribute"`` of ``loss(inputs) -> (per_sample [B], delta [..., K, B])``.
    summary:   one line for ``--help`` and the docs (``"Gi-TD: gradient iterated TD"``).
    targets:   one of :data:`TARGETS`.
    h_heads:   one of :data:`H_HEADS`.
    default_K: online Q-heads when ``--K`` is not given.
    max_K:     the most heads it takes (1: a single-head critic); ``None``: no limit of its own.
    layouts:   the head layouts it supports (docs/critics.md#heads-and-h-estimators).
    defaults:  per domain, fields it sets over the domain's table (TDRC: shared heads on MuJoCo).
    """

    name: str
    loss: str
    summary: str
    targets: str = "frozen"
    h_heads: str = "none"
    default_K: int = 1
    max_K: int | None = 1
    layouts: tuple[str, ...] = HEAD_LAYOUTS
    defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"critic {self.name!r}"
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"{where}: a critic's name is letters, digits, '-' and '_'")
        module, colon, attribute = self.loss.partition(":")
        if not (module and colon and attribute):
            raise ConfigError(f"{where}: loss must be 'module:attribute', got {self.loss!r}")
        if self.targets not in TARGETS:
            raise ConfigError(f"{where}: targets must be one of {', '.join(TARGETS)}, got {self.targets!r}")
        if self.h_heads not in H_HEADS:
            raise ConfigError(f"{where}: h_heads must be one of {', '.join(H_HEADS)}, got {self.h_heads!r}")
        if self.max_K is not None and not 1 <= self.default_K <= self.max_K:
            raise ConfigError(f"{where}: default_K {self.default_K} must be in [1, max_K = {self.max_K}]")
        unknown = sorted(set(self.layouts) - set(HEAD_LAYOUTS))
        if not self.layouts or unknown:
            raise ConfigError(f"{where}: layouts must be among {', '.join(HEAD_LAYOUTS)}, got {self.layouts!r}")
        for domain, values in self.defaults.items():
            bad = sorted(set(values) - set(DEFAULTABLE))
            if bad:
                raise ConfigError(f"{where}: defaults[{domain!r}] may set {', '.join(DEFAULTABLE)}, not {bad[0]!r}")

    @property
    def has_h_heads(self) -> bool:
        return self.h_heads != "none"

    @property
    def uses_target_network(self) -> bool:
        """Every critic but those bootstrapping from their own online head keeps a theta_0."""
        return self.targets != "online"

    def num_h(self, K: int) -> int:
        """H-heads for ``K`` online heads: TDRC's one; Gi-TD's H_2..H_K (H_1 is identically 0)."""
        return {"none": 0, "one": 1, "per_target": K - 1}[self.h_heads]

    def load_loss(self) -> Callable[..., Any]:
        """The loss function (imports its module: JAX, on first use)."""
        return import_target(self.loss, f"critic {self.name!r}: cannot import its loss")


BUILTIN: tuple[CriticSpec, ...] = (
    CriticSpec("td", "offline_gitd.critics.td:td_loss", "TD: DQN / SAC / CQL's critic"),
    CriticSpec(
        "tdrc",
        "offline_gitd.critics.tdrc:tdrc_loss",
        "TDRC: TD with a regularised gradient correction (QRC)",
        targets="online",
        h_heads="one",
        defaults={"continuous": {"heads": "shared_linear"}},  # paper: independent networks for all but TDRC
    ),
    CriticSpec(
        "itd", "offline_gitd.critics.itd:itd_loss", "i-TD: iterated TD", targets="iterated", default_K=5, max_K=None
    ),
    CriticSpec(
        "gitd",
        "offline_gitd.critics.gitd:gitd_loss",
        "Gi-TD: gradient iterated TD",
        targets="iterated_gradient",
        h_heads="per_target",
        default_K=5,
        max_K=None,
    ),
)
CRITICS: Registry[CriticSpec] = Registry(
    "critic",
    CriticSpec,
    ENTRY_POINT_GROUP,
    BUILTIN,
    points=lambda group: entry_points(group=group),  # this module's name, read when called
    source=lambda spec: f"loss {spec.loss}",
    unknown_label="critic kind",
)
_plugins = CRITICS.plugins  # the installed plug-ins' records, read once per process


def critic_specs() -> dict[str, CriticSpec]:
    """Every critic by name: the paper's four, then installed plug-ins, then those registered here."""
    return CRITICS.records()


def critic_names() -> tuple[str, ...]:
    """The names ``--critic`` accepts."""
    return CRITICS.names()


def critic_spec(name: str) -> CriticSpec:
    """The record of critic ``name``; an unknown name is one line listing the known ones."""
    return CRITICS.get(name)


def register_critic(spec: CriticSpec) -> None:
    """Add a critic in this process (a notebook, a test); installed packages use the entry point."""
    CRITICS.register(spec)


def unregister_critic(name: str) -> None:
    """Remove a critic added by :func:`register_critic`."""
    CRITICS.unregister(name)
