"""Durable files and locks (offline_gitd/durable.py, docs/architecture.md#ground): a replaced file
is the old one or the new one whatever fails, and a file lock keeps out other processes."""

from __future__ import annotations

import errno
import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from offline_gitd import durable
from offline_gitd.durable import (
    LockWaitInterrupted,
    file_lock,
    fsync_directory,
    lock_descriptor,
    move_into_place,
    replace_bytes,
    replace_json,
    replace_text,
    replacing,
)

ROOT = Path(__file__).resolve().parents[1]
OLD = b"the old content, whole\n"


def _python(code: str, *args: str, **popen: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
        **popen,
    )


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _listing(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


# -- replacing a file ------------------------------------------------------------------------------


def test_a_new_file_gets_its_content_and_the_permissions_open_gives(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    replace_bytes(path, b"new")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()
    assert _listing(tmp_path) == ["config.json"]


def test_a_replaced_file_keeps_its_permissions(tmp_path: Path) -> None:
    path = tmp_path / "board.csv"
    path.write_bytes(OLD)
    path.chmod(0o640)
    replace_bytes(path, b"new")
    assert path.read_bytes() == b"new" and stat.S_IMODE(path.stat().st_mode) == 0o640


def test_text_and_json_are_written_as_given(tmp_path: Path) -> None:
    replace_text(tmp_path / "a.txt", "é\n")
    assert (tmp_path / "a.txt").read_bytes() == "é\n".encode()
    replace_json(tmp_path / "a.json", {"b": 1, "a": [1, 2]})
    assert (tmp_path / "a.json").read_text() == json.dumps({"b": 1, "a": [1, 2]}, indent=2, sort_keys=True) + "\n"
    replace_json(tmp_path / "c.json", {"b": 1, "a": 2}, indent=1, sort_keys=False)
    assert (tmp_path / "c.json").read_text() == '{\n "b": 1,\n "a": 2\n}\n'
    with replacing(tmp_path / "d.csv", mode="w") as handle:  # text streamed in UTF-8
        handle.write("a,é\n")
        handle.write("1,2\n")
    assert (tmp_path / "d.csv").read_bytes() == "a,é\n1,2\n".encode()


def test_a_writer_may_read_back_what_it_wrote(tmp_path: Path) -> None:
    path = tmp_path / "sealed"
    with replacing(path, mode="w+b") as handle:
        handle.write(b"0123456789")
        handle.seek(2)
        assert handle.read(3) == b"234"
        handle.seek(0)
        handle.write(b"ab")
    assert path.read_bytes() == b"ab23456789"


def _fail_in_the_block(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with replacing(path) as handle:
        handle.write(b"half of the new")
        handle.flush()
        raise RuntimeError("the writer failed")


def _fail_at_fsync(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    replace_bytes(path, b"x" * 100_000)


def _fail_the_check(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(temp: Path) -> None:
        assert temp.read_bytes() == b"written, then found wrong"  # the check sees the whole temp file
        raise ValueError("fails its checksum")

    replace_bytes(path, b"written, then found wrong", check=refuse)


def _fail_at_rename(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def cross_device(source: object, target: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "replace", cross_device)
    replace_bytes(path, b"new")


@pytest.mark.parametrize(
    "fail",
    [_fail_in_the_block, _fail_at_fsync, _fail_the_check, _fail_at_rename],
    ids=["exception-in-the-block", "full-disk-at-fsync", "refused-by-the-check", "rename-fails"],
)
def test_a_failed_write_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(OLD)
    with pytest.raises((RuntimeError, OSError, ValueError)):
        fail(path, monkeypatch)
    assert path.read_bytes() == OLD
    assert _listing(tmp_path) == ["state.json"]


# A writer that has written half of its new content and waits to be killed.
KILLED_WRITER = """
import sys, time
from pathlib import Path
from offline_gitd.durable import replacing
with replacing(Path(sys.argv[1])) as handle:
    handle.write(b"half of the new content")
    handle.flush()
    print("half", flush=True)
    time.sleep(600)
    handle.write(b", the other half")
"""


def test_a_writer_killed_mid_write_leaves_the_old_file_under_its_name(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_bytes(OLD)
    writer = _python(KILLED_WRITER, str(path))
    try:
        assert writer.stdout.readline() == "half\n"
        temps = [name for name in _listing(tmp_path) if name != "results.csv"]
        assert len(temps) == 1 and (tmp_path / temps[0]).read_bytes() == b"half of the new content"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(30)
    assert path.read_bytes() == OLD
    # what SIGKILL leaves is a hidden temporary file, never a file under the final name
    assert re.fullmatch(r"\.results\.csv\.[0-9a-f]{8}\.tmp", temps[0])


def test_temp_files_are_named_by_the_prefix_given(tmp_path: Path) -> None:
    path = tmp_path / "board.csv"
    with replacing(path, prefix=".board.csv.node-3.4242.") as handle:
        handle.write(b"rows")
        (temp,) = _listing(tmp_path)
    assert re.fullmatch(r"\.board\.csv\.node-3\.4242\.[0-9a-f]{8}\.tmp", temp)
    assert _listing(tmp_path) == ["board.csv"]


def test_two_writers_of_one_file_never_share_a_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    with replacing(path) as first, replacing(path) as second:
        first.write(b"first")
        second.write(b"second")
        assert len(_listing(tmp_path)) == 2
    assert path.read_bytes() == b"first"  # the outer block renames last
    assert _listing(tmp_path) == ["state.json"]


def test_an_unknown_mode_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mode"):
        with replacing(tmp_path / "a", mode="ab"):
            pass
    assert _listing(tmp_path) == []


def test_move_into_place_replaces_the_file(tmp_path: Path) -> None:
    part, dest = tmp_path / "shard.part", tmp_path / "shard"
    part.write_bytes(b"verified")
    dest.write_bytes(OLD)
    move_into_place(part, dest)
    assert dest.read_bytes() == b"verified" and not part.exists()


@pytest.mark.parametrize(("code", "raised"), [(errno.EINVAL, False), (errno.EIO, True)])
def test_a_directory_that_cannot_be_synced_is_left_but_an_io_error_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, raised: bool
) -> None:
    calls = []

    def fsync(fd: int) -> None:
        calls.append(fd)
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fsync)
    if raised:
        with pytest.raises(OSError, match=os.strerror(code)):
            fsync_directory(tmp_path)
    else:
        fsync_directory(tmp_path)
    assert len(calls) == 1


# -- locks -------------------------------------------------------------------------------------------

# Try the lock of argv[1] once, without waiting ("exclusive" or "shared" in argv[2]); print the answer.
TRY_LOCK = """
import os, sys
from offline_gitd.durable import lock_descriptor
fd = os.open(sys.argv[1], os.O_RDWR)
print(lock_descriptor(fd, shared=sys.argv[2] == "shared", blocking=False), flush=True)
"""

# Wait for the lock of argv[1], then say so.
WAIT_LOCK = """
import sys
from pathlib import Path
from offline_gitd.durable import file_lock
print("waiting", flush=True)
with file_lock(Path(sys.argv[1])):
    print("locked", flush=True)
"""


def _try_lock(path: Path, kind: str) -> bool:
    child = _python(TRY_LOCK, str(path), kind)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    return {"True\n": True, "False\n": False}[out]


def test_an_exclusive_lock_keeps_out_another_process_until_released(tmp_path: Path) -> None:
    path = tmp_path / "board.csv.lock"
    with file_lock(path):
        assert not _try_lock(path, "exclusive")
        assert not _try_lock(path, "shared")
    assert _try_lock(path, "exclusive")
    assert path.exists()  # never deleted: a waiter on the old file and a new locker would both win


def test_a_waiting_process_gets_the_lock_only_once_it_is_released(tmp_path: Path) -> None:
    path = tmp_path / "timings.csv"
    with file_lock(path):
        waiter = _python(WAIT_LOCK, str(path))
        try:
            assert waiter.stdout.readline() == "waiting\n"
            ready, _, _ = select.select([waiter.stdout], [], [], 1.0)
            assert not ready and waiter.poll() is None  # still waiting while this process holds it
        except BaseException:
            waiter.kill()
            raise
    ready, _, _ = select.select([waiter.stdout], [], [], 30.0)
    assert ready and waiter.stdout.readline() == "locked\n"
    assert waiter.wait(30) == 0


def test_shared_locks_admit_each_other_and_keep_out_an_exclusive_one(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    with file_lock(path, shared=True):
        assert _try_lock(path, "shared")
        assert not _try_lock(path, "exclusive")


def test_two_opens_in_one_process_exclude_each_other_and_a_stopped_wait_gives_up(tmp_path: Path) -> None:
    """A lock belongs to an open file, so two threads of one fetch exclude each other like two
    processes; a wait with ``stop`` ends in one line once it is set."""
    path = tmp_path / "shard.lock"
    stop = threading.Event()
    with file_lock(path):
        threading.Timer(0.3, stop.set).start()
        with pytest.raises(LockWaitInterrupted, match="^interrupted while another fetch held this shard$"):
            with file_lock(path, stop=stop, poll=0.05, interrupted="interrupted while another fetch held this shard"):
                pytest.fail("the lock was taken twice")
    with file_lock(path, stop=stop):  # free now: taken at once, stop or not
        pass


def test_an_appender_writes_through_the_locked_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "timings.csv"
    for line in (b"a\n", b"b\n"):
        with file_lock(path, flags=os.O_WRONLY | os.O_APPEND | os.O_CREAT) as fd:
            os.write(fd, line)
    assert path.read_bytes() == b"a\nb\n"


def test_a_filesystem_without_locks_is_reported_not_taken_for_contention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run lock must know when it holds no kernel lock (docs/locks.md): ENOLCK is raised."""

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(durable.fcntl, "flock", no_locks)
    fd = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT)
    try:
        with pytest.raises(OSError) as raised:
            lock_descriptor(fd, blocking=False)
        assert raised.value.errno == errno.ENOLCK
    finally:
        os.close(fd)
