"""``config -> run dir``: the whole offline pipeline as one function (docs/architecture.md#a-run-is-a-function-of-its-config).

Resolves the config against its dataset's domain, validates everything before any work starts,
builds the learner family for the action space, and hands both to the shared loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from offline_gitd.choices import CONTINUOUS_ONLY_ALGOS
from offline_gitd.data.datasets import OfflineData
from offline_gitd.envs.make import SpaceInfo
from offline_gitd.errors import ConfigError
from offline_gitd.learners.family import Family, make_discrete_family
from offline_gitd.networks import check_torso
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.offline.loop import run_offline
from offline_gitd.rundir.files import absolute, check_run_dir, resumed_config
from offline_gitd.rundir.flags import Outputs
from offline_gitd.rundir.lock import hold_run_dir


def build_family(cfg: OfflineConfig, data: OfflineData) -> Family:
    """The learner family of ``cfg.algo`` for the dataset's action space."""
    return family_for(cfg, data.spaces, data.replay.sample(1, np.random.default_rng(0)).obs)


def family_for(cfg: OfflineConfig, spaces: SpaceInfo, obs_example: np.ndarray) -> Family:
    """:func:`build_family` from the spaces and one network input (batch of 1) alone: what loading
    a trained run needs, without reading its dataset. Each algorithm's module is imported when chosen."""
    discrete = spaces.action_kind == "discrete"
    if cfg.algo in CONTINUOUS_ONLY_ALGOS and discrete:
        raise ConfigError(f"--algo {cfg.algo} is for continuous actions; this dataset's are discrete (use cql or bc)")
    if not discrete and cfg.torso != "mlp":
        raise ConfigError(f"continuous actions need the mlp torso, got --torso {cfg.torso}")
    optimiser = dict(mlp_hidden=cfg.hidden_sizes, lr=cfg.lr, adam_eps=cfg.adam_eps)
    if cfg.algo == "bc":
        from offline_gitd.learners.bc import make_continuous_bc_family, make_discrete_bc_family

        if discrete:
            return make_discrete_bc_family(spaces.action_size, obs_example, torso=cfg.torso, **optimiser)
        return make_continuous_bc_family(spaces.action_size, obs_example, spaces.action_bounds, **optimiser)
    if discrete:
        return make_discrete_family(
            cfg.critic_config(),
            spaces.action_size,
            obs_example,
            torso=cfg.torso,
            head_hidden=cfg.head_hidden,
            cql_alpha=cfg.cql_alpha,
            **optimiser,
        )
    continuous = (cfg.critic_config(), spaces.action_size, obs_example, spaces.action_bounds)
    if cfg.algo == "td3bc":
        from offline_gitd.learners.td3bc import make_td3bc_family

        return make_td3bc_family(
            *continuous,
            **optimiser,
            bc_alpha=cfg.bc_alpha,
            policy_noise=cfg.policy_noise,
            noise_clip=cfg.noise_clip,
            policy_delay=cfg.policy_delay,
        )
    if cfg.algo == "iql":
        from offline_gitd.learners.iql import make_iql_family

        return make_iql_family(*continuous, **optimiser, expectile=cfg.expectile, temperature=cfg.iql_temperature)
    from offline_gitd.learners.family import make_continuous_family

    # One --mlp-hidden sets the critics and the actor (the MuJoCo table has FC 256 - FC 256 for both), as online.
    return make_continuous_family(*continuous, actor_hidden=cfg.hidden_sizes, cql_alpha=cfg.cql_alpha, **optimiser)


def resolve_config(cfg: OfflineConfig) -> OfflineConfig:
    """Fill the dataset's domain defaults; a run that names no ``--torso`` gets the one its
    observations call for (:func:`~offline_gitd.networks.torso_for_shape`: images -> a CNN,
    MinAtar boards -> ``minatar``, vectors -> ``mlp``)."""
    from offline_gitd.data.datasets import dataset_profile
    from offline_gitd.networks import torso_for_shape

    if not cfg.dataset:
        raise ConfigError("--dataset is required (rlu-atari:GAME/RUN[:CHECKPOINTS] or minari:ID)")
    domain, obs_shape = dataset_profile(cfg.dataset, cfg.data_dir)
    if cfg.torso is None:
        cfg = dataclasses.replace(cfg, torso=torso_for_shape(obs_shape))
    return cfg.resolve(domain)


def train(
    cfg: OfflineConfig,
    *,
    resume: bool = False,
    progress: bool = True,
    overwrite: bool = False,
    command_line: Sequence[str] | None = None,
    outputs: Outputs | None = None,
) -> Path:
    """Train as ``cfg`` says (resolving domain defaults first) and return the run directory.

    Everything is validated (flags, run directory, dataset, network against observations) before
    the run directory is written, under its lock (docs/locks.md), held until the run ends; ``command_line`` is recorded in its provenance; ``outputs`` says
    where the scalars go besides ``metrics.csv`` (TensorBoard, wandb).
    """
    from offline_gitd.data.datasets import open_offline_data

    cfg = absolute_paths(cfg)
    with hold_run_dir(Path(cfg.out)):  # the run's one writer, from its first check to its last row
        check_run_dir(Path(cfg.out), resume, overwrite)
        cfg = resolve_config(cfg)
        data = open_offline_data(cfg)
        # The network's input as the replay gives it (stacked frames, whole images or flat vectors).
        check_torso(cfg.torso, data.replay.sample(1, np.random.default_rng(0)).obs.shape[1:], data.description)
        family = build_family(cfg, data)
        return run_offline(
            cfg,
            data,
            family,
            resume=resume,
            progress=progress,
            overwrite=overwrite,
            command_line=command_line,
            outputs=outputs,
        )


def absolute_paths(cfg: OfflineConfig) -> OfflineConfig:
    """``--out`` and ``--data-dir`` made absolute, so ``config.json`` holds nothing relative to the
    directory a run was started from."""
    out = absolute(cfg.out) if cfg.out else cfg.out
    data_dir = absolute(cfg.data_dir) if cfg.data_dir else cfg.data_dir
    return dataclasses.replace(cfg, out=out, data_dir=data_dir)


# Where a run is, where its data lives and where its frames are kept may change on resume (a moved
# run, another machine, another device); what is learned may not.
RESUME_FREE = ("out", "data_dir", "frames")


def resume_config(run_dir: Path, given: Mapping[str, Any] | None = None) -> OfflineConfig:
    """The saved config of the run in ``run_dir`` (wherever it now is), with the flags ``given``
    on the command line: ``--epochs`` may extend the run, any other difference is refused."""
    return resumed_config(OfflineConfig, run_dir, given, "epochs", RESUME_FREE)
