"""Fetch against slow, stalling and concurrent downloads and a full disk, on a real loopback server."""

# ruff: noqa: F811 -- the fixtures ``bucket`` and ``server`` come from test_fetch and are named as arguments

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from offline_gitd.data.http_download import RetryPolicy, ShardTask, fetch_shard
from offline_gitd.data.lock_book import LockBook, file_lock, lock_path
from offline_gitd.data.paths import rlu_raw_dir
from offline_gitd.data.registry import load_rlu_registry
from offline_gitd.data.rlu_fetch import fetch_rlu_atari
from tests.data.test_fetch import LAYOUT, bucket, server, shard_rel  # noqa: F401
from tests.rlu_server import RluServer

SHARD = shard_rel("Pong", 1, 0)


def fetch_one(server: RluServer, data_dir: Path, policy: RetryPolicy):
    return fetch_rlu_atari(
        load_rlu_registry(), data_dir, "Pong", 1, checkpoints="0", base_url=server.base_url, jobs=1, policy=policy
    )


def raw(data_dir: Path) -> Path:
    return rlu_raw_dir(data_dir, LAYOUT, "Pong")


def test_trickling_server_is_abandoned_and_its_bytes_kept(server: RluServer, bucket: Path, tmp_path: Path) -> None:
    """64 bytes every 0.25 s never reaches a socket timeout; the minimum rate ends it."""
    path = server.path_of(SHARD)
    server.misbehave.trickle[path] = (64, 0.25)
    policy = RetryPolicy(attempts=2, base_delay=0.01, timeout=5, min_rate=1024, rate_window=1.0)
    (outcome,) = fetch_one(server, tmp_path, policy).outcomes
    assert outcome.status == "failed" and "too slow" in outcome.message
    part = raw(tmp_path) / (Path(SHARD).name + ".part")
    kept = part.stat().st_size
    assert kept >= 64 * 4  # what arrived is on disk
    del server.misbehave.trickle[path]
    (outcome,) = fetch_one(server, tmp_path, RetryPolicy(base_delay=0.01, timeout=5)).outcomes
    assert outcome.status == "fetched"
    assert server.gets(path)[-1].range == f"bytes={kept}-"
    assert (raw(tmp_path) / Path(SHARD).name).read_bytes() == (bucket / SHARD).read_bytes()


def test_bytes_before_a_stall_are_kept_for_the_resume(server: RluServer, bucket: Path, tmp_path: Path) -> None:
    path = server.path_of(SHARD)
    server.misbehave.stall_once[path] = 1000
    (outcome,) = fetch_one(server, tmp_path, RetryPolicy(base_delay=0.01, timeout=0.5)).outcomes
    assert outcome.status == "fetched"
    assert [r.range for r in server.gets(path)] == [None, "bytes=1000-"]
    assert (raw(tmp_path) / Path(SHARD).name).read_bytes() == (bucket / SHARD).read_bytes()


def test_deadline_ends_a_shard_that_never_finishes(server: RluServer, tmp_path: Path) -> None:
    server.misbehave.trickle[server.path_of(SHARD)] = (256, 0.05)  # 5 KB/s: fast enough for the rate check
    policy = RetryPolicy(base_delay=0.01, timeout=5, deadline=0.5)
    (outcome,) = fetch_one(server, tmp_path, policy).outcomes
    assert outcome.status == "failed" and "--deadline" in outcome.message


def test_two_fetches_of_one_shard_take_turns(server: RluServer, bucket: Path, tmp_path: Path) -> None:
    """Two fetches into one data directory at once (slow server so they overlap): one downloads,
    the other waits for its lock and then finds the verified shard."""
    path = server.path_of(SHARD)
    server.misbehave.trickle[path] = (512, 0.05)
    results = []

    def run() -> None:
        results.append(fetch_one(server, tmp_path, RetryPolicy(base_delay=0.01, timeout=5)).outcomes[0])

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(o.status for o in results) == ["fetched", "skipped"]
    assert len(server.gets(path)) == 1
    assert (raw(tmp_path) / Path(SHARD).name).read_bytes() == (bucket / SHARD).read_bytes()
    assert not list(raw(tmp_path).glob("*.part"))


class _NoProgress:
    def add_total(self, nbytes: int) -> None: ...

    def advance(self, nbytes: int) -> None: ...


def test_ctrl_c_while_waiting_for_another_fetch_fails_the_shard_without_touching_it(
    server: RluServer, tmp_path: Path
) -> None:
    """Another fetch holds the shard's lock; once stopped (Ctrl-C), the waiting one gives up
    with one line and sends no request."""
    directory = raw(tmp_path)
    task = ShardTask(name=Path(SHARD).name, url=f"{server.base_url}/{SHARD}", dest=directory / Path(SHARD).name)
    (directory / ".fetch-locks").mkdir(parents=True)
    stop = threading.Event()
    stop.set()
    book = LockBook(lock_path(directory, 1), {"layout": LAYOUT, "game": "Pong", "run": 1})
    with file_lock(directory / ".fetch-locks" / task.name):
        outcome = fetch_shard(task, book, RetryPolicy(), _NoProgress(), stop=stop)
    assert outcome.status == "failed" and outcome.message == "interrupted while another fetch held this shard"
    assert not server.gets(server.path_of(SHARD)) and not task.part.exists() and not task.dest.exists()


# A full disk without root: the child limits its files to 64 bytes and ignores SIGXFSZ, so a write
# past it is the OSError EFBIG, as a full disk's is ENOSPC. Set in the child itself: a preexec_fn
# is unsafe in a test process that already runs threads.
LIMITED_CLI = (
    "import resource, runpy, signal\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n"
    "runpy.run_module('offline_gitd.cli', run_name='__main__')\n"
)


def test_full_disk_while_writing_the_lock_file_is_one_line_and_no_temp(
    server: RluServer, bucket: Path, tmp_path: Path
) -> None:
    shard = raw(tmp_path) / Path(SHARD).name
    shard.parent.mkdir(parents=True)
    shard.write_bytes((bucket / SHARD).read_bytes())  # present and verified; no lock entry yet
    args = ["fetch", "rlu-atari", "--game", "Pong", "--run", "1", "--checkpoints", "0"]
    proc = subprocess.run(
        [sys.executable, "-c", LIMITED_CLI, *args, "--data-dir", str(tmp_path), "--base-url", server.base_url],
        env={**os.environ, "PYTHONPATH": str(Path.cwd())},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("offline_gitd: error:")]
    assert len(errors) == 1 and "run_1.lock.json" in errors[0] and "File too large" in errors[0]
    assert "Traceback" not in proc.stderr
    assert not list(raw(tmp_path).glob("*.tmp"))
    assert shard.read_bytes() == (bucket / SHARD).read_bytes()  # the verified shard is kept
