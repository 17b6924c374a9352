"""A sweep continued from its board alone (docs/sweeps.md#moving-a-sweep-to-another-machine).

The board stands for run directories and datasets that are gone: a run whose rows are all on its
board (found by its config hash) is not trained again, a dataset only such runs train on is not
recorded, and each dataset and run is timed beside the board. The end-to-end test runs a real
sweep on an embedded local Ray instance, deletes everything but the board, and runs it again; the
others check the rules on hand-made boards, without Ray.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.leaderboard.schema import COLUMNS
from offline_gitd.sweeps.core import CONFLICT, ON_BOARD, action, needed_collect
from offline_gitd.sweeps.on_board import BoardCheck, Expected, recorded_hash
from offline_gitd.sweeps.spec import expand, load_spec
from offline_gitd.sweeps.state import SweepPaths
from offline_gitd.sweeps.timings import TIMINGS_FILE, Piece, append_piece, read_pieces
from tests.support.runs import result_record, write_run

# Two tiny random-policy datasets and one tiny CQL run on each: two seeds, two epochs of 10
# gradient steps, one evaluation episode of at most 20 steps after each epoch (4 rows a run).
SPEC = """command = "train"
board = "board.csv"
data_dir = "{data}"

[resources]
cpus = 1
retries = 0

[[collect]]
env = "CartPole-v1"
steps = 300
policy = "random"
out = "offline_gitd/cartpole/random-300-v0"

[[collect]]
env = "MountainCar-v0"
steps = 300
policy = "random"
out = "offline_gitd/mountaincar/random-300-v0"

[fixed]
critic = "td"
seeds = "0-1"
epochs = 2
steps_per_epoch = 10
eval_episodes = 1
horizon = 20
mlp_hidden = "16,16"
batch_size = 16

[grid]
data = [
  {{ name = "cartpole", dataset = "minari:offline_gitd/cartpole/random-300-v0" }},
  {{ name = "mountaincar", dataset = "minari:offline_gitd/mountaincar/random-300-v0" }},
]
"""
CARTPOLE = "offline_gitd/cartpole/random-300-v0"
MOUNTAINCAR = "offline_gitd/mountaincar/random-300-v0"


def write_spec(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC.format(data=data))
    return spec, data


def sweep(spec: Path, out: Path, board: Path) -> str:
    """``offline_gitd sweep`` as a user runs it, in its own process; its output."""
    result = subprocess.run(
        [sys.executable, "-m", "offline_gitd.cli", "sweep", str(spec), "--out", str(out), "--board", str(board)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def board_rows(board: Path) -> list[dict[str, str]]:
    with board.open(newline="") as handle:
        return list(csv.DictReader(handle))


def local_datasets(data: Path) -> list[str]:
    """The ids of the Minari datasets under the data root (``minari/ID/data/metadata.json``)."""
    root = data / "minari"
    return sorted(str(path.parent.parent.relative_to(root)) for path in root.rglob("metadata.json"))


@pytest.mark.slow  # two training passes on Ray, ~2 min from a cold compilation cache; the rules are tested below
@pytest.mark.ray  # each pass that trains starts an embedded local Ray instance
def test_a_sweep_continues_from_its_board_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, data = write_spec(tmp_path)
    board = tmp_path / "committed" / "board.csv"  # the board the repository keeps
    board.parent.mkdir()
    out = tmp_path / "sweep"
    timings = board.parent / TIMINGS_FILE

    first = sweep(spec, out, board)
    assert "sweep finished: 2/2 done, 0 failed" in first
    assert f"dataset ready: collect-{CARTPOLE.replace('/', '-')} (recorded in " in first
    assert "note:" not in first  # every run recorded the config hash the sweep computed for it
    plans = expand(load_spec(spec))
    check = BoardCheck(load_spec(spec))
    for plan in plans:  # computed from the local dataset here; from the collect env below
        assert check.expected(plan).config_hash == recorded_hash(out / "runs" / plan.name)
    assert local_datasets(data) == [CARTPOLE, MOUNTAINCAR]
    rows = board_rows(board)
    assert len(rows) == 2 * 2 * 2  # 2 runs x 2 seeds x 2 epochs
    pieces = read_pieces(timings)
    assert Counter(piece["kind"] for piece in pieces) == {"dataset": 2, "run": 2}
    assert {piece["name"] for piece in pieces} == {CARTPOLE, MOUNTAINCAR, "cartpole", "mountaincar"}
    assert all(float(piece["seconds"]) > 0 for piece in pieces)
    assert {piece["config_hash"] for piece in pieces if piece["kind"] == "run"} == {row["config_hash"] for row in rows}
    assert "each piece (also in " in first and "  run      cartpole " in first
    curves = sorted(path.name for path in (board.parent / "behaviour").iterdir())
    assert curves == [f"{CARTPOLE.replace('/', '-')}.csv", f"{MOUNTAINCAR.replace('/', '-')}.csv"]

    # Another machine: no run directory, no state, no dataset; only the committed board.
    shutil.rmtree(out)
    shutil.rmtree(data)
    board_before, timings_before = board.read_bytes(), timings.read_bytes()
    curves_before = {path: path.read_bytes() for path in (board.parent / "behaviour").iterdir()}
    capsys.readouterr()
    assert main(["sweep", str(spec), "--out", str(out), "--board", str(board), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert dry.count(ON_BOARD) == 2 and "collect first" not in dry
    assert "not collected: 2 of 2 datasets" in dry and "every run is on its board" in dry
    again = sweep(spec, out, board)
    assert "2 already done (2 of them on the board alone" in again
    assert "nothing to do: every run is on its board, no dataset to record" in again
    assert "scheduling" not in again and "collecting" not in again
    assert not data.exists() and not (out / "runs").exists()
    assert board.read_bytes() == board_before and timings.read_bytes() == timings_before
    assert {path: path.read_bytes() for path in (board.parent / "behaviour").iterdir()} == curves_before
    capsys.readouterr()
    assert main(["sweep", str(spec), "--out", str(out), "--status"]) == 0
    status = capsys.readouterr().out
    assert status.count("all its rows on its board (no run directory here)") == 2 and "done 2" in status

    # Seed 1 of the CartPole run lost from the board: that run alone trains again, on its dataset
    # alone, and only seed 1's rows are added; seed 0's stay the ones first submitted.
    cartpole = {row["config_hash"] for row in rows if row["env"] == CARTPOLE}
    lost = [row for row in rows if row["config_hash"] in cartpole and row["seed"] == "1"]
    kept = [row for row in rows if row not in lost]
    with board.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(kept)
    assert main(["sweep", str(spec), "--out", str(out), "--board", str(board), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert dry.count(ON_BOARD) == 1 and f"--out {CARTPOLE}" in dry and MOUNTAINCAR not in dry.split("results go")[1]
    third = sweep(spec, out, board)
    assert "1 already done (1 of them on the board alone" in third and "1 to run" in third
    assert "not collecting 1 datasets" in third and f"collecting {CARTPOLE}" in third
    assert f"collecting {MOUNTAINCAR}" not in third and "mountaincar" not in third.split("sweep finished")[0]
    assert "done     cartpole" in third and "2 rows on the board" in third
    assert local_datasets(data) == [CARTPOLE]
    # the run trained again, and the behaviour run of the one dataset recorded again
    assert sorted(path.name for path in (out / "runs").iterdir()) == [
        "cartpole",
        f"collect-{CARTPOLE.replace('/', '-')}",
    ]
    after = board_rows(board)
    key = Counter((row["config_hash"], row["seed"], row["step"]) for row in after)
    assert key == Counter((row["config_hash"], row["seed"], row["step"]) for row in rows)  # each once
    assert after[: len(kept)] == kept  # the rows already there are untouched
    new_run = json.loads((out / "runs" / "cartpole" / "config.json").read_text())["run_id"]
    assert {row["run_id"] for row in after[len(kept) :]} == {f"{new_run}-s1"}
    pieces = read_pieces(timings)[len(pieces) :]
    assert [(piece["kind"], piece["name"]) for piece in pieces] == [("dataset", CARTPOLE), ("run", "cartpole")]


# ----------------------------------------------------------------------------- without Ray


def write_board(board: Path, config_hash: str, rows: dict[int, list[int]], run_id: str = "old") -> None:
    """A board holding ``seed -> steps`` rows of one config hash."""
    with board.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        for seed, steps in rows.items():
            for step in steps:
                writer.writerow(
                    result_record(
                        env=CARTPOLE,
                        suite="minari",
                        algorithm="cql",
                        critic="td",
                        seed=seed,
                        step=step,
                        value=1.0,
                        config_hash=config_hash,
                        run_id=f"{run_id}-s{seed}",
                    )
                )


def test_the_board_decides_complete_partial_and_refused_runs(tmp_path: Path) -> None:
    """A run's rows are found by the config hash the sweep computes without its dataset (here from
    the env its [[collect]] entry records); complete runs are skipped and so is their dataset."""
    spec_path, _ = write_spec(tmp_path)
    spec = load_spec(spec_path)
    cartpole, mountaincar = expand(spec)
    paths = SweepPaths(tmp_path / "sweep")
    board = paths.root / "board.csv"
    board.parent.mkdir()
    check = BoardCheck(spec)
    expected = check.expected(cartpole)
    assert expected.seeds == (0, 1) and expected.points == (10, 20) and not expected.leading_gaps
    assert expected.config_hash != check.expected(mountaincar).config_hash

    def verdict(run_dir: Path | None = None):
        check.forget(board)
        return check.verdict(cartpole, board, run_dir or paths.run_dir(cartpole.name))

    assert verdict().expected is None  # no board: nothing to decide
    write_board(board, expected.config_hash, {0: [10, 20], 1: [10, 20]})
    whole = verdict()
    assert whole.complete and whole.present == 4
    check.forget(board)
    assert action(paths, cartpole, check) == ON_BOARD and action(paths, mountaincar, check) == "new"
    assert [step.out for step in needed_collect(spec, [mountaincar])] == [MOUNTAINCAR]

    write_board(board, expected.config_hash, {0: [10, 20]})  # seed 1 lost: trained again
    missing_seed = verdict()
    assert not missing_seed.complete and missing_seed.conflict is None and missing_seed.present == 2

    write_board(board, expected.config_hash, {0: [10, 20], 1: [10]})  # a point of seed 1 lost
    split = verdict()
    assert not split.complete and "seed 1 is partly on the board" in split.conflict
    assert "steps 20 missing" in split.conflict and expected.config_hash in split.conflict
    check.forget(board)
    assert action(paths, cartpole, check) == CONFLICT
    run_dir = paths.run_dir(cartpole.name)  # the run that wrote those rows, here to be resumed
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"run_id": "old", "config_hash": expected.config_hash}))
    assert verdict(run_dir).conflict is None

    write_board(board, "another-config", {0: [10, 20], 1: [10, 20]})  # rows of another method
    assert not verdict().complete and verdict().present == 0


def test_online_rows_may_start_late_but_never_stop_early() -> None:
    """An online seed has no row before its first finished episode; from then on, one per point."""
    online = Expected("h", (0,), (200, 400, 600), leading_gaps=True)
    assert online.lacking({400: "r", 600: "r"}) == []
    assert online.lacking({}) == [200, 400, 600]
    assert online.lacking({200: "r", 600: "r"}) == [400]
    assert online.lacking({200: "r", 400: "r"}) == [600]
    offline = Expected("h", (0,), (10, 20))
    assert offline.lacking({20: "r"}) == [10]


def test_online_runs_expect_a_row_at_each_log_point(tmp_path: Path) -> None:
    spec = tmp_path / "online.toml"
    spec.write_text(
        'command = "online dqn"\n[fixed]\nenv = "CartPole-v1"\nloop = "python"\nsteps = 1000\nlog_every = 200\n'
        'checkpoint_every = 400\nseeds = "0-2"\n[grid]\ncritic = ["td", "gitd"]\n'
    )
    td, gitd = expand(load_spec(spec))
    check = BoardCheck(load_spec(spec))
    assert check.expected(td).points == (200, 400, 600, 800, 1000) and check.expected(td).seeds == (0, 1, 2)
    assert check.expected(td).leading_gaps and check.expected(td).config_hash != check.expected(gitd).config_hash


def test_submit_skips_rows_another_run_of_the_same_config_put_there(tmp_path: Path) -> None:
    """A run trained again where its run directory was lost has a new run id; its rows whose
    config hash, seed and step are on the board already are left out, the others added."""
    from offline_gitd.leaderboard.submit import submit

    board = tmp_path / "board.csv"
    common = dict(env="Pong", algorithm="cql", critic="td", steps=[10, 20], returns=[1.0, 2.0], config_hash="c1")
    first = write_run(tmp_path / "first", seed=0, run_id="first-s0", **common)
    assert submit([first], board, allow_new_env=True, skip_existing=True).added[first] == 2
    again = write_run(tmp_path / "again", seed=0, run_id="again-s0", **common)
    with pytest.raises(Exception, match="config_hash"):
        submit([again], board, allow_new_env=True)  # without skip_existing, still refused
    assert submit([again], board, allow_new_env=True, skip_existing=True).added[again] == 0
    other_seed = write_run(tmp_path / "seed1", seed=1, run_id="again-s1", **common)
    assert submit([other_seed], board, allow_new_env=True, skip_existing=True).added[other_seed] == 2
    assert [row["run_id"] for row in board_rows(board)] == ["first-s0"] * 2 + ["again-s1"] * 2


def test_board_option_points_the_sweep_at_another_board(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--board`` is a path from the current directory, overriding the spec's (under --out)."""
    spec, _ = write_spec(tmp_path)
    out = tmp_path / "sweep"
    assert main(["sweep", str(spec), "--out", str(out), "--dry-run"]) == 0
    assert f"results go to board {out.absolute() / 'board.csv'}" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", str(spec), "--out", str(out), "--board", "kept/board.csv", "--dry-run"]) == 0
    assert f"results go to board {tmp_path / 'kept' / 'board.csv'}" in capsys.readouterr().out
    assert main(["sweep", str(spec), "--out", str(out), "--board", "kept/board-{T}.csv", "--dry-run"]) == 2
    assert "--board kept/board-{T}.csv: {T} is not set by [fixed] or [grid]" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--out", str(out), "--board", "kept/board.txt", "--dry-run"]) == 2
    assert "--board must be a .csv file name" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--out", str(out), "--board", "kept/board.csv"]) == 2
    assert "kept: the board's directory does not exist" in capsys.readouterr().err


def test_timings_are_appended_beside_the_board(tmp_path: Path) -> None:
    path = tmp_path / TIMINGS_FILE
    append_piece(path, Piece("s.toml", "dataset", CARTPOLE, 12.34, host="h", cpus=1))
    append_piece(path, Piece("s.toml", "run", "cartpole", 56.0, config_hash="abc", resumed=True, attempt=2))
    assert path.read_text().count("finished_at") == 1
    first, second = read_pieces(path)
    assert (first["kind"], first["name"], first["seconds"], first["cpus"]) == ("dataset", CARTPOLE, "12.3", "1")
    assert (second["config_hash"], second["resumed"], second["attempt"]) == ("abc", "true", "2")
