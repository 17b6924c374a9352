"""Rows tied to their data and code (docs/leaderboard.md#what-made-a-row): the columns of what made a
row, boards written before them, the duplicate rule over the data digest, and the warnings of
``show`` for one config over two recordings or one seed from two runs."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from offline_gitd.cli import main
from offline_gitd.leaderboard.identity import pooling_warnings
from offline_gitd.leaderboard.normalise import to_frame
from offline_gitd.leaderboard.schema import COLUMNS, PREVIOUS_COLUMNS, SchemaError, is_legacy, read_rows
from offline_gitd.leaderboard.submit import submit
from tests.support.runs import write_run

D1, D2 = "a" * 64, "b" * 64
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def run(root: Path, name: str, **fields: object) -> Path:
    spec: dict[str, object] = dict(env="Pong", algorithm="cql", critic="td", seed=0, steps=[0, 10], returns=[1.0, 2.0])
    spec.update(fields)
    return write_run(root / name, **spec)


def add_cells(run_dir: Path, **cells: str) -> Path:
    """Fill columns of what made the rows of ``run_dir``'s results.csv (written with them empty)."""
    path = run_dir / "results.csv"
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({**row, **cells} for row in rows)
    return run_dir


def write_previous_board(path: Path, source: Path) -> None:
    """``source``'s rows under the header boards had before the columns of what made a row."""
    with (source / "results.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=PREVIOUS_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def test_rows_carry_commit_dirty_diff_data_and_device_and_refuse_malformed_ones(tmp_path: Path) -> None:
    made = add_cells(run(tmp_path, "a"), commit=COMMIT, dirty="true", diff_sha256=D2, data_sha256=D1, device="cpu")
    rows = [row for _, row in read_rows(made / "results.csv")]
    assert {(r.commit, r.dirty, r.diff_sha256, r.data_sha256, r.device) for r in rows} == {
        (COMMIT, "true", D2, D1, "cpu")
    }
    assert rows[0].identity == (rows[0].config_hash, D1)
    for cells, field in (
        ({"commit": "95530e6+dirty"}, "commit"),
        ({"dirty": "yes"}, "dirty"),
        ({"data_sha256": "ABC"}, "data_sha256"),
        ({"diff_sha256": "a" * 63}, "diff_sha256"),
    ):
        bad = add_cells(run(tmp_path, f"bad-{field}"), **cells)
        with pytest.raises(SchemaError, match=f"results.csv:2: field '{field}'"):
            read_rows(bad / "results.csv")


def test_a_board_written_before_the_columns_loads_as_unknown_and_resubmitting_stays_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old_run = run(tmp_path, "old")
    board = tmp_path / "board.csv"
    write_previous_board(board, old_run)
    before = board.read_bytes()
    assert is_legacy(board)
    rows = [row for _, row in read_rows(board)]
    assert {(r.commit, r.dirty, r.diff_sha256, r.data_sha256, r.device) for r in rows} == {("", "", "", "", "")}
    assert main(["leaderboard", "show", "--board", str(board), "--normalise", "baseline"]) == 0
    # the run written before the columns, submitted again: nothing added, the board untouched
    assert submit([old_run], board, allow_new_env=False).already == 2
    assert board.read_bytes() == before
    # a new run upgrades the header once; the earlier rows keep their values with the columns empty
    new = add_cells(run(tmp_path, "new", seed=1), commit=COMMIT, dirty="false", data_sha256=D1, device="cpu")
    assert submit([new], board, allow_new_env=False).total_rows == 4
    assert not is_legacy(board) and board.read_text().splitlines()[0] == ",".join(COLUMNS)
    again = [row for _, row in read_rows(board)]
    assert again[:2] == rows and {r.data_sha256 for r in again[2:]} == {D1}
    upgraded = board.read_bytes()
    assert submit([new, old_run], board, allow_new_env=False).already == 4
    assert board.read_bytes() == upgraded


def test_one_config_on_two_recordings_is_two_settings_on_the_board(tmp_path: Path) -> None:
    """The same config hash, seed and step on another data digest is another row, not a duplicate;
    on the same digest (or with both unknown) it is refused as before."""
    board = tmp_path / "board.csv"
    first = add_cells(run(tmp_path, "first", run_id="first-s0"), data_sha256=D1)
    submit([first], board, allow_new_env=False)
    other_data = add_cells(run(tmp_path, "second", run_id="second-s0"), data_sha256=D2)
    assert submit([other_data], board, allow_new_env=False).total_rows == 4
    same_data = add_cells(run(tmp_path, "third", run_id="third-s0"), data_sha256=D2)
    with pytest.raises(Exception, match="config_hash and data_sha256"):
        submit([same_data], board, allow_new_env=False)
    assert submit([same_data], board, allow_new_env=False, skip_existing=True).added[same_data] == 0


def frame_of(*run_dirs: Path) -> pd.DataFrame:
    return to_frame([row for run_dir in run_dirs for _, row in read_rows(run_dir / "results.csv")])


def test_show_warns_of_one_config_over_two_digests_and_of_a_seed_from_two_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = add_cells(run(tmp_path, "one", run_id="one-s0"), data_sha256=D1, device="cpu")
    assert pooling_warnings(frame_of(one)) == []
    other = add_cells(run(tmp_path, "two", run_id="two-s0", seed=1), data_sha256=D2, device="cpu")
    (line,) = pooling_warnings(frame_of(one, other))
    assert line.startswith(
        "config cfg0 (cql:td on Pong) pools rows trained on 2 data digests (aaaaaaaaaaaa, bbbbbbbbbbbb)"
    )
    unknown = run(tmp_path, "legacy", run_id="legacy-s2", seed=2)
    assert "(aaaaaaaaaaaa, not recorded)" in pooling_warnings(frame_of(one, unknown))[0]

    gpu = add_cells(run(tmp_path, "gpu", run_id="gpu-s0"), data_sha256=D1, device="NVIDIA H100 80GB HBM3")
    (line,) = pooling_warnings(frame_of(one, gpu))
    assert "seed(s) 0 each come from 2 runs (devices: NVIDIA H100 80GB HBM3, cpu)" in line
    assert "not independent samples" in line

    # submit keeps them apart: the GPU run's seed 0 is the CPU run's setting again
    board = tmp_path / "board.csv"
    submit([one], board, allow_new_env=False)
    with pytest.raises(Exception, match="duplicate of"):
        submit([gpu], board, allow_new_env=False)
    # a user who concatenates a CPU and a GPU board is told
    board.write_text(board.read_text() + "".join((gpu / "results.csv").read_text().splitlines(keepends=True)[1:]))
    capsys.readouterr()
    assert main(["leaderboard", "show", "--board", str(board), "--normalise", "baseline"]) == 0
    err = capsys.readouterr().err
    assert err.count("offline_gitd: warning:") == 1 and "come from 2 runs" in err


def test_the_html_page_says_which_commits_data_and_devices_made_the_rows(tmp_path: Path) -> None:
    from offline_gitd.leaderboard.html import board_provenance

    board = tmp_path / "board.csv"
    made = add_cells(run(tmp_path, "a"), commit=COMMIT, dirty="true", diff_sha256=D2, data_sha256=D1, device="cpu")
    submit([made, run(tmp_path, "old", seed=1)], board, allow_new_env=False)
    facts = board_provenance(board, 4)
    assert facts["commits"] == "0123456789ab+dirty (2 rows); not recorded (2 rows)"
    assert facts["data digests"] == "aaaaaaaaaaaa (2 rows); not recorded (2 rows)"
    assert facts["devices"] == "cpu (2 rows); not recorded (2 rows)"
