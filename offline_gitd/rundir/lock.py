"""One writer at a time: an exclusive lock file that names its holder (docs/locks.md).

A run directory (``RUN_DIR/.lock``) and a sweep folder (``OUT/.driver.lock``) each have one writer.
The lock is the operating system's (``flock`` on an open file, taken through
:mod:`offline_gitd.durable` as every file lock of the package is), so the kernel releases it
when its holder exits or crashes, SIGKILL included; the file also holds who holds it (host, pid,
start time) and a heartbeat its holder renews every :data:`HEARTBEAT_SECONDS` from a daemon
thread, for what the kernel cannot see: a holder on another host of a shared filesystem.

A second writer is refused in one line naming the holder, unless the holder is gone, in which
case its lock is taken over with one line saying so:

- on this host, the kernel no longer holds the lock, or the recorded pid is dead (a lock kept
  open only by a process the holder left behind);
- on another host, its heartbeat is older than :data:`STALE_BEATS` beats. A file lock that a
  shared filesystem does not carry across hosts is then covered by the heartbeat alone, and one
  that it does carry but keeps for a host that died (an NFS lease) is replaced.

The file is removed when its holder releases it, so a finished run holds no lock file; a lock
file left behind is the trace of a crash, and the next writer takes it over. Whoever locks a file
checks that it is still the one at the path (a releaser may have just removed it), and retries if
not. Locks are re-entrant within a process: a sweep task holds its run's lock around the command
that then takes it again.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from offline_gitd.durable import file_lock, lock_descriptor, move_into_place
from offline_gitd.errors import UsageError

RUN_LOCK_FILE = ".lock"
# A holder rewrites its heartbeat this often; a lock from another host whose heartbeat is older
# than STALE_BEATS beats (30 s) is taken over. Hosts sharing a filesystem must keep their clocks
# within a few seconds of each other (NTP does).
HEARTBEAT_SECONDS = 10.0
STALE_BEATS = 3
# A holder writes its record just after locking; a reader that finds the lock held and the file
# still empty looks again for this long before naming an unknown holder.
RECORD_WAIT_SECONDS = 2.0
POLL_SECONDS = 0.2
# flock's answers on a filesystem that has no file locks (some network mounts)
NO_FILE_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)
RECORD_BYTES = 1024
COMMAND_CHARS = 600


class LockBusy(UsageError):
    """Another live process holds the lock; ``holder`` is what its file says (or ``None``)."""

    def __init__(self, message: str, holder: Holder | None) -> None:
        super().__init__(message)
        self.holder = holder


class LockLost(UsageError):
    """This process's lock was taken over by another (it had stopped renewing its heartbeat)."""


@dataclass(frozen=True)
class Holder:
    """What a lock file says of its holder."""

    host: str
    pid: int
    since: str
    heartbeat: float
    command: str = ""

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        try:
            record = json.loads(text)
            return cls(
                str(record["host"]),
                int(record["pid"]),
                str(record["since"]),
                float(record["heartbeat"]),
                str(record.get("command", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} since {self.since}"

    def heartbeat_age(self) -> float:
        return max(0.0, time.time() - self.heartbeat)

    def seems_alive(self, stale_after: float) -> bool:
        """Whether the holder looks alive without asking the kernel (a read-only view): on this
        host its pid runs, on another its heartbeat is fresh."""
        if self.host == socket.gethostname():
            return pid_alive(self.pid)
        return self.heartbeat_age() <= stale_after

    def gone(self, locked: bool | None, stale_after: float) -> str | None:
        """Why this holder no longer holds the lock, or ``None`` when it is alive. ``locked``:
        whether the kernel still holds the file's lock for some process (``None``: a filesystem
        without file locks, where only the pid and the heartbeat tell)."""
        if self.host == socket.gethostname():
            if locked is False:
                return "it no longer runs" if not pid_alive(self.pid) else "it let go of the lock without removing it"
            if not pid_alive(self.pid):
                kept = " (a process it started still keeps the lock file open)" if locked else ""
                return f"it no longer runs{kept}"
            return None
        age = self.heartbeat_age()
        if age > stale_after:
            return f"its heartbeat is {age:.0f} s old (stale after {stale_after:.0f} s)"
        return None


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _now_text() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)


def read_holder(path: Path) -> Holder | None:
    """What the lock file at ``path`` says of its holder; ``None`` when there is none (no file,
    an empty one, or one being written). Reading takes no lock."""
    try:
        return Holder.parse(path.read_text())
    except (OSError, UnicodeDecodeError):
        return None


def _note(text: str) -> None:
    print(f"offline_gitd: note: {text}", file=sys.stderr, flush=True)


class HolderLock:
    """An exclusive lock on ``path`` for one process, with its holder recorded in the file.

    ``what`` names the locked thing in messages ("run directory runs/a"); ``on_takeover`` prints
    the one line a takeover says (to stderr by default).
    """

    def __init__(
        self,
        path: Path,
        what: str,
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
        stale_beats: int = STALE_BEATS,
        hint: str = "",
        on_takeover: Callable[[str], None] = _note,
    ) -> None:
        self.path, self.what, self.hint = path, what, hint
        self.heartbeat, self.stale_after = heartbeat, heartbeat * stale_beats
        self.on_takeover = on_takeover
        self.fd: int | None = None
        self.created: Path | None = None  # the outermost directory this lock had to create
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._since = ""

    # -- acquiring -------------------------------------------------------------------------------

    def acquire(self, wait: float = 0.0) -> None:
        """Take the lock, taking over one whose holder is gone; raise :class:`LockBusy` when a live
        holder keeps it longer than ``wait`` seconds."""
        self._make_parent()
        self._since = ""
        deadline = time.monotonic() + wait
        while True:
            try:
                if self._try_once():
                    return
            except LockBusy:
                if time.monotonic() >= deadline:
                    self._remove_created()
                    raise
                time.sleep(min(1.0, max(POLL_SECONDS, self.heartbeat / 4)))

    def _make_parent(self) -> None:
        parent = self.path.parent
        missing = parent
        while not missing.parent.exists() and missing.parent != missing:
            missing = missing.parent
        if not parent.exists():
            self.created = missing
        parent.mkdir(parents=True, exist_ok=True)

    def _try_once(self) -> bool:
        """One attempt: ``True`` when locked, ``False`` to look again at once (the file was
        replaced or removed under us); raises :class:`LockBusy`."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise UsageError(f"cannot lock {self.what}: {self.path}: {err.strerror or err}") from None
        locked: bool | None = False  # whether the kernel holds the lock for another process
        try:
            if not lock_descriptor(fd, blocking=False):
                os.close(fd)
                return self._locked_elsewhere()
        except OSError as err:
            if err.errno not in NO_FILE_LOCKS:
                os.close(fd)
                raise
            locked = None  # a filesystem without file locks: the record alone tells
        if not _same_file(fd, self.path):
            os.close(fd)
            return False
        previous = Holder.parse(os.pread(fd, 1 << 16, 0).decode("utf-8", "replace"))
        if previous is not None:
            reason = previous.gone(locked=locked, stale_after=self.stale_after)
            if reason is None:  # another host's live holder, on a filesystem whose lock stays on each host
                os.close(fd)
                raise self._busy(previous)
            self.on_takeover(f"took over the lock of {self.what} from {previous.describe()}: {reason}")
        self._hold(fd)
        return True

    def _locked_elsewhere(self) -> bool:
        """The kernel holds the lock for another process: refuse, or replace the file of a
        holder that is gone."""
        holder = read_holder(self.path)
        deadline = time.monotonic() + RECORD_WAIT_SECONDS
        while holder is None and time.monotonic() < deadline:  # locked a moment ago, record not yet written
            time.sleep(POLL_SECONDS)
            if not self.path.exists():
                return False
            holder = read_holder(self.path)
        if holder is None:
            raise self._busy(None)
        reason = holder.gone(locked=True, stale_after=self.stale_after)
        if reason is None:
            raise self._busy(holder)
        return self._replace(holder, reason)

    def _replace(self, holder: Holder, reason: str) -> bool:
        """Put a new, locked lock file in place of one still locked for a holder that is gone.
        Replacements are made one at a time under a guard file, each checking that the file it
        replaces is still the gone holder's."""
        with file_lock(self.path.with_name(self.path.name + ".takeover")):
            if read_holder(self.path) != holder:
                return False  # someone else replaced it (or it was released): look again
            # The new lock file is locked and recorded before it takes the path, and stays open
            # across the rename: no moment shows the path unlocked or without a holder.
            temp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            try:
                lock_descriptor(fd)
                self._write_record(fd)
                move_into_place(temp, self.path)
            except BaseException:
                os.close(fd)
                temp.unlink(missing_ok=True)
                raise
        self.on_takeover(f"took over the lock of {self.what} from {holder.describe()}: {reason}")
        self._hold(fd, recorded=True)
        return True

    def _busy(self, holder: Holder | None) -> LockBusy:
        if holder is None:
            who = "another process (it is starting: its record is not written yet)"
        else:
            who = holder.describe()
            if holder.host != socket.gethostname():
                who += f", heartbeat {holder.heartbeat_age():.0f} s ago"
        return LockBusy(f"{self.what} is in use by {who}{'; ' + self.hint if self.hint else ''}", holder)

    def _hold(self, fd: int, recorded: bool = False) -> None:
        self.fd, self.lost = fd, None
        if not recorded:
            self._write_record(fd)
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat {self.path}", daemon=True)
        self._thread.start()

    def _write_record(self, fd: int) -> None:
        self._since = self._since or _now_text()
        record = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": self._since,
            "heartbeat": time.time(),
            "heartbeat_every_s": self.heartbeat,
            "command": " ".join(sys.argv)[:COMMAND_CHARS],
        }
        # Padded to one length, so that a beat rewrites the record in place and a reader never
        # sees the tail of a longer old record after a shorter new one.
        data = (json.dumps(record, sort_keys=True) + "\n").encode().ljust(RECORD_BYTES)
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        os.fsync(fd)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            fd = self.fd
            if fd is None:
                return
            if not _same_file(fd, self.path):
                holder = read_holder(self.path)
                self.lost = f"{self.what} was taken over by {holder.describe() if holder else 'another process'}"
                print(f"offline_gitd: warning: {self.lost}", file=sys.stderr, flush=True)
                return
            try:
                self._write_record(fd)
            except OSError:  # a full disk or a lost mount: the next beat tries again
                continue

    # -- holding and releasing ---------------------------------------------------------------------

    def check(self) -> None:
        """Raise :class:`LockLost` if another process has taken this lock over."""
        if self.fd is not None and (self.lost or not _same_file(self.fd, self.path)):
            raise LockLost(
                f"{self.lost or self.what + ' was taken over by another process'}; this process stops "
                "writing it (it had stopped renewing its heartbeat)"
            )

    def release(self) -> None:
        """Remove the lock file (if it is still ours) and unlock; then remove the directories
        this lock created if nothing else was written there."""
        fd, self.fd = self.fd, None
        if fd is None:
            return
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        try:
            if _same_file(fd, self.path):
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)
        self._remove_created()

    def _remove_created(self) -> None:
        if self.created is None:
            return
        directory = self.path.parent
        while True:
            try:
                directory.rmdir()
            except OSError:  # not empty (the run started, or another writer is there) or gone
                break
            if directory == self.created:
                break
            directory = directory.parent
        self.created = None


# Locks this process holds, by lock file: [lock, depth], so that a nested hold is a no-op.
_HELD: dict[str, list[Any]] = {}
_HELD_GUARD = threading.Lock()


@contextmanager
def holding(path: Path, what: str, *, wait: float = 0.0, hint: str = "") -> Iterator[HolderLock]:
    """Hold the lock on ``path`` for the block (re-entrant within this process); a failed block
    releases it like a finished one."""
    key = os.path.abspath(path)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            held[1] += 1
    if held is None:
        lock = HolderLock(Path(key), what, hint=hint)
        lock.acquire(wait)
        held = _HELD.setdefault(key, [lock, 1])
    try:
        yield held[0]
    finally:
        with _HELD_GUARD:
            held[1] -= 1
            last = held[1] == 0
            if last:
                del _HELD[key]
        if last:
            held[0].release()


def run_lock_path(run_dir: Path) -> Path:
    return run_dir / RUN_LOCK_FILE


@contextmanager
def hold_run_dir(run_dir: Path, *, wait: float = 0.0) -> Iterator[HolderLock]:
    """The one writer of ``run_dir`` for the block: from its first check to its last row.

    A second writer gets :class:`LockBusy` in one line. Directories the lock had to create are
    removed again when the block fails before writing anything else, so a refused or failed start
    leaves nothing behind.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"--out {run_dir} exists and is not a directory")
    hint = "one writer per run directory: let it finish (or stop it), then --resume"
    with holding(run_lock_path(run_dir), f"run directory {run_dir}", wait=wait, hint=hint) as lock:
        yield lock


def check_run_dir_held(run_dir: Path) -> None:
    """Stop a writer whose lock on ``run_dir`` was taken over (see :meth:`HolderLock.check`);
    nothing to check when this process holds no lock there."""
    held = _HELD.get(os.path.abspath(run_lock_path(run_dir)))
    if held is not None:
        held[0].check()
