"""``config -> run dir``: the whole offline pipeline as one function (DESIGN §5).

Resolves the config against its dataset's domain, validates everything before any work starts,
builds the learner family for the action space, and hands both to the shared loop.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from offline_gitd.envs.make import SpaceInfo
from offline_gitd.errors import ConfigError
from offline_gitd.learners.config import OfflineConfig
from offline_gitd.learners.family import Family, make_discrete_family
from offline_gitd.learners.run import OfflineData, run_offline
from offline_gitd.scalars import Outputs


def build_family(cfg: OfflineConfig, data: OfflineData) -> Family:
    """The discrete (CQL-DQN) or continuous (CQL-SAC) family for the dataset's action space."""
    return family_for(cfg, data.spaces, data.replay.sample(1, np.random.default_rng(0)).obs)


def family_for(cfg: OfflineConfig, spaces: SpaceInfo, obs_example: np.ndarray) -> Family:
    """:func:`build_family` from the spaces and one network input (batch of 1) alone: what loading
    a trained run needs, without reading its dataset."""
    common = dict(mlp_hidden=cfg.hidden_sizes, lr=cfg.lr, adam_eps=cfg.adam_eps, cql_alpha=cfg.cql_alpha)
    if spaces.action_kind == "discrete":
        return make_discrete_family(
            cfg.critic_config(),
            spaces.action_size,
            obs_example,
            torso=cfg.torso,
            head_hidden=cfg.head_hidden,
            **common,
        )
    if cfg.torso != "mlp":
        raise ConfigError(f"continuous actions need the mlp torso, got --torso {cfg.torso}")
    from offline_gitd.learners.family import make_continuous_family

    return make_continuous_family(cfg.critic_config(), spaces.action_size, obs_example, spaces.action_bounds, **common)


def resolve_config(cfg: OfflineConfig) -> OfflineConfig:
    from offline_gitd.learners.datasets import dataset_domain

    if not cfg.dataset:
        raise ConfigError("--dataset is required (rlu-atari:GAME/RUN[:CHECKPOINTS] or minari:ID)")
    return cfg.resolve(dataset_domain(cfg.dataset, cfg.data_dir))


def train(cfg: OfflineConfig, *, resume: bool = False, progress: bool = True, outputs: Outputs | None = None) -> Path:
    """Train as ``cfg`` says (resolving domain defaults first) and return the run directory."""
    from offline_gitd.learners.datasets import open_offline_data

    cfg = resolve_config(cfg)
    data = open_offline_data(cfg)
    return run_offline(cfg, data, build_family(cfg, data), resume=resume, progress=progress, outputs=outputs)


def resume_config(run_dir: Path, epochs: int | None) -> OfflineConfig:
    """The saved config of ``run_dir``, optionally with more epochs (the one thing resume may change)."""
    from offline_gitd.learners.rundir import read_config

    saved = OfflineConfig(**read_config(run_dir)["config"])
    return dataclasses.replace(saved, epochs=epochs) if epochs else saved
