"""The synthetic run directories of tests/support/runs.py read back as valid leaderboard rows."""

from __future__ import annotations

from pathlib import Path

from offline_gitd.leaderboard.schema import read_rows
from tests.support.runs import write_run


def test_synthetic_run_reads_back_as_valid_rows(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "run", env="Pong", algorithm="cql", critic="td", seed=3, steps=[0, 10], returns=[-21.0, 5.5]
    )
    rows = read_rows(run / "results.csv")
    assert [line for line, _ in rows] == [2, 3]
    assert [(row.seed, row.step, row.return_) for _, row in rows] == [(3, 0, -21.0), (3, 10, 5.5)]
