"""Dataset manifests: what a recorded Minari dataset holds, small enough to commit (docs/datasets.md#manifests).

The datasets the package records (``collect``) are regenerable but large (a 1M-step MinAtar replay
is about a gigabyte), so the repository keeps a manifest instead: per dataset its size, its
episodes and steps, a digest of its content and the references a board normalises by (the
behaviour agent's return per checkpoint, the uniform-random return, the behaviour's final return).
A dataset recorded again on another machine is checked against it with ``datasets manifest
--check``: the same digest means the same transitions, bit for bit.

The digest is of the content, not of the files: SHA-256 over every episode in order, each field
(observations, actions, rewards, terminations, truncations) as its dtype, shape and bytes. HDF5
files of equal content can differ byte for byte (object layout, free space), so hashing the
files would call equal recordings different.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from offline_gitd.durable import file_lock, replace_json

MANIFEST_VERSION = 1
FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")
# Metadata kept in a manifest: the references and the checkpoint cut (docs/minatar.md).
REFERENCE_KEYS = (
    "ref_min_score",
    "ref_max_score",
    "num_episodes_average_score",
    "checkpoint_every",
    "checkpoint_returns",
    # the final policy at the runs' evaluation protocol (collect records it, docs/datasets.md#collecting-datasets)
    "behaviour_eval_score",
    "behaviour_eval_episodes",
    "behaviour_eval_epsilon",
)
# What code and device recorded the data (collect's metadata, docs/datasets.md#collecting-datasets):
# kept in the manifest, which is committed where the data is not; not compared by --check, since the
# same content can come from another commit.
CODE_KEYS = (
    "code_version",
    "code_commit",
    "code_dirty",
    "code_diff_sha256",
    "code_commit_reason",
    "collected_on",
    "collected_cpu",
)


def _update(digest: Any, array: np.ndarray) -> None:
    """Fold one array into ``digest`` with its dtype and shape, so that equal bytes of another
    layout (a [2, 3] and a [3, 2] array) never hash alike."""
    array = np.ascontiguousarray(array)
    digest.update(f"{array.dtype.str}{list(array.shape)}".encode())
    digest.update(array.tobytes())


def content_digest(episodes: Iterable[Mapping[str, np.ndarray]]) -> str:
    """SHA-256 of ``episodes`` in order, each a mapping of :data:`FIELDS` to arrays (a dict
    observation space's parts in key order)."""
    digest = hashlib.sha256()
    for episode in episodes:
        for field in FIELDS:
            value = episode[field]
            if isinstance(value, Mapping):
                for key in sorted(value):
                    digest.update(f"{field}.{key}".encode())
                    _update(digest, np.asarray(value[key]))
            else:
                digest.update(field.encode())
                _update(digest, np.asarray(value))
    return digest.hexdigest()


def _episodes(dataset: Any) -> Iterable[dict[str, Any]]:
    for episode in dataset.iterate_episodes():
        yield {field: getattr(episode, field) for field in FIELDS}


def describe(dataset_id: str, path: Path, dataset: Any) -> dict[str, Any]:
    """One manifest entry for the Minari dataset ``dataset`` (stored at ``path``)."""
    from offline_gitd.data.inventory import directory_size

    metadata = dataset.storage.metadata
    return {
        "id": dataset_id,
        "env": (metadata.get("env_spec") and json.loads(metadata["env_spec"]).get("id")) or None,
        "episodes": int(dataset.total_episodes),
        "steps": int(dataset.total_steps),
        "bytes": int(directory_size(path)),
        "sha256": content_digest(_episodes(dataset)),
        "references": {key: metadata[key] for key in REFERENCE_KEYS if key in metadata},
        "recorded_by": metadata.get("description", "").split(" Config: ")[0],
        **({"recorded_with": code} if (code := {key: metadata[key] for key in CODE_KEYS if key in metadata}) else {}),
    }


def write_manifest(path: Path, entries: Sequence[Mapping[str, Any]]) -> None:
    """Replace the entries of ``entries``' ids in the manifest at ``path`` (others are kept, in
    id order): a manifest grows one dataset at a time as recordings finish.

    The manifest's other keys (its ``mirrors``) are kept, and so is an entry's ``pack`` when the
    entry written anew has none and the same content digest: the archive still restores it
    (docs/datasets.md#packs).

    The read and the write happen under the lock of ``PATH.lock``, so two writers at once (two
    ``datasets pack`` of one manifest's datasets) each add their entry: neither is lost."""
    with file_lock(manifest_lock(path)):
        document = read_manifest_document(path) if path.exists() else {"version": MANIFEST_VERSION, "datasets": []}
        kept = {entry["id"]: entry for entry in document["datasets"]}
        for entry in entries:
            new, old = dict(entry), kept.get(entry["id"], {})
            if "pack" not in new and "pack" in old and old.get("sha256") == new.get("sha256"):
                new["pack"] = old["pack"]
            kept[entry["id"]] = new
        document = dict(document, version=MANIFEST_VERSION, datasets=[kept[key] for key in sorted(kept)])
        replace_json(path, document)  # a reader sees the old manifest or the new one


def manifest_lock(path: Path) -> Path:
    """The lock file beside a manifest (``NAME.json.lock``, never committed) that its writers hold."""
    return path.with_name(path.name + ".lock")


def read_manifest_document(path: Path) -> dict[str, Any]:
    """The whole manifest: ``version``, ``datasets`` and, where packs are published, ``mirrors``
    (base URLs that keep each pack as ``BASE/FILE``, tried in order)."""
    document = json.loads(path.read_text())
    if not isinstance(document, dict) or document.get("version") != MANIFEST_VERSION:
        raise ValueError(f"{path}: not a version-{MANIFEST_VERSION} dataset manifest")
    if not isinstance(document.get("datasets"), list):
        raise ValueError(f"{path}: a manifest's datasets must be a list")
    mirrors = document.get("mirrors", [])
    if not isinstance(mirrors, list) or not all(isinstance(url, str) for url in mirrors):
        raise ValueError(f"{path}: a manifest's mirrors must be a list of URLs")
    return document


def read_manifest(path: Path) -> list[dict[str, Any]]:
    return list(read_manifest_document(path)["datasets"])


def differences(recorded: Mapping[str, Any], published: Mapping[str, Any]) -> list[str]:
    """What differs between a dataset as recorded here and its manifest entry: the content and
    its counts, and the references (the file size is left out: it depends on HDF5's layout)."""
    out = []
    for key in ("episodes", "steps", "sha256"):
        if recorded.get(key) != published.get(key):
            out.append(f"{key} {recorded.get(key)} here, {published.get(key)} in the manifest")
    mine, theirs = recorded.get("references", {}), published.get("references", {})
    for key in sorted(set(mine) | set(theirs)):
        if mine.get(key) != theirs.get(key):
            out.append(f"{key} {mine.get(key)} here, {theirs.get(key)} in the manifest")
    return out
