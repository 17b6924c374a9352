"""offline_gitd.config: typed run configs, their command-line flags and the paper's tables.

:mod:`~offline_gitd.config.fields` turns a dataclass into flags and checks values,
:mod:`~offline_gitd.config.base` holds the fields offline and online runs share and
:mod:`~offline_gitd.config.paper` the paper's hyperparameter tables, side by side.
"""
