"""offline_gitd: Gradient Iterated Temporal-Difference learning (Gi-TD), offline and online.

Data flows one way (DESIGN §1): ``data`` sources -> ``data`` replay -> ``learners`` / ``online``
-> run directory -> ``leaderboard``. The four critics in ``critics`` are pure loss functions over
the multi-head networks of ``networks``.
"""

__version__ = "0.1.0"
