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

from offline_gitd.algorithm_registry import algorithm_spec
from offline_gitd.data.datasets import OfflineData, OpenedDataset
from offline_gitd.envs.make import SpaceInfo
from offline_gitd.errors import ConfigError
from offline_gitd.learners.family import Family
from offline_gitd.networks import check_torso
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.offline.loop import run_offline
from offline_gitd.rundir.files import absolute, check_run_dir, resumed_config
from offline_gitd.rundir.flags import Outputs, RunFlags
from offline_gitd.rundir.lock import hold_run_dir


def build_family(cfg: OfflineConfig, data: OfflineData) -> Family:
    """The learner family of ``cfg.algo`` for the dataset's action space."""
    return family_for(cfg, data.spaces, data.replay.sample(1, np.random.default_rng(0)).obs)


def family_for(cfg: OfflineConfig, spaces: SpaceInfo, obs_example: np.ndarray) -> Family:
    """:func:`build_family` from the spaces and one network input (batch of 1) alone: what loading
    a trained run needs, without reading its dataset. The algorithm's record (offline_gitd.algorithm_registry)
    says which actions it takes and names its builder, whose module is imported when chosen."""
    spec = algorithm_spec(cfg.algo)
    spec.check_action_kind(spaces.action_kind)
    if spaces.action_kind != "discrete" and cfg.torso != "mlp":
        raise ConfigError(f"continuous actions need the mlp torso, got --torso {cfg.torso}")
    return spec.load_family()(cfg, spaces, obs_example)


def open_config_dataset(cfg: OfflineConfig) -> OpenedDataset:
    """The dataset ``cfg`` names, opened once for the whole run (:func:`resolve_config`, then
    :func:`~offline_gitd.data.datasets.open_offline_data`)."""
    from offline_gitd.data.datasets import open_dataset

    if not cfg.dataset:
        raise ConfigError("--dataset is required (rlu-atari:GAME/RUN[:CHECKPOINTS] or minari:ID)")
    return open_dataset(cfg.dataset, cfg.data_dir)


def resolve_config(cfg: OfflineConfig, dataset: OpenedDataset | None = None) -> OfflineConfig:
    """Fill the dataset's domain defaults; a run that names no ``--torso`` gets the one its
    observations call for (:func:`~offline_gitd.networks.torso_for_shape`: images -> a CNN,
    MinAtar boards -> ``minatar``, vectors -> ``mlp``). ``dataset``: ``cfg``'s, already opened."""
    from offline_gitd.networks import torso_for_shape

    domain, obs_shape = (dataset or open_config_dataset(cfg)).profile
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
    from offline_gitd.data.digest import dataset_digest

    flags = RunFlags(resume, progress, overwrite, command_line, outputs)
    cfg = absolute_paths(cfg)
    with hold_run_dir(Path(cfg.out)):  # the run's one writer, from its first check to its last row
        check_run_dir(Path(cfg.out), flags.resume, flags.overwrite)
        dataset = open_config_dataset(cfg)
        cfg = resolve_config(cfg, dataset)
        data = open_offline_data(cfg, dataset)
        # what the rows are tied to: the data's content, as its manifest records it
        data = dataclasses.replace(data, data_sha256=dataset_digest(dataset))
        # The network's input as the replay gives it (stacked frames, whole images or flat vectors).
        check_torso(cfg.torso, data.replay.sample(1, np.random.default_rng(0)).obs.shape[1:], data.description)
        family = build_family(cfg, data)
        return run_offline(cfg, data, family, flags)


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
