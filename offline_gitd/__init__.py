"""offline_gitd: Gradient Iterated Temporal-Difference learning (Gi-TD), offline and online.

Data flows one way (DESIGN §1): ``data`` sources -> ``data`` replay -> ``learners`` / ``online``
-> run directory -> ``leaderboard``. The four critics in ``critics`` are pure loss functions over
the multi-head networks of ``networks``.
"""

__version__ = "0.2.0"


def load_run(path):  # noqa: ANN001, ANN201 - typed in offline_gitd.runs.load_run
    """Open a run directory: ``.metrics`` DataFrame, ``.policy(seed)``, ``.evaluate()`` (see
    :mod:`offline_gitd.runs`). Imported lazily so that ``import offline_gitd`` stays light."""
    from offline_gitd.runs import load_run as _load_run

    return _load_run(path)
