"""A run's shard lock file ``run_{N}.lock.json``: what the first verified download of each shard was.

The bucket publishes no checksums, so after a shard's first verified download its name, size and
sha256 are recorded here; later copies, mirrors and local files are then checked against the lock
without the server (docs/datasets.md). Several download threads and several fetch processes may
share one lock file: threads through :class:`LockBook`'s lock, processes through :func:`file_lock`
(both the file locks and the atomic rewrite of the lock file are :mod:`offline_gitd.durable`'s).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offline_gitd import durable
from offline_gitd.data.crc32c import crc32c
from offline_gitd.errors import UsageError

LOCK_FORMAT_VERSION = 1
_HASH_CHUNK_BYTES = 4 << 20


@dataclass(frozen=True)
class LockEntry:
    """One verified shard as recorded in the lock file."""

    name: str
    size: int
    sha256: str
    source: str = ""  # the URL its verified bytes came from ("" in lock files older than mirrors)


@dataclass(frozen=True)
class FileDigests:
    """Size and digests of a local file, computed in one pass."""

    size: int
    sha256: str
    crc32c: int
    md5: bytes


def lock_path(directory: Path, run: int) -> Path:
    """The lock file of one run's shards, beside them."""
    return directory / f"run_{run}.lock.json"


def hash_file(path: Path, server_hashes: bool = True) -> FileDigests:
    """Size and sha256 of a file, plus crc32c and md5 when ``server_hashes``, in one read.

    Checking a present shard against the lock needs sha256 only; skipping md5 and crc32c there
    keeps re-running a fetch over a 50 GB run cheap.
    """
    sha256, md5, crc, size = hashlib.sha256(), hashlib.md5(), 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK_BYTES):
            sha256.update(chunk)
            if server_hashes:
                md5.update(chunk)
                crc = crc32c(chunk, crc)
            size += len(chunk)
    return FileDigests(size=size, sha256=sha256.hexdigest(), crc32c=crc, md5=md5.digest())


def read_lock(path: Path) -> dict[str, LockEntry]:
    """Entries of a lock file ({} when absent); a malformed one is a one-line error."""
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        entries = [
            LockEntry(
                name=str(e["name"]), size=int(e["size"]), sha256=str(e["sha256"]), source=str(e.get("source", ""))
            )
            for e in raw["shards"]
        ]
        return {entry.name: entry for entry in entries}  # keyed by the name as read (str), as looked up
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"malformed lock file {path} ({err}); delete it to rebuild it") from err


@contextmanager
def file_lock(path: Path, stop: threading.Event | None = None, poll: float = 0.2) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if needed, never deleted: deleting it would let
    two processes lock two different files). With ``stop``, waiting gives up when it is set
    (:class:`offline_gitd.durable.LockWaitInterrupted`, saying so in one line)."""
    with ExitStack() as stack:
        try:
            stack.enter_context(
                durable.file_lock(
                    path, stop=stop, poll=poll, interrupted="interrupted while another fetch held this shard"
                )
            )
        except OSError as err:
            raise UsageError(f"cannot create or lock the lock file {path}: {err.strerror or err}") from None
        yield


class LockBook:
    """The run's lock file, shared by the download threads; each update is written atomically."""

    def __init__(self, path: Path, header: Mapping[str, Any]) -> None:
        self.path = path
        self.header = dict(header)
        self.entries = read_lock(path)
        self._lock = threading.Lock()

    def get(self, name: str) -> LockEntry | None:
        """The entry as on disk now: another fetch process may have recorded it meanwhile."""
        with self._lock:
            self.entries.update(read_lock(self.path))
            return self.entries.get(name)

    def record(self, entry: LockEntry) -> None:
        """Add ``entry``, merged with what other processes wrote (read under the file lock).
        A write that fails (a full disk) is one line and leaves no temp file."""
        with self._lock, file_lock(self.path.with_name(f".{self.path.name}.flock")):
            self.entries.update(read_lock(self.path))
            self.entries[entry.name] = entry
            payload = {
                "format_version": LOCK_FORMAT_VERSION,
                **self.header,
                "shards": [vars(e) for _, e in sorted(self.entries.items())],
            }
            try:
                durable.replace_text(self.path, json.dumps(payload, indent=1) + "\n")
            except OSError as err:
                raise UsageError(
                    f"cannot write {self.path}: {err.strerror or err}; the verified shards are kept "
                    "and rerunning the fetch records them once there is room"
                ) from None
