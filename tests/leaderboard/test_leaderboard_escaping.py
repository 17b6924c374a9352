"""Names on a board are data, never markup or formulas: ``show`` escapes them per format; a killed
submit's temp file is swept by the next submit."""

from __future__ import annotations

import csv
import io
import os
import shutil
import time
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.leaderboard.submit import STALE_AFTER_S  # noqa: E402
from tests.support.runs import write_run  # noqa: E402

FORMULA = "=cmd|' /C calc'!A0"
PIPE_AND_NEWLINE = "evil|col\nrow"


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("board")
    runs = []
    for algorithm, gain in (("cql", 1.0), (FORMULA, 1.5), (PIPE_AND_NEWLINE, 2.0)):
        for env in ("Pong", "Breakout"):
            for seed in range(2):
                runs.append(
                    str(
                        write_run(
                            root / f"{gain}-{env}-{seed}",
                            env=env,
                            algorithm=algorithm,
                            critic="td",
                            seed=seed,
                            steps=[0, 1000],
                            returns=[gain * (1 + seed), gain * (2 + seed)],
                            K=1,
                            beta=0.0,
                        )
                    )
                )
    path = root / "board.csv"
    assert main(["leaderboard", "submit", *runs, "--board", str(path)]) == 0
    return path


def show(board: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> str:
    capsys.readouterr()
    assert main(["leaderboard", "show", "--board", str(board), "--reps", "50", "--format", fmt]) == 0
    return capsys.readouterr().out


def test_csv_cells_cannot_start_a_formula(board: Path, capsys) -> None:
    rows = list(csv.DictReader(io.StringIO(show(board, capsys, "csv"))))
    methods = {row["method"] for row in rows}
    assert f"'{FORMULA}:td" in methods
    assert not any(value.startswith(("=", "+", "@")) for row in rows for value in row.values())


def test_markdown_rows_keep_their_columns(board: Path, capsys) -> None:
    blocks = show(board, capsys, "markdown").strip().split("\n\n")
    lines = blocks[0].splitlines()
    assert len(lines) == 2 + 3  # title, rule, one line per method
    columns = {line.replace("\\|", "").count("|") for line in lines}
    assert len(columns) == 1
    assert any("evil\\|col row:td" in line for line in lines)
    per_env = [line for line in blocks[-1].splitlines() if line.startswith("|")]
    assert len({line.replace("\\|", "").count("|") for line in per_env}) == 1  # the per-env table too
    assert any("evil\\|col row:td" in line for line in per_env)


def test_text_table_keeps_one_line_per_method(board: Path, capsys) -> None:
    blocks = show(board, capsys, "table").strip().split("\n\n")
    lines = blocks[0].splitlines()
    assert len(lines) == 1 + 3 and any("evil|col\\nrow:td" in line for line in lines)
    assert sum("evil|col\\nrow:td" in line for line in blocks[-1].splitlines()) == 2  # one per env


def test_submit_sweeps_a_killed_submits_temp_file(board: Path, tmp_path: Path) -> None:
    board = Path(shutil.copy(board, tmp_path / "board.csv"))
    stale = board.parent / f".{board.name}.abc123.tmp"  # named before names carried the writer
    stale.write_bytes(b"suite,env\nhalf a bo")
    old = time.time() - 2 * STALE_AFTER_S
    os.utime(stale, (old, old))
    run = write_run(
        tmp_path / "late", env="Pong", algorithm="cql", critic="td", seed=7, steps=[0], returns=[1.0], K=1, beta=0.0
    )
    before = board.read_bytes()
    assert main(["leaderboard", "submit", str(run), "--board", str(board)]) == 0
    assert not stale.exists() and board.read_bytes().startswith(before)
    assert not list(board.parent.glob(f".{board.name}.*.tmp"))
