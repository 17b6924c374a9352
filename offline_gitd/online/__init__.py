"""offline_gitd.online: the online learners and the ``collect`` data source (docs/online.md).

* :mod:`.config`    ``OnlineConfig`` and the paper's defaults (Atari DQN, Gym data-collection and
  MuJoCo SAC tables; ``--preset strong``).
* :mod:`.schedules` pure epsilon and UTD arithmetic.
* :mod:`.replay`    the shared replay restricted to its newest ``replay_size`` rows.
* :mod:`.train`     env inspection, input checks, the learner family (the offline families with
  ``cql_alpha = 0``).
* :mod:`.loop`      all seeds in lockstep, logging, checkpoints with exact resume.
* :mod:`.collect`   ``offline_gitd collect``: train a behaviour agent and record it with Minari.
* :mod:`.command`   ``offline_gitd online dqn|sac`` and ``offline_gitd collect``.
"""
