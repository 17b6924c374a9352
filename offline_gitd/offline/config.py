"""``offline_gitd train``'s configuration: a :class:`~offline_gitd.config.base.RunConfig` on a dataset.

The domain's defaults are the paper's offline tables (:data:`offline_gitd.config.paper.OFFLINE_DEFAULTS`),
with the algorithm's own values over them (its record's ``defaults``,
:mod:`offline_gitd.algorithm_registry`). What an algorithm takes (action kinds, its own fields, its
default critic) is read from its record, never from its name (docs/adding-a-learner.md). An
algorithm that trains no critic (behaviour cloning) has ``critic`` ``none``, and every critic flag
is refused (docs/offline.md#baselines).

An algorithm's own hyperparameters are its record's ``params`` dataclass
(docs/adding-a-learner.md#hyperparameters-of-its-own): the config keeps the run's values as
``params`` and shows them flat everywhere else, as ``--flags``, as keys of ``config.json``, of
``--config`` files and of sweep specs, and as attributes (``cfg.bc_alpha``). Flat, a
``config.json`` reads as it did when every algorithm's fields sat on this config, and the config
hash of a run already on a board is the one it had.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from offline_gitd.algorithm_registry import (
    DOMAIN_ACTIONS,
    AlgorithmSpec,
    algorithm_names,
    algorithm_spec,
    algorithm_specs,
)
from offline_gitd.choices import FRAME_PLACEMENTS, NO_CRITIC
from offline_gitd.config.base import RunConfig
from offline_gitd.config.fields import FieldGroup, config_fields, flag_of
from offline_gitd.config.paper import OFFLINE_DEFAULTS
from offline_gitd.critic_registry import critic_names
from offline_gitd.errors import ConfigError
from offline_gitd.records import option

# The fields that configure a critic: behaviour cloning has none, so it takes none of them. Each
# with the value that means "not set".
CRITIC_FIELDS: dict[str, object] = {"K": None, "T": None, "tau": None, "heads": None, "beta": 1.0, "D": 1}


def offline_critic_names() -> tuple[str, ...]:
    """The registered critics, and ``none`` for the algorithm that trains none (``bc``)."""
    return (*critic_names(), NO_CRITIC)


@dataclass(frozen=True, init=False)
class OfflineConfig(RunConfig):
    """Hyperparameters of ``offline_gitd train``; ``None`` means "the domain's default".

    ``OfflineConfig(algo="td3bc", bc_alpha=5.0)``: the algorithm's own parameters are given flat
    among the shared fields (or as ``params=``, its record's dataclass) and read flat
    (``cfg.bc_alpha``) or as ``cfg.params.bc_alpha``.
    """

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
    # The algorithm's own parameters (an instance of its record's params dataclass, None when it has
    # none): not a flag itself, its fields are (``field_groups``).
    params: Any = dataclasses.field(default=None, metadata={"nested": True})

    NOT_HASHED: ClassVar[tuple[str, ...]] = (
        *RunConfig.NOT_HASHED,
        "data_dir",
        "updates_per_call",
        "epochs",
        "frames",
    )

    def __init__(self, *, params: Any = None, **values: Any) -> None:
        """The fields by name; the algorithm's own parameters as ``params`` (its record's
        dataclass, or a dict of its fields) or flat among the fields, as flags, config files and
        ``config.json`` give them (:func:`algorithm_params`)."""
        shared = [field for field in dataclasses.fields(self) if field.name != "params"]
        names = {field.name for field in shared}
        for field in shared:
            object.__setattr__(self, field.name, values.get(field.name, field.default))
        flat = {name: value for name, value in values.items() if name not in names}
        object.__setattr__(self, "params", algorithm_params(self.algo, params, flat))

    def __getattr__(self, name: str) -> Any:
        """A parameter of the run's algorithm read flat (``cfg.bc_alpha``), as ``config.json``
        holds it; another algorithm's reads ``None`` (unset), as it did when every algorithm's
        parameters were fields of this config."""
        params = self.__dict__.get("params")
        if not name.startswith("__"):
            if params is not None and name in {field.name for field in dataclasses.fields(params)}:
                return getattr(params, name)
            if name in param_owners():
                return None
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def field_groups(cls) -> tuple[FieldGroup, ...]:
        """Each algorithm's own parameters: flags under ``--algo NAME`` in ``--help``, keys beside
        the shared ones (:func:`offline_gitd.config.fields.config_fields`)."""
        param_owners()  # a parameter named as a shared field or as another algorithm's is refused
        specs = algorithm_specs().values()
        return tuple(FieldGroup(f"--algo {s.name}", s.summary, s.params) for s in specs if s.params is not None)

    def to_dict(self) -> dict[str, Any]:
        """The fields by name with the algorithm's own parameters flat among them: what
        ``config.json``, ``--config`` files and sweep specs hold, and what the config hash reads."""
        values = {field.name: getattr(self, field.name) for field in dataclasses.fields(self) if field.name != "params"}
        return {**values, **(dataclasses.asdict(self.params) if self.params is not None else {})}

    def resolve(self, domain: str) -> OfflineConfig:
        """Fill domain defaults (the algorithm's over the domain's), apply the paper's per-critic
        rules, validate; returns a new config."""
        self.check_algo_flags()
        self.check_algo(domain)
        spec = algorithm_spec(self.algo)
        values = self.to_dict()
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
        # the algorithm's own parameters were checked by their dataclass when given

    def hash_identity(self) -> dict[str, Any]:
        """The hashed fields (the algorithm's own parameters flat among them), less its
        parameters left unset: a run hashes as it did when TD3+BC's and IQL's were fields of this
        config, hashed only when set, so the rows on a board still pool with its method's new runs."""
        identity = super().hash_identity()
        unset = {
            k for k, v in (dataclasses.asdict(self.params) if self.params is not None else {}).items() if v is None
        }
        return {k: v for k, v in identity.items() if k not in unset}

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
    """The shared fields other algorithms' records declare their own (``fields``) and ``spec``'s
    does not: refused when set, left unset when defaulted. A record whose ``fields`` name no shared
    field, or whose ``defaults`` name neither a shared field nor one of its ``params``, is refused."""
    shared = {f.name for f in dataclasses.fields(OfflineConfig)} - {"params"}
    names = []
    for other in algorithm_specs().values():
        for name in other.fields:
            if name not in shared:
                raise ConfigError(f"algorithm {other.name!r} names {name!r}, which is not a train config field")
        for name in (key for values in other.defaults.values() for key in values):
            if name not in shared and name not in other.param_names:
                raise ConfigError(
                    f"algorithm {other.name!r} names {name!r}, which is not a train config field nor one of its params"
                )
        names += [name for name in other.fields if name not in spec.fields and name not in names]
    return names


def param_owners() -> dict[str, AlgorithmSpec]:
    """Each algorithm's own parameter by name, with its algorithm. A parameter is a flag and a key
    beside the shared fields, so one named as a shared field or as another algorithm's is refused
    in one line: prefix it with the algorithm's name, as ``iql_temperature`` is IQL's."""
    shared = {f.name for f in dataclasses.fields(OfflineConfig)}
    owners: dict[str, AlgorithmSpec] = {}
    for spec in algorithm_specs().values():
        for name in spec.param_names:
            other = "a shared train config field" if name in shared else owners.get(name)
            if other is not None:
                also = other if isinstance(other, str) else f"also a parameter of algorithm {other.name!r}"
                raise ConfigError(
                    f"algorithm {spec.name!r}: its parameter {name!r} is {also}; prefix it with the "
                    f"algorithm's name (as iql_temperature is IQL's)"
                )
            owners[name] = spec
    return owners


def algorithm_params(algo: str, params: Any, flat: Mapping[str, Any]) -> Any:
    """The run's instance of ``algo``'s ``params`` dataclass (``None`` if it has none): ``params``
    (an instance, or a dict of its fields, as ``dataclasses.asdict`` gives it) with the values
    given ``flat`` over it. ``None`` values are unset. A flat parameter of another algorithm is
    refused when set and dropped when ``None``: a ``config.json`` written before the parameters
    moved to the records holds every algorithm's, unset. A name no algorithm has is a TypeError, as
    a dataclass refuses an unknown field."""
    owners = param_owners()
    unknown = sorted(set(flat) - set(owners))
    if unknown:
        raise TypeError(f"OfflineConfig got an unexpected keyword argument {unknown[0]!r}")
    given = {name: value for name, value in flat.items() if value is not None}
    if isinstance(params, Mapping):
        given = {**{name: value for name, value in params.items() if value is not None}, **given}
        params = None
    if algo not in algorithm_specs():
        if given or params is not None:
            algorithm_spec(algo)  # the unknown algorithm's one line, naming the known ones
        return None  # refused by resolve and check_flags, with that same line
    spec = algorithm_spec(algo)
    foreign = [name for name in given if name not in spec.param_names]
    if foreign:
        owner = owners.get(foreign[0])
        flag = flag_of(config_fields(OfflineConfig)[foreign[0]][0])
        raise ConfigError(f"{flag} is for --algo {owner.name if owner else '?'}, not --algo {algo}")
    if spec.params is None:
        if params is not None:
            raise ConfigError(f"--algo {algo} has no parameters of its own, got {params!r}")
        return None
    if params is not None and not isinstance(params, spec.params):
        raise ConfigError(f"--algo {algo}'s parameters are a {spec.params.__name__}, got {type(params).__name__}")
    return dataclasses.replace(params or spec.params(), **given)


def flag(name: str) -> str:
    """A field's command-line flag (``bc_alpha`` -> ``--bc-alpha``, ``K`` -> ``--K``)."""
    return flag_of(config_fields(OfflineConfig)[name][0])
