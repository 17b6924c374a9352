"""Which offline run an online run starts from, read from its ``config.json`` alone (no JAX), so the
command line can fill and check the network fields before anything heavy (docs/python-api.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from offline_gitd.algorithm_registry import algorithm_specs
from offline_gitd.errors import ConfigError
from offline_gitd.online.config import OnlineConfig
from offline_gitd.rundir.files import CONFIG_FILE, read_config

# What makes a state fit another run: which critic, and the network it lives on.
NETWORK = ("critic", "K", "heads", "torso", "mlp_hidden", "head_hidden")


def offline_record(run_dir: str | Path) -> dict[str, Any]:
    """The offline run's ``config.json``; a directory that holds none, or an online run, is refused."""
    path = Path(run_dir)
    if not (path / CONFIG_FILE).exists():
        raise ConfigError(f"--init-from {run_dir}: not a run directory (no {CONFIG_FILE})")
    record = read_config(path)
    if "dataset" not in record.get("config", {}):
        raise ConfigError(f"--init-from {run_dir}: an online run; --init-from starts from an offline (train) run")
    algo = record["config"].get("algo", "cql")
    # DQN and SAC continue CQL's learner state; bc, td3bc and iql hold other states (their records say so).
    spec = algorithm_specs().get(algo)
    if spec is None or not spec.continues_online:
        starts = " or ".join(name for name, other in algorithm_specs().items() if other.continues_online)
        raise ConfigError(f"--init-from {run_dir}: an --algo {algo} run; online dqn and sac start from a {starts} run")
    return record


def inherit_network(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (an online config's fields as given) with the network fields it leaves out
    taken from the offline run named by ``init_from``; one it sets otherwise is refused."""
    values = dict(values)
    if values.get("init_from"):
        saved = offline_record(values["init_from"])["config"]
        for name in NETWORK:
            if values.get(name) is None:
                values[name] = saved[name]
        check_network(values, saved)
    return values


def check_network(values: OnlineConfig | Mapping[str, Any], saved: Mapping[str, Any]) -> None:
    """Refuse, in one line, an online config whose critic or network differs from the offline run's."""
    ours = values.to_dict() if isinstance(values, OnlineConfig) else values
    for name in NETWORK:
        if ours.get(name) != saved.get(name):
            raise ConfigError(
                f"--init-from {ours['init_from']}: its {name} is {saved.get(name)!r}, this run's is "
                f"{ours.get(name)!r}: an online run starts from an offline run of the same critic and network"
            )
