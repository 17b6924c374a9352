"""The wall time of each piece of a sweep, kept beside its board (docs/sweeps.md#timings).

Run directories, logs and states live under ``--out`` and may be lost with a machine; the board
is what is committed and published. So each dataset recorded and each run finished appends one
line to ``timings.csv`` in its board's directory as soon as it ends, and the time a sweep took is
known, piece by piece, wherever its board went. A run continued after an interruption gets one
line per attempt (``resumed`` says which continued a started run): its time is their sum.

The file is appended under an exclusive lock, and each line is written whole, so two sweeps
sharing a board directory never interleave their lines.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

from offline_gitd.durable import file_lock
from offline_gitd.sweeps.state import now

TIMINGS_FILE = "timings.csv"
COLUMNS = (
    "finished_at",
    "spec",
    "kind",
    "name",
    "config_hash",
    "seconds",
    "resumed",
    "attempt",
    "host",
    "cpus",
    "gpus",
)


@dataclass(frozen=True)
class Piece:
    """One finished piece of a sweep: a dataset recorded (``kind`` dataset, ``name`` its id) or a
    run trained (``kind`` run, ``name`` its run directory's)."""

    spec: str
    kind: str
    name: str
    seconds: float
    config_hash: str = ""
    resumed: bool = False
    attempt: int = 1
    host: str = ""
    cpus: float = 0.0
    gpus: float = 0.0

    def record(self) -> list[str]:
        return [
            now(),
            self.spec,
            self.kind,
            self.name,
            self.config_hash,
            f"{self.seconds:.1f}",
            str(self.resumed).lower(),
            str(self.attempt),
            self.host,
            f"{self.cpus:g}",
            f"{self.gpus:g}",
        ]


def timings_path(board: Path) -> Path:
    """Where the pieces of the runs that go to ``board`` are timed: beside it."""
    return board.parent / TIMINGS_FILE


def append_piece(path: Path, piece: Piece) -> None:
    """Append ``piece`` to the timings file at ``path`` (made with its header if absent)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(piece.record())
    with file_lock(path, flags=os.O_WRONLY | os.O_APPEND | os.O_CREAT) as fd:
        header = ",".join(COLUMNS) + "\n" if os.fstat(fd).st_size == 0 else ""
        os.write(fd, (header + buffer.getvalue()).encode())
        os.fsync(fd)


def read_pieces(path: Path) -> list[dict[str, str]]:
    """The lines of a timings file as dicts (none if it is absent)."""
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))
