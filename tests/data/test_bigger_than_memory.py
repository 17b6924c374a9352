"""Training on an RL Unplugged store twice the memory the process may use (docs/datasets.md#bigger-than-memory).

An RLU-format run (shards in the bucket's format, decoded once into the frame cache by the
package's own code) of 3.15 GiB of frames is trained on by ``offline_gitd train`` in a
subprocess under a 1.25 GiB memory cgroup (:mod:`tests.memory_limit`): with ``--frames host`` the
memory-mapped frames are read page by page and evicted again, and the run completes; with
``--frames device`` (the whole store copied into the process) the same limit kills it, which
proves the limit is real. Slow (about 3 minutes: 3.3 GB written, decoded and read) and needs root
or a systemd user session; opt in with ``pytest -m slow tests/data/test_bigger_than_memory.py -s``.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from offline_gitd.data.cache import build_rlu_cache
from offline_gitd.data.paths import rlu_cache_dir, rlu_raw_dir, rlu_shard_name
from tests.memory_limit import LimitedRun, NoMemoryLimit, available_mechanism, run_with_memory_limit
from tests.rlu_shards import make_synthetic_episode, write_rlu_episodes_shard

# The train process alone (Python, JAX, XLA, the Nature CNN, its buffers) takes about 0.9 GiB, so
# 1.25 GiB leaves it about 350 MiB of page cache for the store's 3.15 GiB; 800 steps read more
# than that (880 MiB here), so the limit must bite.
LIMIT = 1280 * 2**20
CHECKPOINTS = 8
FRAMES_PER_CHECKPOINT = 60_000  # 8 x 60,000 x 7,056 bytes = 3.15 GiB of frames, 2.5x the limit
EPISODE_STEPS = 2_000
STEPS = 800
BATCH = 32
PONG_ACTIONS = 6
DATASET = f"rlu-atari:Pong/1:0-{CHECKPOINTS - 1}"


def episodes(rng: np.random.Generator, checkpoint: int) -> Iterator[dict]:
    """One checkpoint's episodes, made one at a time so that writing needs little memory."""
    for index in range(FRAMES_PER_CHECKPOINT // EPISODE_STEPS):
        yield make_synthetic_episode(
            rng, EPISODE_STEPS, checkpoint, index, terminal=bool(index % 2), num_actions=PONG_ACTIONS
        )


def drop_from_page_cache(path: Path) -> None:
    """Write ``path`` to disk and drop its pages from the page cache.

    A page already cached when the limited process maps it stays charged to the cgroup that read
    or wrote it first (this test's, or an earlier limited run's, whose charges pass to this test's
    when its cgroup is removed), so the limited run would read the store for free; dropped, every
    page it touches is read again and charged to it.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory) -> Iterator[tuple[Path, int]]:
    """(data root, bytes of frames): an RLU run of ``CHECKPOINTS`` shards, decoded into its cache;
    removed afterwards (pytest keeps recent temporary folders, and this one is 3.3 GB)."""
    root = tmp_path_factory.mktemp("data")
    raw = rlu_raw_dir(root, "atari_episodes_ordered", "Pong")
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for checkpoint in range(CHECKPOINTS):
        write_rlu_episodes_shard(raw / rlu_shard_name(1, checkpoint, 50), episodes(rng, checkpoint))
    build_rlu_cache(root, "Pong", 1, range(CHECKPOINTS), jobs=2, progress=False)
    yield root, sum(path.stat().st_size for path in frame_files(root))
    shutil.rmtree(root)


def frame_files(root: Path) -> list[Path]:
    return [rlu_cache_dir(root, "Pong", 1, c) / "frames.npy" for c in range(CHECKPOINTS)]


def train_under_limit(root: Path, out: Path, frames: str) -> tuple[LimitedRun, str]:
    """``offline_gitd train`` on the whole store under :data:`LIMIT`: (its figures, its stderr)."""
    command = [
        sys.executable, "-m", "offline_gitd.cli", "train", "--dataset", DATASET, "--data-dir", str(root),
        "--critic", "td", "--fraction", "1", "--epochs", "1", "--steps-per-epoch", str(STEPS),
        "--eval-episodes", "0", "--frames", frames, "--out", str(out), "--no-progress",
    ]  # fmt: skip
    log = out.parent / f"{out.name}.log"
    for path in frame_files(root):
        drop_from_page_cache(path)
    with log.open("w") as stderr:
        run = run_with_memory_limit(command, LIMIT, stdout=stderr, stderr=subprocess.STDOUT)
    print(f"\n--frames {frames}: {run.summary()}")
    return run, log.read_text()


def limit_mechanism() -> str:
    """The mechanism this machine offers; without one the test cannot say anything and fails."""
    try:
        return available_mechanism()
    except NoMemoryLimit as err:
        if os.geteuid() != 0 and not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
            pytest.skip(f"not root and no systemd user session: {err}")
        pytest.fail(str(err))


@pytest.mark.slow
def test_train_on_a_store_twice_the_memory_limit_with_frames_on_the_host(big_store, tmp_path) -> None:
    mechanism = limit_mechanism()
    root, store_bytes = big_store
    assert store_bytes >= 2 * LIMIT
    started = time.perf_counter()
    run, log = train_under_limit(root, tmp_path / "host", "host")
    rows = CHECKPOINTS * FRAMES_PER_CHECKPOINT
    samples = STEPS * BATCH
    print(
        f"{mechanism}: store {store_bytes / 2**30:.2f} GiB ({rows:,} frames) under a {LIMIT / 2**30:.2f} GiB limit; "
        f"{STEPS} steps x {BATCH} = {samples:,} samples, one every {rows / samples:.0f} frames "
        f"({rows / samples * 7056 / 2**10:.0f} KiB) on average; {run.read_bytes / store_bytes:.0%} of the store's size "
        f"read from disk; {time.perf_counter() - started:.0f} s"
    )
    assert run.returncode == 0, log[-3000:]
    with (tmp_path / "host" / "metrics.csv").open() as f:
        assert [int(row["step"]) for row in csv.DictReader(f)] == [STEPS]
    # the limit bit: the cgroup filled up to it and the kernel had to take pages back
    assert run.peak_bytes is None or run.peak_bytes >= 0.9 * LIMIT
    assert run.limit_hits


@pytest.mark.slow
def test_the_same_limit_kills_a_run_that_copies_the_store_into_memory(big_store, tmp_path) -> None:
    limit_mechanism()
    root, _ = big_store
    run, log = train_under_limit(root, tmp_path / "device", "device")
    assert run.oom_killed, f"{run.summary()}\n{log[-3000:]}"
    assert not (tmp_path / "device" / "metrics.csv").exists()
