"""Where the data root and the Minari datasets are (docs/datasets.md#the-data-root).

On the ground floor because two floors need the answer and neither may import the other: the data
sources (:mod:`offline_gitd.data`, which re-exports these from :mod:`offline_gitd.data.paths`) and
the leaderboard, which reads the references of the dataset a submitted run trained on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV_VAR = "OFFLINE_GITD_DATA"


def data_root(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Resolve the data root: explicit argument, then ``$OFFLINE_GITD_DATA``, then the cache dir."""
    if data_dir:
        return Path(data_dir).expanduser()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache_home) / "offline_gitd"


def minari_datasets_dir(data_dir: str | os.PathLike[str] | None, env: Mapping[str, str] = os.environ) -> Path:
    """Where Minari datasets live: ``{root}/minari`` when a data root is chosen (``data_dir``, else
    ``$OFFLINE_GITD_DATA``), else minari's own root (``$MINARI_DATASETS_PATH``, ``~/.minari``)."""
    if data_dir:
        return Path(data_dir).expanduser() / "minari"
    if env.get(ENV_VAR):
        return Path(env[ENV_VAR]).expanduser() / "minari"
    if env.get("MINARI_DATASETS_PATH"):
        return Path(env["MINARI_DATASETS_PATH"]).expanduser()
    return Path.home() / ".minari" / "datasets"
