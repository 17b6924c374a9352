"""Durable files and locks: the one module that replaces a file or locks one (docs/architecture.md#ground).

**Replacing a file.** A file that readers or a later process trust (a run's ``config.json``,
digests and sealed host states, a sweep's state, a board and its references, a shard lock book, a
dataset manifest) is never rewritten in place. :func:`replacing` writes the new content to a
temporary file beside it under a unique name, fsyncs it, optionally checks it, renames it over the
file with ``os.replace`` and fsyncs the directory, so that the rename itself survives a power cut
(where the filesystem can sync a directory). A reader, or a crash at any moment, finds the old file
or the new one under the final name, never half of one or a torn last line; a write that fails (a
full disk, an exception in the caller's block, a failed check) removes its temporary file and leaves
the old file as it was. Only a process killed outright (SIGKILL, power loss) can leave a temporary
file behind: it is named ``.<name>.<random>.tmp`` (``prefix`` changes the part before the random
one, so that ``leaderboard submit`` can name the writer and remove the files of dead ones), so it
is hidden and never taken for the file. The new file keeps the old one's permissions; a new one
gets those ``open`` would give it (0o666 less the umask).

:func:`move_into_place` is the rename alone, for a file that is complete and synced where it
already is (a verified download's ``.part``, the run lock's replacement lock file, which must stay
open and locked across the rename).

**Locks.** :func:`file_lock` holds the kernel's ``flock`` on a file (exclusive, or shared by
readers) for a block; :func:`lock_descriptor` locks a descriptor its caller opened (the run lock,
whose holder writes its record into the locked file itself; an appender locking the file it
appends to). The kernel releases a ``flock`` when its holder exits or is killed, SIGKILL included,
so no lock outlives its process. :func:`file_lock` never deletes its file: a lock file deleted while
another process waits on it lets two processes lock two different files (the run lock, which
removes its file on release, checks after locking that its file is still the one at the path).

**Why not ``filelock``.** The ``filelock`` package is installed (Ray and huggingface_hub depend on
it, at whatever version they allow) and covers one need here: a plain exclusive lock on a side
file (the board's, the shard locks'). It does not cover the rest. It takes no shared ``flock`` (its
read-write lock is built on SQLite); it waits by polling where a blocking ``flock`` wakes at once;
where ``flock`` answers ENOSYS it falls back by default to a lock of another kind, while the run
lock must know that it holds no kernel lock (it then trusts the holder's record alone); its leases
keep a record of their own and expire by the waiter's clock, while the run lock's holder record,
heartbeat and takeover line are documented behaviour (docs/locks.md). The contract the side-file
locks rely on, a lock file that is never deleted and never truncated by a waiter, is one that some
of its releases broke (some deleted the file on release, some truncated it on every attempt), and the
version installed here is chosen by other packages. What it would replace is the few lines of
:func:`lock_descriptor`; adopting it for the side-file locks alone would add a direct dependency
and a second way of locking beside the one the run lock needs anyway.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

TEMP_SUFFIX = ".tmp"
# flock's answers for "another process holds it" to a non-blocking request
_CONTENTION = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})
# fsync's answers on a directory it cannot sync (some network and FUSE filesystems): nothing to do
_NO_DIRECTORY_SYNC = frozenset({errno.EINVAL, errno.EBADF, errno.ENOTSUP, errno.EOPNOTSUPP})
_WRITE_MODES = ("wb", "w+b", "w", "w+")


class LockWaitInterrupted(Exception):
    """Waiting for a :func:`file_lock` held by another process was given up because ``stop`` was set."""


def temp_prefix(path: Path) -> str:
    """The default start of a temporary file's name for ``path``: ``.<name>.``."""
    return f".{path.name}."


def _create_temp(path: Path, prefix: str) -> tuple[int, Path]:
    """Create a new, empty temporary file beside ``path`` named ``<prefix><random>.tmp``.

    ``O_EXCL`` makes the name this call's alone; mode 0o666 lets the kernel apply the umask (and a
    directory's default ACL) as for any new file, where ``tempfile.mkstemp`` would give 0o600."""
    for _ in range(100):
        temp = path.with_name(f"{prefix}{secrets.token_hex(4)}{TEMP_SUFFIX}")
        try:
            return os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), temp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(path.parent))


def fsync_directory(directory: Path) -> None:
    """Sync ``directory``'s entries to disk, so that a rename in it survives a power cut.

    A directory that cannot be opened for reading, or a filesystem that cannot sync one, is left
    as it is (the rename is then as durable as that filesystem makes it); an I/O error is raised."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    except PermissionError:
        return
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in _NO_DIRECTORY_SYNC:
            raise
    finally:
        os.close(fd)


@contextmanager
def replacing(
    path: Path,
    *,
    mode: str = "wb",
    encoding: str | None = None,
    prefix: str | None = None,
    check: Callable[[Path], object] | None = None,
) -> Iterator[IO[Any]]:
    """Replace ``path`` with what the block writes to the yielded file, atomically and durably.

    The file is a new temporary file beside ``path`` (:func:`temp_prefix`, or ``prefix``), opened
    with ``mode`` (``wb``, ``w+b`` to read back what was written, ``w`` or ``w+`` for text in
    ``encoding``, UTF-8 by default). When the block ends, the file is flushed, fsynced and closed;
    ``check(temp_path)`` may then refuse it by raising; it is renamed over ``path`` and the
    directory synced. If anything before the rename fails, the temporary file is removed and the
    error raised: ``path`` is untouched.
    """
    if mode not in _WRITE_MODES:
        raise ValueError(f"mode must be one of {_WRITE_MODES}, not {mode!r}")
    if "b" not in mode and encoding is None:
        encoding = "utf-8"
    fd, temp = _create_temp(path, temp_prefix(path) if prefix is None else prefix)
    try:
        try:
            os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode))  # the replaced file's permissions
        except FileNotFoundError:
            pass
        with open(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if check is not None:
            check(temp)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def replace_bytes(
    path: Path, data: bytes, *, prefix: str | None = None, check: Callable[[Path], object] | None = None
) -> None:
    """Replace ``path`` with ``data`` (:func:`replacing`): a reader sees the old file or the new one."""
    with replacing(path, prefix=prefix, check=check) as handle:
        handle.write(data)


def replace_text(path: Path, text: str, *, encoding: str = "utf-8", prefix: str | None = None) -> None:
    """Replace ``path`` with ``text`` (:func:`replacing`)."""
    replace_bytes(path, text.encode(encoding), prefix=prefix)


def replace_json(path: Path, document: Any, *, indent: int | None = 2, sort_keys: bool = True) -> None:
    """Replace ``path`` with ``document`` as JSON and a final newline (:func:`replacing`)."""
    replace_text(path, json.dumps(document, indent=indent, sort_keys=sort_keys) + "\n")


def move_into_place(source: Path, path: Path) -> None:
    """Rename ``source``, a complete file already synced to disk, over ``path`` in the same
    directory, and sync the directory: ``path`` holds the old file or ``source``, never a mix."""
    os.replace(source, path)
    fsync_directory(path.parent)


def lock_descriptor(fd: int, *, shared: bool = False, blocking: bool = True) -> bool:
    """Take the kernel's ``flock`` on the open file ``fd``: exclusive, or ``shared`` with other
    shared holders. Blocking, it waits for the lock; non-blocking, it answers ``False`` when
    another open file holds it. Any other failure is raised as it is: ``ENOLCK``, ``EOPNOTSUPP``
    or ``ENOSYS`` where the filesystem has no file locks (the run lock handles that case itself).

    The lock belongs to the open file: it lasts until every descriptor of it is closed, and two
    opens of one path in one process exclude each other like two processes do."""
    operation = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if blocking else fcntl.LOCK_NB)
    try:
        fcntl.flock(fd, operation)
    except OSError as err:
        if not blocking and err.errno in _CONTENTION:
            return False
        raise
    return True


@contextmanager
def file_lock(
    path: Path,
    *,
    shared: bool = False,
    stop: threading.Event | None = None,
    poll: float = 0.2,
    interrupted: str = "interrupted while waiting for a lock",
    flags: int = os.O_RDWR | os.O_CREAT,
) -> Iterator[int]:
    """Hold the ``flock`` of ``path`` (created if needed with ``flags``, never deleted) for the
    block, and yield its descriptor (an appender writes through it).

    Without ``stop`` the wait is the kernel's, as long as the holder holds it; with ``stop`` the
    lock is tried every ``poll`` seconds and the wait ends with :class:`LockWaitInterrupted`
    (``interrupted`` is its message) once ``stop`` is set, so a Ctrl-C is not stuck behind another
    process. Closing the descriptor at the end releases the lock."""
    fd = os.open(path, flags | os.O_CLOEXEC, 0o666)
    try:
        if stop is None:
            lock_descriptor(fd, shared=shared)
        else:
            while not lock_descriptor(fd, shared=shared, blocking=False):
                if stop.wait(poll):
                    raise LockWaitInterrupted(interrupted)
        yield fd
    finally:
        os.close(fd)
