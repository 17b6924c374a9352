"""Memory-mapped frame stores gathered on the host are advised as read at random
(docs/datasets.md#bigger-than-memory): checked in the flags Linux shows for each mapping."""

from pathlib import Path

import numpy as np
import pytest

from offline_gitd.data.episode_store import EpisodeStore, SegmentedRows
from offline_gitd.data.random_access import advise_random_access
from offline_gitd.data.replay import Replay
from offline_gitd.offline.feed import ChunkFeed


def random_read_flags(path: Path) -> list[bool]:
    """For each mapping of ``path`` in this process: whether the kernel reads it at random
    (``rr`` in its ``VmFlags``, set by ``MADV_RANDOM``)."""
    flags, current = [], None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header line
            current = fields[5] if len(fields) > 5 else None
        elif fields[0] == "VmFlags:" and current == str(path):
            flags.append("rr" in fields[1:])
    return flags


def mapped_frames(directory: Path, rows: int, name: str) -> np.ndarray:
    path = directory / f"{name}.npy"
    np.save(path, np.arange(rows * 84 * 84, dtype=np.uint64).astype(np.uint8).reshape(rows, 84, 84))
    return np.load(path, mmap_mode="r")


def test_each_map_under_the_rows_is_advised_and_reads_the_same(tmp_path) -> None:
    first, second = mapped_frames(tmp_path, 30, "a"), mapped_frames(tmp_path, 20, "b")
    expected = np.concatenate([np.asarray(first[:25]), np.asarray(second)])
    rows = SegmentedRows([first[:25], second])  # a view (a checkpoint's first fraction) and a whole map
    assert random_read_flags(tmp_path / "a.npy") == [False]
    assert advise_random_access(rows) == 2
    assert random_read_flags(tmp_path / "a.npy") == [True]
    assert random_read_flags(tmp_path / "b.npy") == [True]
    np.testing.assert_array_equal(rows[np.arange(45)], expected)


def test_arrays_in_memory_have_no_map_to_advise() -> None:
    assert advise_random_access(np.zeros((4, 84, 84), np.uint8)) == 0
    assert advise_random_access(SegmentedRows([np.zeros((4, 84, 84), np.uint8)])) == 0


@pytest.mark.parametrize(("frames", "advised"), [("host", True), ("device", False)])
def test_the_feed_advises_a_mapped_store_only_when_it_gathers_on_the_host(tmp_path, frames, advised) -> None:
    rows = 40
    store = EpisodeStore.from_arrays(
        SegmentedRows([mapped_frames(tmp_path, rows, "frames")]),
        np.zeros(rows, np.int32),
        np.zeros(rows, np.float32),
        np.zeros(rows, bool),
        np.array([0, 20]),
    )
    ChunkFeed(Replay(store, stack=4, n_step=1, gamma=0.99), batch_size=2, driver="loop", frames=frames)
    assert random_read_flags(tmp_path / "frames.npy") == [advised]
