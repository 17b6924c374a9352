"""Tell the kernel that a memory-mapped frame store is read at random (docs/datasets.md#bigger-than-memory).

A page fault on a memory-mapped file reads not one page but a window around it as large as the
disk's read-ahead (128 KiB by default, often megabytes on cloud and RAID volumes; 8 MiB on the
machine the docs' figures come from). Training samples rows uniformly, so nearly all of that
window is read for nothing and, when the store does not fit in memory, pushes out pages that were
wanted: on a 3.15 GiB store under a 1.25 GiB limit, 800 steps read 12.6 GiB from disk, four times
the store. Advised as random access (``MADV_RANDOM``), a fault reads only the pages touched: the
same run read 880 MiB.

Only for stores gathered on the host: a store copied to the device once is read front to back,
where the read-ahead is what makes the copy fast.
"""

from __future__ import annotations

import mmap

import numpy as np

from offline_gitd.data.episode_store import SegmentedRows


def advise_random_access(rows: np.ndarray | SegmentedRows) -> int:
    """Advise every memory map under ``rows`` (an array or each segment) as read at random.

    Returns how many maps were advised: 0 for arrays in memory, or where the platform has no
    ``MADV_RANDOM`` (Windows), which changes speed only, never what is read.
    """
    if not hasattr(mmap, "MADV_RANDOM"):
        return 0
    maps: dict[int, mmap.mmap] = {}
    for segment in rows.segments if isinstance(rows, SegmentedRows) else [rows]:
        base = segment
        while base is not None and not isinstance(base, mmap.mmap):  # a view's base is what it views
            base = getattr(base, "base", None)
        if base is not None:
            maps[id(base)] = base
    for mapped in maps.values():
        mapped.madvise(mmap.MADV_RANDOM)
    return len(maps)
