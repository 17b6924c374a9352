"""One writer per run directory (docs/locks.md), with real processes: a second writer is refused in
one line naming the holder; a holder that is gone (killed, or another host's heartbeat stale) is
taken over with one line, so a SIGKILL never blocks a resume."""

from __future__ import annotations

import csv
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from offline_gitd.rundir.lock import RUN_LOCK_FILE, HolderLock, LockBusy, LockLost, hold_run_dir, read_holder
from tests.support.argv import online_cartpole

# A process that holds a run directory's lock until its stdin closes (FORK: and leaves a child
# that keeps the lock file open, as a process a crashed run started would).
HOLD = """
import os, sys, time
from pathlib import Path
from offline_gitd.rundir.lock import hold_run_dir
with hold_run_dir(Path(sys.argv[1])):
    child = os.fork() if sys.argv[2:] == ["fork"] else None
    if child == 0:
        time.sleep(600)
        os._exit(0)
    print("held", child or "", flush=True)
    sys.stdin.read()
"""
CARTPOLE = online_cartpole(
    "--no-progress",
    "--no-tensorboard",
    mlp_hidden="16,16",
    batch_size=16,
    initial_samples=50,
    log_every=50,
    checkpoint_every=50,
)


def hold(run_dir: Path, *extra: str) -> tuple[subprocess.Popen, int | None]:
    """The holding process, and the pid of the child it left holding the file open (``fork``)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir), *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    said, _, child = process.stdout.readline().strip().partition(" ")
    assert said == "held"
    return process, int(child) if child else None


def holder_pid(run_dir: Path) -> int | None:
    holder = read_holder(run_dir / RUN_LOCK_FILE)  # None also while a holder is writing its record
    return holder.pid if holder else None


def online(run_dir: Path, *flags: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "offline_gitd.cli", *CARTPOLE, "--out", str(run_dir), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(condition, timeout: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def result_keys(run_dir: Path) -> Counter:
    with (run_dir / "results.csv").open() as handle:
        return Counter((row["run_id"], row["seed"], row["step"]) for row in csv.DictReader(handle))


def steps_logged(run_dir: Path) -> set[int]:
    if not (run_dir / "results.csv").exists():
        return set()
    with (run_dir / "results.csv").open() as handle:
        return {int(row["step"]) for row in csv.DictReader(handle)}


# -- the lock itself ---------------------------------------------------------------------------


def test_a_second_writer_is_refused_in_one_line_naming_the_holder(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    holder, _ = hold(run_dir)
    try:
        with pytest.raises(LockBusy) as refused:
            with hold_run_dir(run_dir):
                pass
        message = str(refused.value)
        assert f"run directory {run_dir} is in use by pid {holder.pid} on {socket.gethostname()} since " in message
        assert "\n" not in message
    finally:
        holder.stdin.close()
        assert holder.wait(30) == 0
    assert not (run_dir / RUN_LOCK_FILE).exists()  # released: a finished writer leaves no lock file
    with hold_run_dir(run_dir):
        assert read_holder(run_dir / RUN_LOCK_FILE).pid == os.getpid()


def test_a_killed_holders_lock_is_taken_over_with_one_line(tmp_path: Path, capfd) -> None:
    run_dir = tmp_path / "run"
    holder, _ = hold(run_dir)
    holder.kill()
    holder.wait(30)
    assert read_holder(run_dir / RUN_LOCK_FILE).pid == holder.pid  # the crash's trace
    with hold_run_dir(run_dir):
        pass
    err = capfd.readouterr().err
    assert err.count("\n") == 1
    assert f"took over the lock of run directory {run_dir} from pid {holder.pid}" in err
    assert "it no longer runs" in err


def test_a_lock_kept_open_by_a_dead_holders_child_is_replaced(tmp_path: Path, capfd) -> None:
    """The kernel still holds the lock (a child inherited it), but the holder it names is dead."""
    run_dir = tmp_path / "run"
    holder, child = hold(run_dir, "fork")
    try:
        holder.kill()
        holder.wait(30)
        fd = os.open(run_dir / RUN_LOCK_FILE, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # the orphan still has it locked
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        with hold_run_dir(run_dir):
            assert holder_pid(run_dir) == os.getpid()
        err = capfd.readouterr().err
        assert f"from pid {holder.pid}" in err and "a process it started still keeps the lock file open" in err
    finally:
        os.kill(child, signal.SIGKILL)


def test_another_hosts_lock_holds_while_its_heartbeat_is_fresh(tmp_path: Path, capfd) -> None:
    """A shared filesystem whose locks stay on each host: the heartbeat alone tells."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record = {"host": "node-7.cluster", "pid": 4242, "since": "2026-01-01T00:00:00+00:00"}
    (run_dir / RUN_LOCK_FILE).write_text(json.dumps({**record, "heartbeat": time.time() - 5}))
    with pytest.raises(LockBusy, match=r"in use by pid 4242 on node-7.cluster since .*heartbeat \d+ s ago"):
        with hold_run_dir(run_dir):
            pass
    (run_dir / RUN_LOCK_FILE).write_text(json.dumps({**record, "heartbeat": time.time() - 31}))
    with hold_run_dir(run_dir):
        pass
    err = capfd.readouterr().err
    assert "from pid 4242 on node-7.cluster" in err and "stale after 30 s" in err


def test_without_file_locks_the_record_alone_tells(tmp_path: Path, monkeypatch, capfd) -> None:
    """A network mount whose flock answers ENOLCK: a live holder on this host is known by its pid."""
    run_dir = tmp_path / "run"
    holder, _ = hold(run_dir)

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    try:
        with pytest.raises(LockBusy, match=f"in use by pid {holder.pid}"):
            with hold_run_dir(run_dir):
                pass
    finally:
        holder.kill()
        holder.wait(30)
    with hold_run_dir(run_dir):
        assert holder_pid(run_dir) == os.getpid()
    assert f"from pid {holder.pid} on {socket.gethostname()}" in capfd.readouterr().err


def test_the_heartbeat_is_renewed_and_a_holder_taken_over_stops_writing(tmp_path: Path) -> None:
    path = tmp_path / "run" / RUN_LOCK_FILE
    lock = HolderLock(path, "run directory x", heartbeat=0.1)
    lock.acquire()
    try:
        first = read_holder(path).heartbeat
        wait_for(lambda: getattr(read_holder(path), "heartbeat", first) > first, 10, "a new heartbeat")
        lock.check()
        # another host decided this holder was stale and put its own lock file in place
        other = {"host": "node-7.cluster", "pid": 4242, "since": "2026-01-01T00:00:00+00:00", "heartbeat": time.time()}
        path.with_name("other").write_text(json.dumps(other))
        os.replace(path.with_name("other"), path)
        wait_for(lambda: lock.lost is not None, 10, "the holder to notice")
        with pytest.raises(LockLost, match="taken over"):
            lock.check()
    finally:
        lock.release()


def test_collect_into_a_run_directory_in_use_is_refused(tmp_path: Path, capsys) -> None:
    """``collect --run-dir`` trains its behaviour agent there: the same lock, before any work."""
    from offline_gitd.cli import main

    run_dir = tmp_path / "agent"
    holder, _ = hold(run_dir)
    try:
        argv = ["collect", "CartPole-v1", "--steps", "100", "--out", "offline_gitd/CartPole-v1/locked-v0"]
        argv += ["--run-dir", str(run_dir), "--data-dir", str(tmp_path / "data"), "--no-progress"]
        assert main(argv) == 2
    finally:
        holder.stdin.close()
        holder.wait(30)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"run directory {run_dir} is in use by pid {holder.pid}" in err
    assert not (run_dir / "config.json").exists()


def test_a_failed_start_leaves_nothing_behind(tmp_path: Path) -> None:
    run_dir = tmp_path / "a" / "b" / "run"
    with pytest.raises(RuntimeError):
        with hold_run_dir(run_dir):
            raise RuntimeError("the networks did not fit")
    assert not (tmp_path / "a").exists()


# -- real runs ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def started_run(tmp_path_factory) -> Path:
    """A 100-step CartPole run to resume (made once, copied by each test)."""
    run_dir = tmp_path_factory.mktemp("base") / "run"
    process = online(run_dir, "--steps", "100")
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return run_dir


def copy_run(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def test_two_resume_writers_one_is_refused(started_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(started_run, tmp_path / "run")
    first, second = online(run_dir, "--resume", "--steps", "600"), online(run_dir, "--resume", "--steps", "600")
    by_pid = {first.pid: first, second.pid: second}
    wait_for(lambda: holder_pid(run_dir) in by_pid, what="a writer to lock")
    winner = by_pid.pop(holder_pid(run_dir))
    winner.send_signal(signal.SIGSTOP)  # held still, lock and all, until the other has tried
    try:
        (loser,) = by_pid.values()
        _, err = loser.communicate(timeout=300)
    finally:
        winner.send_signal(signal.SIGCONT)
    assert loser.returncode == 2
    assert err.count("\n") == 1 and f"is in use by pid {winner.pid} on {socket.gethostname()} since" in err
    _, err = winner.communicate(timeout=300)
    assert winner.returncode == 0, err
    keys = result_keys(run_dir)
    assert max(keys.values()) == 1 and len(keys) == 600 // 50  # one seed, a row every 50 steps, each once
    assert not (run_dir / RUN_LOCK_FILE).exists()


@pytest.mark.e2e  # a real run killed mid-run and resumed by a second process: ~9 s, in the default run only
def test_a_holder_killed_mid_run_is_resumed_without_a_manual_step(started_run: Path, tmp_path: Path) -> None:
    run_dir = copy_run(started_run, tmp_path / "run")
    writer = online(run_dir, "--resume", "--steps", "800")
    wait_for(lambda: max(steps_logged(run_dir)) >= 300 or writer.poll() is not None, what="the run to pass step 300")
    writer.send_signal(signal.SIGSTOP)  # caught mid-run, then killed: no handler, no cleanup
    writer.kill()
    writer.wait(30)
    assert max(steps_logged(run_dir)) < 800, "the run finished before it could be killed"
    assert holder_pid(run_dir) == writer.pid
    resumed = online(run_dir, "--resume")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert f"took over the lock of run directory {run_dir} from pid {writer.pid}" in err
    keys = result_keys(run_dir)
    assert max(keys.values()) == 1 and sorted(int(step) for _, _, step in keys) == list(range(50, 801, 50))
    assert not (run_dir / RUN_LOCK_FILE).exists()
