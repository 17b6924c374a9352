"""Checksums for what a run writes and later reads back, and saves that an interrupt cannot cut.

A run directory outlives the process that wrote it: disks fill, copies are cut short, bits flip.
orbax and pickle read such damage either with a traceback or, for flipped bytes, silently. Every
checkpoint therefore gets a SHA-256 digest of each of its files, computed from the bytes on disk
right after the save (the write is verified before it counts), and a resume checks the digest
before it trusts the files. Host-side pickles are *sealed*: one file holding a digest line and the
pickle, so that the pair can never be torn apart by a crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import signal
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from offline_gitd.errors import UsageError

_SEAL_MAGIC = b"offline_gitd-sha256 "
_CHUNK = 1 << 20


class DamagedFile(UsageError):
    """A file the package wrote earlier no longer holds what it wrote (truncated, altered)."""


class DiskFull(UsageError):
    """A save the disk refused (full, over quota, file too large): nothing to fix in the code."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, carrying the one line that tells the user how to continue."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_sha256(directory: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``directory`` (sorted, POSIX separators)."""
    return {
        path.relative_to(directory).as_posix(): file_sha256(path)
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def tree_problem(directory: Path, expected: Mapping[str, str]) -> str | None:
    """Why ``directory`` differs from the digest ``expected``; ``None`` when it matches exactly."""
    if not directory.is_dir():
        return "its directory is missing"
    actual = tree_sha256(directory)
    for name in sorted(expected):
        if name not in actual:
            return f"{name} is missing"
        if actual[name] != expected[name]:
            return f"{name} fails its checksum"
    extra = sorted(set(actual) - set(expected))
    return f"{extra[0]} was not part of the save" if extra else None


def write_json_atomic(path: Path, payload: Mapping) -> None:
    """Write, fsync, rename: a reader sees the old file or the new one, never half of one."""
    write_bytes_atomic(path, (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode())


def write_bytes_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class _HashingWriter:
    """A binary file that hashes what goes through it (pickle streams into it: no second copy)."""

    def __init__(self, f: BinaryIO) -> None:
        self.f, self.digest = f, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.f.write(data)


def write_sealed_pickle(path: Path, obj: Any) -> None:
    """Pickle ``obj`` behind a digest line, atomically; the file is read back and checked before
    it replaces the previous one (the verification of the write)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w+b") as f:
            f.write(_SEAL_MAGIC + b"0" * 64 + b"\n")
            writer = _HashingWriter(f)
            pickle.dump(obj, writer, protocol=pickle.HIGHEST_PROTOCOL)
            f.seek(len(_SEAL_MAGIC))
            f.write(writer.digest.hexdigest().encode())
            f.flush()
            os.fsync(f.fileno())
        _check_seal(tmp)
        os.replace(tmp, path)
    except OSError as err:
        raise DiskFull(
            f"cannot write {path}: {err.strerror or err}; the earlier checkpoints are intact: "
            "make room, then continue the run with --resume"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def _check_seal(path: Path) -> bool:
    """True when ``path`` is sealed and intact, False when it has no seal (an older file);
    :class:`DamagedFile` when the payload does not match its digest."""
    with path.open("rb") as f:
        header = f.readline()
        if not header.startswith(_SEAL_MAGIC):
            return False
        digest = hashlib.sha256()
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest().encode() != header[len(_SEAL_MAGIC) :].strip():
        raise DamagedFile(f"{path} fails its checksum (truncated or altered)")
    return True


def read_sealed_pickle(path: Path) -> Any:
    """The object in a sealed pickle, checked first; :class:`DamagedFile` when it is missing,
    truncated or altered. A pickle without a seal (from before seals existed) is read as it is."""
    try:
        sealed = _check_seal(path)
        with path.open("rb") as f:
            if sealed:
                f.readline()
            return pickle.load(f)
    except FileNotFoundError:
        raise DamagedFile(f"{path} is missing") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as err:
        raise DamagedFile(f"{path} cannot be unpickled ({type(err).__name__})") from None


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold Ctrl-C until the block ends, then raise it: a save is either whole or not started.
    A second Ctrl-C interrupts at once.

    Only the main thread receives signals; elsewhere (a Ray worker thread) the block runs as is.
    """
    previous = signal.getsignal(signal.SIGINT)
    if (
        threading.current_thread() is not threading.main_thread()
        or previous is None  # a handler installed outside Python: leave it alone
        or isinstance(previous, _Deferral)  # nested: the outer block already holds Ctrl-C
    ):
        yield
        return
    deferral = _Deferral()
    signal.signal(signal.SIGINT, deferral)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if deferral.received:
        raise KeyboardInterrupt


class _Deferral:
    """The SIGINT handler while a save runs: remember the first Ctrl-C, do not interrupt; a second
    one interrupts at once (a save that hangs must not trap the user; resume clears its leftovers)."""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.received:
            raise KeyboardInterrupt
        self.received = True


@contextlib.contextmanager
def resume_hint(command: str) -> Iterator[None]:
    """Turn Ctrl-C inside the block into one line naming the command that continues the run."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; resume with: {command}") from None
