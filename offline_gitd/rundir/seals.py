"""Checksums for what a run writes and later reads back, and saves that an interrupt cannot cut.

A run directory outlives the process that wrote it: disks fill, copies are cut short, bits flip.
orbax and pickle read such damage either with a traceback or, for flipped bytes, silently. Every
checkpoint therefore gets a SHA-256 digest of each of its files, computed from the bytes on disk
right after the save (the write is verified before it counts), and a resume checks the digest
before it trusts the files. Host-side state is *sealed*: one file holding a digest line and the
payload, so that the pair can never be torn apart by a crash.

A seal is a digest anyone can recompute, so it proves integrity, not origin: a run directory may
come from someone else (docs/bounds.md#run-directories-are-data). Its payload is therefore data
only: an npz archive of plain arrays plus one JSON document, read with ``allow_pickle=False``
after every member's declared size has been checked against the bytes on disk, so a hostile file
can neither run code nor make the reader allocate more than the file holds. Pickles, which run
code when read, are only read from runs made before this format, and only when the user vouches
for the run (``--trust-pickles``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import signal
import threading
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from offline_gitd.durable import replace_bytes, replace_json, replacing
from offline_gitd.errors import UsageError

_SEAL_MAGIC = b"offline_gitd-sha256 "
_CHUNK = 1 << 20
# The npz member holding a sealed archive's JSON document (scalars, lists, names).
_META = "meta.json"


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
    """Replace ``path`` with ``payload`` as JSON: a reader sees the old file or the new one, never
    half of one (:func:`offline_gitd.durable.replacing`)."""
    replace_json(path, payload)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``, as :func:`write_json_atomic` does."""
    replace_bytes(path, data)


def write_sealed_pickle(path: Path, obj: Any) -> None:
    """Pickle ``obj`` behind a digest line, atomically (kept to write the runs of older versions in
    tests; the package itself writes :func:`write_sealed_arrays`)."""
    _write_sealed(path, lambda f: pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL))


def write_sealed_arrays(path: Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
    """Write plain ``arrays`` and the JSON document ``meta`` as one npz archive behind a digest
    line, atomically; the file is read back and checked before it replaces the previous one."""
    if _META in arrays or any(not name or "/" in name for name in arrays):
        raise ValueError(f"array names must be non-empty, without '/', and not {_META!r}")
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    if any(value.dtype.hasobject for value in arrays.values()):
        raise ValueError("a sealed archive holds plain arrays only, not Python objects")
    document = np.frombuffer(json.dumps(meta, sort_keys=True, allow_nan=True).encode(), np.uint8)
    _write_sealed(path, lambda f: np.savez(f, allow_pickle=False, **{_META: document}, **arrays))


def _write_sealed(path: Path, write_payload: Any) -> None:
    """A digest line, then what ``write_payload(f)`` writes; verified, then renamed over ``path``
    (:func:`offline_gitd.durable.replacing`: a failed or refused save leaves the previous file and
    no temporary one)."""
    try:
        with replacing(path, mode="w+b", check=_check_seal) as f:
            f.write(_SEAL_MAGIC + b"0" * 64 + b"\n")
            start = f.tell()
            write_payload(f)
            f.flush()
            f.seek(start)
            digest = hashlib.sha256()
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
            f.seek(len(_SEAL_MAGIC))
            f.write(digest.hexdigest().encode())
    except OSError as err:
        raise DiskFull(
            f"cannot write {path}: {err.strerror or err}; the earlier checkpoints are intact: "
            "make room, then continue the run with --resume"
        ) from None


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
    truncated or altered. A pickle without a seal (from before seals existed) is read as it is.

    Unpickling runs whatever code the file names: call this only for a run the user vouched for
    (``--trust-pickles``); :func:`read_sealed_arrays` is the reader for everything else."""
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


def read_sealed_arrays(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(arrays, meta)`` of a file written by :func:`write_sealed_arrays`, checked first.

    :class:`DamagedFile` (one line) when it is missing, unsealed, truncated, altered, or holds
    anything but plain arrays whose sizes agree with the bytes stored: nothing in it is executed
    and no array larger than the file is ever allocated."""
    try:
        if not _check_seal(path):
            raise DamagedFile(f"{path} is not a sealed archive")
        with path.open("rb") as f:
            f.readline()
            start = f.tell()
            archive = zipfile.ZipFile(f)
            _check_members(path, archive, os.fstat(f.fileno()).st_size - start)
            f.seek(start)
            with np.load(f, allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
    except FileNotFoundError:
        raise DamagedFile(f"{path} is missing") from None
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, KeyError) as err:
        reason = (str(err).strip().splitlines() or [""])[0][:200]
        raise DamagedFile(f"{path} is not a readable archive ({type(err).__name__}: {reason})") from None
    document = arrays.pop(_META, None)
    if document is None or document.dtype != np.uint8 or document.ndim != 1:
        raise DamagedFile(f"{path} has no {_META}")
    try:
        meta = json.loads(document.tobytes())
    except (ValueError, RecursionError):
        raise DamagedFile(f"{path} has a damaged {_META}") from None
    if not isinstance(meta, dict):
        raise DamagedFile(f"{path} has a damaged {_META}")
    return arrays, meta


def _check_members(path: Path, archive: zipfile.ZipFile, payload_size: int) -> None:
    """Every member stored uncompressed, a plain ``.npy`` whose header's shape and dtype need
    exactly the bytes the member holds, and none bigger than the file: what bounds the reader's
    memory by the size on disk, whatever a header claims."""
    for info in archive.infolist():
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > payload_size:
            raise DamagedFile(f"{path}: member {info.filename!r} is compressed or larger than the file")
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(member)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(member)
            else:
                raise DamagedFile(f"{path}: member {info.filename!r} has an unknown header")
            header = member.tell()
        if dtype.hasobject:
            raise DamagedFile(f"{path}: member {info.filename!r} holds Python objects")
        count = 1
        for length in shape:
            count *= int(length)
        if count * dtype.itemsize != info.file_size - header:
            raise DamagedFile(
                f"{path}: member {info.filename!r} claims shape {tuple(shape)} but holds {info.file_size - header} bytes"
            )


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
