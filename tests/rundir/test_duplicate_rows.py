"""Repairing what two writers of one run directory left (docs/locks.md): rows written twice are kept
once, on resume (in the file) and on submit (on the board), each time with one line; rows of one
run, seed and step that disagree stay an error naming both lines; a sweep with one such damaged
run finishes the others and reports it with the command that fixes it."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.leaderboard.repeats import RowsDisagree
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.train import train
from offline_gitd.rundir.files import RESULT_COLUMNS, CsvLog, result_row
from offline_gitd.sweeps.runner import SweepOptions, run_sweep
from offline_gitd.sweeps.spec import expand, load_spec
from offline_gitd.sweeps.state import SweepPaths, read_state, write_state


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def written_twice(path: Path, later: dict[str, str] | None = None) -> None:
    """Append every row of ``path`` again, as a second writer would (``later``: the columns that say
    when it wrote, which differ)."""
    rows = read(path)
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writerows({**row, **{k: v for k, v in (later or {}).items() if k in row}} for row in rows)


def provenance(run_id: str, critic: str = "td") -> dict[str, str]:
    return {
        "suite": "gym",
        "env": "CartPole-v1",
        "run_id": run_id,
        "config_hash": f"hash-{critic}",
        "package_version": "0.1.0",
        "method_config": "",
    }


def write_results(run_dir: Path, run_id: str, critic: str, returns: dict[int, float]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    log = CsvLog(run_dir / "results.csv", RESULT_COLUMNS)
    log.append([result_row(provenance(run_id, critic), "dqn", critic, 1, 0.0, 0, s, r) for s, r in returns.items()])
    return run_dir


# -- the rule, on a file -------------------------------------------------------------------------


def test_rows_written_twice_are_kept_once_and_every_other_byte_stays(tmp_path: Path) -> None:
    run_dir = write_results(tmp_path / "run", "abc", "td", {50: 1.0, 100: 2.5})
    path = run_dir / "results.csv"
    original = path.read_bytes()
    written_twice(path, {"created_at": "2030-01-01T00:00:00+00:00"})  # another writer, later
    with path.open("a", newline="") as handle:
        handle.write("gym,CartPole-v1,dqn,td,1,0.0,0,15")  # a row torn by a crash: left to drop_after
    assert CsvLog(path).drop_repeats() == [4, 5]
    assert path.read_bytes() == original + b"gym,CartPole-v1,dqn,td,1,0.0,0,15"
    assert CsvLog(path).drop_repeats() == []


def test_rows_that_disagree_are_an_error_naming_both_lines(tmp_path: Path) -> None:
    path = write_results(tmp_path / "run", "abc", "td", {50: 1.0, 100: 2.5}) / "results.csv"
    before = path.read_bytes()
    rows = read(path)
    rows[1]["return"] = "9.0"
    with path.open("a", newline="") as handle:
        csv.DictWriter(handle, list(rows[0])).writerows(rows)
    with pytest.raises(RowsDisagree) as refused:
        CsvLog(path).drop_repeats()
    message = str(refused.value)
    assert f"{path}:3 and {path}:5 both hold run_id abc-s0, seed 0, step 100" in message
    assert "return 2.5 vs 9.0" in message and "--overwrite" in message
    assert path.read_bytes().startswith(before)  # nothing rewritten


# -- on submit -----------------------------------------------------------------------------------


def test_submit_puts_rows_written_twice_on_the_board_once(tmp_path: Path, capsys) -> None:
    run_dir = write_results(tmp_path / "run", "abc", "td", {50: 1.0, 100: 2.5})
    written_twice(run_dir / "results.csv", {"created_at": "2030-01-01T00:00:00+00:00"})
    board = tmp_path / "board.csv"
    assert main(["leaderboard", "submit", str(run_dir), "--board", str(board)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 row(s) repeated exactly (line 4, 5)" in err
    assert [row["step"] for row in read(board)] == ["50", "100"]


def test_submit_refuses_rows_that_disagree_naming_both(tmp_path: Path, capsys) -> None:
    run_dir = write_results(tmp_path / "run", "abc", "td", {50: 1.0})
    rows = read(run_dir / "results.csv")
    rows[0]["return"] = "3.0"
    with (run_dir / "results.csv").open("a", newline="") as handle:
        csv.DictWriter(handle, list(rows[0])).writerows(rows)
    board = tmp_path / "board.csv"
    assert main(["leaderboard", "submit", str(run_dir), "--board", str(board)]) == 2
    err = capsys.readouterr().err
    assert f"results.csv:2 and {run_dir / 'results.csv'}:3 both hold" in err and err.count("\n") == 1
    assert not board.exists()


# -- on resume, a real run ---------------------------------------------------------------------


def test_a_resumed_run_repairs_its_files_with_one_line(tmp_path: Path, capsys, jax_compilation_cache) -> None:
    run_dir = tmp_path / "run"
    cfg = OnlineConfig(
        algo="dqn",
        env="CartPole-v1",
        loop="python",
        critic="td",
        steps=200,
        mlp_hidden="16,16",
        batch_size=16,
        initial_samples=50,
        log_every=50,
        checkpoint_every=100,
        out=str(run_dir),
    )
    train(cfg, progress=False)
    files = {name: read(run_dir / name) for name in ("results.csv", "metrics.csv", "episodes.csv")}
    written_twice(run_dir / "results.csv", {"created_at": "2030-01-01T00:00:00+00:00"})
    written_twice(run_dir / "metrics.csv", {"window_seconds": "99.9"})
    written_twice(run_dir / "episodes.csv")
    capsys.readouterr()
    assert main(["online", "dqn", "--out", str(run_dir), "--resume", "--steps", "300", "--no-progress"]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "written twice" in line]
    counts = {name: len(rows) for name, rows in files.items()}
    assert notes == [
        f"offline_gitd: note: removed rows written twice by two processes ({counts['metrics.csv']} from "
        f"metrics.csv, {counts['results.csv']} from results.csv, {counts['episodes.csv']} from episodes.csv) "
        f"in {run_dir}; each kept once"
    ]
    for name, before in files.items():
        after = read(run_dir / name)
        assert after[: len(before)] == before  # each row once, then the resumed run's own
        keys = [(row["seed"], row["step"]) for row in after]
        assert len(keys) == len(set(keys))
    assert max(int(row["step"]) for row in read(run_dir / "results.csv")) == 300


# -- in a sweep ----------------------------------------------------------------------------------

SPEC = """command = "online dqn"
board = "board.csv"

[fixed]
env = "CartPole-v1"
loop = "python"
steps = 100

[grid]
critic = ["td", "itd", "gitd"]
"""


def test_a_sweep_finishes_the_others_and_names_the_fix_of_a_damaged_run(tmp_path: Path) -> None:
    """Three finished runs not yet on the board (a sweep stopped before submitting them): one
    clean, one with rows written twice, one whose rows disagree."""
    spec_path = tmp_path / "grid.toml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    out = tmp_path / "sweep"
    paths = SweepPaths(out)
    plans = {plan.fields["critic"]: plan for plan in expand(spec)}
    for critic, plan in plans.items():
        write_results(paths.run_dir(plan.name), f"run-{critic}", critic, {50: 1.0, 100: 2.0})
        write_state(paths.state(plan.name), {"status": "done", "argv": list(plan.argv)})
    written_twice(paths.run_dir(plans["itd"].name) / "results.csv", {"created_at": "2030-01-01T00:00:00+00:00"})
    damaged = paths.run_dir(plans["gitd"].name) / "results.csv"
    rows = read(damaged)
    rows[1]["return"] = "7.0"
    with damaged.open("a", newline="") as handle:
        csv.DictWriter(handle, list(rows[0])).writerows(rows[1:])

    stream = io.StringIO()
    assert run_sweep(spec, SweepOptions(out=out), stream) == 1
    report = stream.getvalue()
    assert "sweep finished: 2/3 done, 1 failed" in report
    (failed,) = [line for line in report.splitlines() if "failed: " in line]
    assert str(paths.run_dir(plans["gitd"].name)) in failed and f"{damaged}:3 and {damaged}:4" in failed
    fix = (
        f"offline_gitd online dqn --critic gitd --env CartPole-v1 --steps 100 --loop python "
        f"--out {paths.run_dir(plans['gitd'].name)} "
        "--no-progress --overwrite"
    )
    assert fix in failed and "then run this sweep again" in failed
    board = read(out / "board.csv")
    assert sorted((row["critic"], row["step"]) for row in board) == [
        ("itd", "100"),
        ("itd", "50"),
        ("td", "100"),
        ("td", "50"),
    ]

    damaged.write_text("".join(damaged.read_text().splitlines(keepends=True)[:3]))  # the user keeps the right lines
    stream = io.StringIO()
    assert run_sweep(spec, SweepOptions(out=out), stream) == 0
    assert "nothing to do" in stream.getvalue()
    assert len(read(out / "board.csv")) == 6
    assert all(read_state(paths.state(plan.name)).get("submitted") for plan in plans.values())
