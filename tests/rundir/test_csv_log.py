"""metrics.csv / results.csv survive a row torn by a crash mid-write: resume drops it, never glues."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from offline_gitd.rundir.files import CsvLog

COLUMNS = ("epoch", "step", "loss")


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def written(tmp_path: Path) -> CsvLog:
    log = CsvLog(tmp_path / "metrics.csv", COLUMNS)
    log.append([{"epoch": 1, "step": 10, "loss": 0.5}, {"epoch": 2, "step": 20, "loss": 0.25}])
    return log


@pytest.mark.parametrize(
    "torn",
    ["3,30,0.12", "3,30,0.1", "3,3", "3"],  # every field but cut mid-value, fewer fields, one field
)
def test_torn_last_row_is_dropped_on_resume_and_the_next_row_stands_alone(tmp_path: Path, torn: str) -> None:
    log = written(tmp_path)
    with log.path.open("a") as f:
        f.write(torn)  # the crash: no line end
    resumed = CsvLog(log.path)
    resumed.drop_after("step", 20)  # epoch 2 is the last checkpoint
    resumed.append([{"epoch": 3, "step": 30, "loss": 0.125}])
    assert rows_of(log.path) == [
        {"epoch": "1", "step": "10", "loss": "0.5"},
        {"epoch": "2", "step": "20", "loss": "0.25"},
        {"epoch": "3", "step": "30", "loss": "0.125"},
    ]
    assert not list(tmp_path.glob("*.tmp"))


def test_complete_rows_after_the_checkpoint_are_dropped_and_earlier_ones_kept(tmp_path: Path) -> None:
    log = written(tmp_path)
    log.drop_after("step", 10)
    assert [row["step"] for row in rows_of(log.path)] == ["10"]


def test_full_disk_while_appending_is_one_line_and_resume_drops_the_part_row(tmp_path: Path) -> None:
    """A real EFBIG in a child process (file-size limit, as a full disk gives ENOSPC) mid-append."""
    import os
    import subprocess
    import sys

    log = written(tmp_path)
    limit = log.path.stat().st_size + 10  # room for part of the next row only
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from offline_gitd.rundir.files import CsvLog\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "try:\n"
        "    CsvLog(Path(sys.argv[1])).append([{'epoch': 3, 'step': 30, 'loss': 0.123456789}] * 3)\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(log.path)],
        env={**os.environ, "PYTHONPATH": str(Path.cwd())},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.startswith("DiskFull cannot write") and "File too large" in proc.stdout, proc.stderr
    assert log.path.stat().st_size == limit  # the torn row is on disk
    resumed = CsvLog(log.path)
    resumed.drop_after("step", 20)
    resumed.append([{"epoch": 3, "step": 30, "loss": 0.125}])
    assert [row["step"] for row in rows_of(log.path)] == ["10", "20", "30"]
