"""offline_gitd.leaderboard: result boards of run scores (docs/leaderboard.md).

``schema`` (the result row), ``reference`` (reference scores, known envs), ``normalise`` and
``stats`` (pure math over a frame of rows), ``submit`` (validated, locked, atomic appends),
``show`` / ``plot`` / ``html`` (the outputs), ``behaviour`` (the behaviour agents' curves kept
beside a board), ``command`` (the CLI).
"""
