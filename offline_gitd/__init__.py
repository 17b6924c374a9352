"""offline_gitd: Gradient Iterated Temporal-Difference learning (Gi-TD), offline and online.

Data flows one way (docs/architecture.md#data-flows-one-way): ``data`` (sources, replay) -> ``offline`` / ``online``
(twin pipelines over the ``learners``' algorithms) -> run directory (``rundir``) -> ``leaderboard``.
The critics in ``critics`` are pure loss functions over the multi-head networks of ``networks``;
:mod:`offline_gitd.critic_registry` lists them, third-party plug-ins included.

The Python API (docs/python-api.md) is the command line's own functions::

    import offline_gitd
    run = offline_gitd.train({"dataset": "minari:offline_gitd/CartPole-v1/dqn-v0", "critic": "gitd",
                              "out": "runs/cp-gitd"})
    run.metrics                                  # metrics.csv as a DataFrame
    offline_gitd.online("online.toml")           # a TOML file, or a run's config.json
    offline_gitd.load_run("runs/cp-gitd").evaluate(episodes=10)

Each function imports its pipeline when called, so ``import offline_gitd`` stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline_gitd.version import __version__

if TYPE_CHECKING:
    from offline_gitd.offline.config import OfflineConfig
    from offline_gitd.online.config import OnlineConfig
    from offline_gitd.trained import Run

__all__ = ["__version__", "load_run", "online", "train"]


def train(
    config: OfflineConfig | dict[str, Any] | str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    tensorboard: bool = True,
) -> Run:
    """Train offline, as ``offline_gitd train`` does, and open the finished run: CQL over any
    critic, or a baseline (``algo``: ``bc``, ``td3bc``, ``iql``; docs/offline.md#baselines).

    ``config``: an :class:`~offline_gitd.offline.config.OfflineConfig`, a dict of its fields, or a
    file (TOML, or a run's ``config.json`` to run it again). Fields left unset take the paper's
    defaults for the dataset's domain; ``out`` (the run directory) and ``dataset`` are required.
    ``resume`` continues the run in ``out`` from its last checkpoint, ``overwrite`` replaces it.
    Bad input raises :class:`~offline_gitd.errors.UsageError` before anything is written.
    """
    from offline_gitd.config.files import config_from
    from offline_gitd.offline.config import OfflineConfig
    from offline_gitd.offline.train import train as train_offline
    from offline_gitd.rundir.flags import Outputs
    from offline_gitd.xla_start import prepare_xla

    prepare_xla()  # before the run starts JAX (docs/bounds.md#determinism, docs/offline.md#seeds)
    cfg = config_from(config, OfflineConfig)
    cfg.check_flags()
    run_dir = train_offline(
        cfg, resume=resume, overwrite=overwrite, progress=progress, outputs=Outputs(tensorboard=tensorboard)
    )
    return load_run(run_dir)


def online(
    config: OnlineConfig | dict[str, Any] | str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    tensorboard: bool = True,
) -> Run:
    """Train a critic online (``algo`` ``dqn`` or ``sac``), as ``offline_gitd online`` does, and
    open the finished run.

    ``config``: an :class:`~offline_gitd.online.config.OnlineConfig`, a dict of its fields, or a
    file (TOML, or a run's ``config.json``); ``env`` and ``out`` are required, the rest defaults to
    the paper's table for the env. ``init_from`` starts from an offline run's checkpoint
    (docs/python-api.md#offline-to-online). ``resume`` and ``overwrite`` as for :func:`train`.
    """
    from offline_gitd.config.files import config_from
    from offline_gitd.online.config import OnlineConfig
    from offline_gitd.online.train import train as train_online
    from offline_gitd.rundir.flags import Outputs
    from offline_gitd.xla_start import prepare_xla

    prepare_xla()
    if isinstance(config, dict) and config.get("init_from"):  # unset network fields: the offline run's
        from offline_gitd.online.origin import inherit_network

        config = inherit_network(config)
    cfg = config_from(config, OnlineConfig)
    cfg.check_flags()
    run_dir = train_online(
        cfg, resume=resume, overwrite=overwrite, progress=progress, outputs=Outputs(tensorboard=tensorboard)
    )
    return load_run(run_dir)


def load_run(path: str | Path) -> Run:
    """Open a run directory: its ``.config``, ``.metrics`` / ``.results`` DataFrames,
    ``.policy(seed)`` and ``.evaluate()`` (see :class:`offline_gitd.trained.Run`)."""
    from offline_gitd.trained import load_run as open_run

    return open_run(path)
