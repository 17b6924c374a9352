"""Offline-to-online: an online run that starts from an offline run's checkpoint (docs/python-api.md).

``online dqn|sac --init-from RUN_DIR [--epoch E] [--seed S] [--with-dataset]``. The offline run
must have trained the same critic on the same network: the fields of :data:`NETWORK` that the
online run leaves unset are taken from it, and one that differs is refused in one line. Its
checkpoint is restored into the online family's own state (the discrete and continuous families
are the offline ones with ``cql_alpha = 0``, so the states have the same structure): the
parameters, target network and optimiser moments (and SAC's actor and temperature) carry over;
the update counter restarts at 0, so target rolls follow the online run's ``T``, and random keys
are the online seed's. ``--with-dataset`` first fills each seed's replay with the offline data.

What the run started from (the offline run's id, config hash, checkpoint and seeds) is recorded
in its ``config.json`` under ``init_from``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jax
import numpy as np

from offline_gitd.config.fields import parse_seeds
from offline_gitd.data.episode_store import EpisodeStore
from offline_gitd.errors import ConfigError
from offline_gitd.learners.family import Family, seed_states
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.env_info import EnvInfo
from offline_gitd.online.origin import check_network, offline_record
from offline_gitd.rundir.checkpoints import Checkpoints, restore_seed_states
from offline_gitd.rundir.files import CHECKPOINTS, absolute

# State fields that belong to the online run itself, not to what was learned.
OWN_FIELDS = ("step", "rng")


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where an online run starts: every seed's state, the data its replay starts with, and
    what ``config.json`` records of it."""

    state: Any  # leading axis: the online run's seeds
    dataset: EpisodeStore | None
    record: dict[str, Any]


def resolve_origin(cfg: OnlineConfig) -> OnlineConfig:
    """``cfg`` with ``init_from`` absolute and ``init_epoch`` the checkpoint it will read (the
    latest unless given), so that ``config.json`` says exactly where the run started."""
    run_dir = Path(absolute(cfg.init_from))
    record = offline_record(run_dir)
    check_network(cfg, record["config"])
    directory = run_dir / CHECKPOINTS
    saved = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else []
    if not saved:
        raise ConfigError(f"--init-from {cfg.init_from}: the run holds no checkpoint yet")
    epoch = saved[-1] if cfg.init_epoch is None else cfg.init_epoch
    if epoch not in saved:
        raise ConfigError(f"--epoch {epoch}: {cfg.init_from} has checkpoints at epochs {', '.join(map(str, saved))}")
    problem = Checkpoints(run_dir).problem(epoch)
    if problem:
        raise ConfigError(f"--init-from {cfg.init_from}: checkpoint {epoch} cannot be trusted: {problem}")
    return dataclasses.replace(cfg, init_from=str(run_dir), init_epoch=int(epoch))


def load_origin(cfg: OnlineConfig, info: EnvInfo, family: Family) -> Origin:
    """Restore the offline checkpoint named by the resolved ``cfg`` into ``family``'s state."""
    record = offline_record(cfg.init_from)
    offline_seeds = parse_seeds(record["config"]["seeds"])
    sources = [cfg.init_seed if cfg.init_seed is not None else seed for seed in cfg.seed_list]
    missing = sorted(set(sources) - set(offline_seeds))
    if missing:
        raise ConfigError(
            f"--init-from {cfg.init_from}: it has seeds {', '.join(map(str, offline_seeds))}, not {missing[0]}; "
            "pass --seed S to start every seed from one of them"
        )
    fresh = seed_states(family, cfg.seed_list, compiled=False)
    like = seed_states(family, offline_seeds, compiled=False)
    try:  # read as any trained run is read (offline_gitd/trained.py), into the online family's state
        learned = restore_seed_states(Path(cfg.init_from), cfg.init_epoch, family, offline_seeds)
    except Exception as err:  # noqa: BLE001 - orbax names a shape or tree mismatch in many ways
        raise ConfigError(
            f"--init-from {cfg.init_from}: its checkpoint does not fit online {cfg.algo} on {cfg.env} "
            f"({str(err).splitlines()[0].split('. ')[0] if str(err) else type(err).__name__})"
        ) from None
    _check_shapes(cfg, learned, like)
    rows = np.asarray([offline_seeds.index(seed) for seed in sources])
    carried = {
        name: jax.tree.map(lambda x: x[rows], getattr(learned, name))
        for name in fresh._fields
        if name not in OWN_FIELDS
    }
    dataset = _offline_dataset(cfg, record, info) if cfg.with_dataset else None
    origin = {
        "run_dir": cfg.init_from,
        "run_id": record.get("run_id"),
        "config_hash": record.get("config_hash"),
        "dataset": record["config"]["dataset"],
        "epoch": cfg.init_epoch,
        "seeds": dict(zip(map(str, cfg.seed_list), sources)),
        "with_dataset": cfg.with_dataset,
        "dataset_transitions": None if dataset is None else dataset.num_transitions,
    }
    return Origin(fresh._replace(**carried), dataset, origin)


def _check_shapes(cfg: OnlineConfig, learned: Any, like: Any) -> None:
    for (path, got), want in zip(jax.tree_util.tree_leaves_with_path(learned), jax.tree.leaves(like)):
        if np.shape(got) != np.shape(want):
            raise ConfigError(
                f"--init-from {cfg.init_from}: its network does not fit {cfg.env} "
                f"({jax.tree_util.keystr(path)} is {np.shape(got)[1:]}, here {np.shape(want)[1:]})"
            )


def _offline_dataset(cfg: OnlineConfig, record: Mapping[str, Any], info: EnvInfo) -> EpisodeStore:
    """The offline run's data as its config read it (same fraction), for the online replay."""
    from offline_gitd.data.datasets import open_offline_data
    from offline_gitd.data.registry import RluAtariId, parse_dataset_id

    saved = record["config"]
    if isinstance(parse_dataset_id(saved["dataset"]), RluAtariId):
        raise ConfigError(
            "--with-dataset copies a Minari dataset into the online replay; RL Unplugged Atari data "
            "(millions of frames per run) is not supported"
        )
    data = open_offline_data(SimpleNamespace(**saved))
    store = data.replay.store
    width = int(math.prod(info.spaces.obs_shape))
    if store.obs.shape[1:] != (width,):
        raise ConfigError(
            f"--with-dataset: {saved['dataset']} has observations of shape {store.obs.shape[1:]}, {cfg.env} ({width},)"
        )
    return store


def seed_replay(target: EpisodeStore, source: EpisodeStore, clip_rewards: bool) -> None:
    """Append every episode of ``source`` to ``target`` (an online replay's growing store)."""
    obs, actions, rewards, terminals = source.obs, source.actions, source.rewards, source.terminals
    if clip_rewards:
        rewards = np.clip(rewards, -1.0, 1.0)
    for start, end in zip(source.episode_starts, source.episode_ends):
        if terminals[end - 1]:  # ended by a terminal transition: no bootstrap row was stored
            observations = np.concatenate([obs[start:end], obs[end - 1 : end]])
            steps = end - start
        else:  # the last row is the state the last transition bootstraps from
            observations, steps = obs[start:end], end - start - 1
        if steps < 1:
            continue
        target.add_episode(
            observations,
            actions[start : start + steps],
            rewards[start : start + steps],
            terminals[start : start + steps],
        )
