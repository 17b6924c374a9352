"""The content digest of the data a run trains on: part of the run's identity (docs/leaderboard.md#what-made-a-row).

Two recordings of one dataset id can differ (XLA rounds differently on another CPU, so a behaviour
agent's greedy action flips and the replay diverges), and a run's config hash names the dataset by
its id only. A board row therefore also records the data's digest, and a sweep skips a run only
where config hash and digest both match.

For a Minari dataset the digest is the one dataset manifests record (:func:`offline_gitd.data.manifest.content_digest`,
docs/datasets.md#manifests), so a row can be checked against ``datasets/*.json`` directly. Reading
a gigabyte of episodes takes a while, so the digest is kept in the dataset's directory
(:data:`DIGEST_FILE`, beside its ``data/``) with the size and modification time of each of its data
files, and computed again only when one of them changed; a read-only dataset is digested each time. For RL Unplugged the shards are verified against
their lock file as they are fetched; the digest is the SHA-256 over the checkpoints' shard names
and their verified SHA-256s.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from offline_gitd.data.paths import data_root, minari_datasets_dir

DIGEST_FILE = "offline_gitd-content-digest.json"


def _files_stamp(dataset_dir: Path) -> dict[str, list[int]]:
    """``{relative path: [size, mtime_ns]}`` of every file of a dataset's ``data/`` but its
    ``metadata.json``, which changes without the transitions (references added after recording)."""
    stamp = {}
    for path in sorted((dataset_dir / "data").rglob("*")):
        if path.is_file() and path.name != "metadata.json":
            info = path.stat()
            stamp[path.relative_to(dataset_dir).as_posix()] = [info.st_size, info.st_mtime_ns]
    return stamp


def _cache_path(dataset_id: str, data_dir: str | None) -> Path:
    return minari_datasets_dir(data_dir) / dataset_id / DIGEST_FILE


def minari_digest(dataset_id: str, data_dir: str | None = None, dataset: Any = None) -> str:
    """The manifest's content digest of the local Minari dataset ``dataset_id`` (``dataset``: it,
    already loaded), from the kept digest while the dataset's files are unchanged."""
    dataset_dir = minari_datasets_dir(data_dir) / dataset_id
    stamp = _files_stamp(dataset_dir)
    cache = _cache_path(dataset_id, data_dir)
    try:
        kept = json.loads(cache.read_text())
        if kept.get("files") == stamp and isinstance(kept.get("sha256"), str):
            return str(kept["sha256"])
    except (OSError, ValueError, AttributeError):
        pass
    if dataset is None:
        import minari

        from offline_gitd.data.paths import use_minari_root

        use_minari_root(data_dir)
        dataset = minari.load_dataset(dataset_id)
    from offline_gitd.data.manifest import FIELDS, content_digest

    sha256 = content_digest(
        {field: getattr(episode, field) for field in FIELDS} for episode in dataset.iterate_episodes()
    )
    remember_minari_digest(dataset_id, data_dir, sha256)
    return sha256


def remember_minari_digest(dataset_id: str, data_dir: str | None, sha256: str) -> None:
    """Keep ``sha256`` as the digest of the dataset's files as they are now (best effort: a
    read-only dataset only means the digest is computed again next time)."""
    cache = _cache_path(dataset_id, data_dir)
    dataset_dir = minari_datasets_dir(data_dir) / dataset_id
    kept = {"sha256": sha256, "files": _files_stamp(dataset_dir)}
    try:
        temp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(kept, sort_keys=True))
        os.replace(temp, cache)
    except OSError:
        pass


def rlu_digest(lock: dict[str, Any], shard_names: Sequence[str]) -> str | None:
    """SHA-256 over the verified SHA-256 of each shard (``lock``: name -> entry with ``sha256``),
    in checkpoint order; ``None`` where a shard is not in the lock (never verified)."""
    digest = hashlib.sha256()
    for name in shard_names:
        entry = lock.get(name)
        if entry is None:
            return None
        digest.update(f"{name} {entry.sha256}\n".encode())
    return digest.hexdigest()


def dataset_digest(opened: Any) -> str | None:
    """The content digest of an opened dataset (:class:`offline_gitd.data.datasets.OpenedDataset`):
    Minari's as its manifest would record it, RL Unplugged's from its lock file; ``None`` where
    the shards were never verified."""
    from offline_gitd.data.registry import MinariId

    if isinstance(opened.parsed, MinariId):
        return minari_digest(opened.parsed.dataset_id, opened.data_dir, opened.minari)
    from offline_gitd.data.cache import find_shard
    from offline_gitd.data.lock_book import lock_path, read_lock
    from offline_gitd.data.paths import rlu_raw_dir
    from offline_gitd.data.registry import load_rlu_registry

    parsed = opened.parsed
    checkpoints = parsed.checkpoints or tuple(range(load_rlu_registry().num_shards(parsed.game)))
    raw = rlu_raw_dir(data_root(opened.data_dir), "atari_episodes_ordered", parsed.game)
    try:
        names = [find_shard(raw, parsed.run, checkpoint).name for checkpoint in checkpoints]
    except FileNotFoundError:
        return None
    return rlu_digest(read_lock(lock_path(raw, parsed.run)), names)
