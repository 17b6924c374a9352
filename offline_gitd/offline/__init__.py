"""offline_gitd.offline: ``offline_gitd train``, dataset id + config -> run directory (docs/offline.md).

The offline twin of :mod:`offline_gitd.online`: each has its command, config, train (config -> run
dir) and loop, over the shared floors: :mod:`offline_gitd.learners` (the algorithms),
:mod:`offline_gitd.rundir` (the run directory's one lifecycle) and :mod:`offline_gitd.data`.
"""
