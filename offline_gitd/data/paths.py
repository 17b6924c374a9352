"""Where data lives on disk (docs/datasets.md).

One root holds everything: ``--data-dir``, else ``$OFFLINE_GITD_DATA``, else the user cache
directory (``$XDG_CACHE_HOME/offline_gitd`` or ``~/.cache/offline_gitd``). Below it:

    rlu_atari/raw/{layout}/{Game}/run_{N}-{i:05d}-of-{n:05d}    downloaded GZIP TFRecord shards
    rlu_atari/raw/{layout}/{Game}/run_{N}.lock.json            sizes and sha256 of verified shards
    rlu_atari/cache/{Game}/run_{N}/checkpoint_{i:02d}/          decoded memory-mapped arrays
    minari/                                                    Minari datasets

``minari/`` is used whenever a data root is chosen (``--data-dir`` or ``$OFFLINE_GITD_DATA``), so
one setting moves all data; the package points ``minari`` at it through ``$MINARI_DATASETS_PATH``
(plain minari loads those datasets with ``MINARI_DATASETS_PATH=ROOT/minari``). With neither set,
Minari datasets stay where the ``minari`` package keeps them (``$MINARI_DATASETS_PATH``, default
``~/.minari/datasets``), so datasets fetched or collected here load with plain minari too.

``layout`` is ``atari_episodes_ordered`` or ``atari`` (the bucket's own folder names), so a mirror
of the bucket and the raw folder have the same shape.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

# Re-exported: where the data root and the Minari datasets are is decided in one ground-floor module.
from offline_gitd.data_roots import ENV_VAR as ENV_VAR
from offline_gitd.data_roots import data_root as data_root
from offline_gitd.data_roots import minari_datasets_dir as minari_datasets_dir


def data_dir_flag(data_dir: str | os.PathLike[str] | None) -> str:
    """`` --data-dir D`` (shell-quoted) for a command the CLI prints as a hint, empty without
    one, so that the hint finds the same data when pasted as it is."""
    return f" --data-dir {shlex.quote(str(data_dir))}" if data_dir else ""


def rlu_raw_dir(root: Path, layout: str, game: str) -> Path:
    """Folder holding one game's downloaded shards of one bucket layout."""
    return root / "rlu_atari" / "raw" / layout / game


def rlu_shard_name(run: int, shard: int, num_shards: int) -> str:
    """The bucket's file name of shard ``shard`` of run ``run`` (``run_1-00003-of-00050``)."""
    return f"run_{run}-{shard:05d}-of-{num_shards:05d}"


def rlu_cache_dir(root: Path, game: str, run: int, checkpoint: int) -> Path:
    """Folder of one checkpoint's decoded, memory-mapped arrays."""
    return root / "rlu_atari" / "cache" / game / f"run_{run}" / f"checkpoint_{checkpoint:02d}"


def use_minari_root(data_dir: str | os.PathLike[str] | None) -> Path:
    """Point the ``minari`` package at the datasets of the data root (``data_dir``, else
    ``$OFFLINE_GITD_DATA``); without either, minari keeps its own root."""
    root = minari_datasets_dir(data_dir)
    if data_dir or os.environ.get(ENV_VAR):
        os.environ["MINARI_DATASETS_PATH"] = str(root)
    return root
