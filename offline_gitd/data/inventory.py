"""What is already on disk: RLU shard files (whole or ``.part``) in a data folder, and folder sizes.

``offline_gitd datasets`` lists and describes local data from these, without the network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_SHARD_FILE = re.compile(r"^run_(\d+)-(\d{5})-of-(\d{5})(\.part)?$")


@dataclass(frozen=True)
class LocalShard:
    """A shard file found on disk: complete (``partial`` False) or an unfinished ``.part``."""

    run: int
    shard: int
    num_shards: int
    size: int
    partial: bool


def scan_local_shards(directory: Path) -> list[LocalShard]:
    """Shards and ``.part`` files in one game's raw folder, sorted by run and shard."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _SHARD_FILE.match(path.name)
        if match and path.is_file():
            run, shard, num_shards = (int(match.group(i)) for i in (1, 2, 3))
            found.append(LocalShard(run, shard, num_shards, path.stat().st_size, match.group(4) is not None))
    return sorted(found, key=lambda s: (s.run, s.shard, s.partial))


def directory_size(path: Path) -> int:
    """Total bytes of the files under ``path`` (0 when it does not exist)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def format_bytes(nbytes: float) -> str:
    """Human-readable binary size: ``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")
