"""offline_gitd: Gradient Iterated Temporal-Difference learning (Gi-TD), offline and online.

Data flows one way (docs/architecture.md#data-flows-one-way): ``data`` (sources, replay) -> ``offline`` / ``online``
(twin pipelines over the ``learners``' algorithms) -> run directory (``rundir``) -> ``leaderboard``.
The four critics in ``critics`` are pure loss functions over the multi-head networks of ``networks``.
"""

from offline_gitd.version import __version__

__all__ = ["__version__", "load_run"]


def load_run(path):  # noqa: ANN001, ANN201 - typed in offline_gitd.trained.load_run
    """Open a run directory: ``.metrics`` DataFrame, ``.policy(seed)``, ``.evaluate()`` (see
    :mod:`offline_gitd.trained`). Imported lazily so that ``import offline_gitd`` stays light."""
    from offline_gitd.trained import load_run as _load_run

    return _load_run(path)
