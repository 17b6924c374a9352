"""``leaderboard submit``: validation, duplicate refusal, untouched boards, concurrent appends."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from offline_gitd.cli import main  # noqa: E402
from offline_gitd.leaderboard.board_references import read_references, references_path  # noqa: E402
from offline_gitd.leaderboard.schema import read_rows  # noqa: E402
from offline_gitd.leaderboard.submit import STALE_AFTER_S, _host, submit  # noqa: E402
from tests.support.runs import write_run  # noqa: E402


def run(root: Path, name: str, **fields: object) -> Path:
    """A two-step cql:td Pong run (fields override the defaults)."""
    spec: dict[str, object] = dict(
        env="Pong", algorithm="cql", critic="td", seed=0, steps=[0, 10], returns=[-21.0, -5.0]
    )
    spec.update(fields)
    return write_run(root / name, **spec)


def test_submit_creates_board_and_appends_without_touching_earlier_rows(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    board = tmp_path / "board.csv"
    first = run(tmp_path, "a", seed=0)
    assert main(["leaderboard", "submit", str(first), "--board", str(board)]) == 0
    assert f"added 2 row(s) from {first}" in capsys.readouterr().out
    before = board.read_bytes()
    second, third = run(tmp_path, "b", seed=1), run(tmp_path, "c", seed=2, env="Breakout")
    assert main(["leaderboard", "submit", str(second), str(third), "--board", str(board)]) == 0
    out = capsys.readouterr().out
    assert f"board: {board} (6 rows)" in out
    after = board.read_bytes()
    assert after.startswith(before)
    assert [row.seed for _, row in read_rows(board)] == [0, 0, 1, 1, 2, 2]


def test_duplicates_are_refused_and_the_board_is_left_as_it_was(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    board = tmp_path / "board.csv"
    original = run(tmp_path, "a")
    submit([original], board, allow_new_env=False)
    content = board.read_bytes()
    cases = {
        "run_id, seed and step": run(tmp_path, "rerun", returns=[1.0, 2.0]),
        "algorithm, critic, K, beta, env, seed, step, config_hash and data_sha256": run(
            tmp_path, "renamed", run_id="another-id"
        ),
    }
    for reason, again in cases.items():
        assert main(["leaderboard", "submit", str(again), "--board", str(board)]) == 2
        error = capsys.readouterr().err
        assert f"{again / 'results.csv'}:2: duplicate of {board}:2 (same {reason})" in error
        assert board.read_bytes() == content
    twin = run(tmp_path, "twin", seed=5)
    twin_copy = run(tmp_path, "twin_copy", seed=5)
    assert main(["leaderboard", "submit", str(twin), str(twin_copy), "--board", str(board)]) == 2
    assert f"{twin_copy / 'results.csv'}:2: duplicate of {twin / 'results.csv'}:2" in (capsys.readouterr().err)
    assert board.read_bytes() == content
    other_env = run(tmp_path, "clash", env="Breakout", seed=4, run_id=read_rows(board)[0][1].run_id)
    assert main(["leaderboard", "submit", str(other_env), "--board", str(board)]) == 2
    assert "already names another run" in capsys.readouterr().err
    assert board.read_bytes() == content


def test_one_run_dir_may_hold_several_seeds_under_one_run_id(tmp_path: Path) -> None:
    """The learners train ``--seeds 0-4`` in one program and write one run_id for them all."""
    board = tmp_path / "board.csv"
    results = run(tmp_path, "multi", run_id="abc123") / "results.csv"
    extra = run(tmp_path, "seed1", run_id="abc123", seed=1) / "results.csv"
    results.write_text(results.read_text() + "".join(extra.read_text().splitlines(True)[1:]))
    assert submit([results.parent], board, allow_new_env=False).total_rows == 4
    assert [(row.seed, row.step) for _, row in read_rows(board)] == [(0, 0), (0, 10), (1, 0), (1, 10)]


def test_malformed_input_or_board_is_refused_with_file_and_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    board = tmp_path / "board.csv"
    submit([run(tmp_path, "a")], board, allow_new_env=False)
    content = board.read_bytes()
    bad = run(tmp_path, "bad", seed=1, steps=[0, 10, 20], returns=[1.0, 2.0, 3.0])
    results = bad / "results.csv"
    results.write_text(results.read_text().replace(",20,3.0,", ",20,inf,"))
    assert main(["leaderboard", "submit", str(bad), "--board", str(board)]) == 2
    assert f"{results}:4: field 'return': must be finite" in capsys.readouterr().err
    unknown = run(tmp_path, "unknown", seed=2, env="pong")
    assert main(["leaderboard", "submit", str(unknown), "--board", str(board)]) == 2
    assert "results.csv:2: unknown atari env 'pong'" in capsys.readouterr().err
    assert board.read_bytes() == content

    board.write_bytes(
        content + b"atari,Pong,cql,td,1,0.0,-1,5,1.0,x,y,0.1.0,2026-01-01T00:00:00+00:00,defaults,,,,,cpu\n"
    )
    broken = board.read_bytes()
    assert main(["leaderboard", "submit", str(run(tmp_path, "c", seed=3)), "--board", str(board)]) == 2
    assert f"{board}:4: field 'seed': must be >= 0" in capsys.readouterr().err
    assert board.read_bytes() == broken


def test_allow_new_env_admits_an_env_outside_the_registry(tmp_path: Path) -> None:
    board = tmp_path / "board.csv"
    report = submit([run(tmp_path, "new", suite="gym", env="MyGrid-v0")], board, allow_new_env=True)
    assert report.total_rows == 2


def _submit_many(board: Path, run_dirs: list[Path]) -> None:
    """One worker process: submit its runs one call at a time, racing the other workers."""
    for run_dir in run_dirs:
        submit([run_dir], board, allow_new_env=False)


def test_concurrent_submitters_each_add_all_their_rows(tmp_path: Path) -> None:
    board = tmp_path / "board.csv"
    workers, runs_each = 8, 50
    batches = [
        [
            run(tmp_path, f"w{worker}-r{index}", seed=worker * runs_each + index, steps=[7], returns=[float(index)])
            for index in range(runs_each)
        ]
        for worker in range(workers)
    ]
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_submit_many, args=(board, batch)) for batch in batches]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * workers
    rows = read_rows(board)  # re-validates every line
    assert len(rows) == workers * runs_each
    assert sorted(row.seed for _, row in rows) == list(range(workers * runs_each))
    assert not list(tmp_path.glob(".board.csv.*.tmp"))


def test_submitting_the_same_run_again_is_a_no_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    board = tmp_path / "board.csv"
    first = run(tmp_path, "a")
    assert main(["leaderboard", "submit", str(first), "--board", str(board)]) == 0
    content = board.read_bytes()
    capsys.readouterr()
    assert main(["leaderboard", "submit", str(first), "--board", str(board)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "nothing to add: all 2 row(s) are already on" in out
    assert board.read_bytes() == content
    grown = run(tmp_path, "a", steps=[0, 10, 20], returns=[-21.0, -5.0, 3.0])  # the same run, one more step
    assert main(["leaderboard", "submit", str(grown), "--board", str(board)]) == 0
    assert "added 1 row(s)" in capsys.readouterr().out
    assert board.read_bytes().startswith(content) and len(read_rows(board)) == 3


def _dead_pid() -> int:
    process = multiprocessing.get_context("fork").Process(target=lambda: None)
    process.start()
    process.join()
    return process.pid


def test_a_later_submit_removes_only_stale_temp_files(tmp_path: Path) -> None:
    board = tmp_path / "board.csv"
    submit([run(tmp_path, "a")], board, allow_new_env=False)
    host = _host()
    dead = tmp_path / f".board.csv.{host}.{_dead_pid()}.x1y2.tmp"
    alive = tmp_path / f".board.csv.{host}.{os.getpid()}.z3w4.tmp"  # a live writer (this process)
    other_host = tmp_path / ".board.csv.elsewhere.1.q5r6.tmp"
    ancient = tmp_path / ".board.csv.elsewhere.2.s7t8.tmp"
    for temp in (dead, alive, other_host, ancient):
        temp.write_bytes(b"suite,env\nhalf a bo")
    old = time.time() - 2 * STALE_AFTER_S
    os.utime(ancient, (old, old))
    submit([run(tmp_path, "b", seed=1)], board, allow_new_env=False)
    assert not dead.exists() and not ancient.exists()
    assert alive.exists() and other_host.exists()
    assert len(read_rows(board)) == 4


def _minari_run(root: Path, name: str, data: Path, dataset: str, metadata: dict, seed: int) -> Path:
    """A run trained on a Minari dataset under the data root ``data``, whose metadata is given."""
    directory = run(root, name, suite="minari", env=dataset, seed=seed, returns=[10.0, 50.0])
    (directory / "config.json").write_text(
        json.dumps({"config": {"dataset": f"minari:{dataset}", "data_dir": str(data)}})
    )
    meta = data / "minari" / dataset / "data"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "metadata.json").write_text(json.dumps({"dataset_id": dataset, **metadata}))
    return directory


def test_submit_records_the_datasets_references_beside_the_board(tmp_path: Path, capsys) -> None:
    board = tmp_path / "board.csv"
    data = tmp_path / "data"
    dataset = "offline_gitd/toy/dqn-replay-v0"
    metadata = {"ref_min_score": -5.0, "ref_max_score": 95.0, "checkpoint_returns": [1.0, 20.0, 45.0]}
    first = _minari_run(tmp_path, "a", data, dataset, metadata, seed=0)
    argv = ["leaderboard", "submit", "--allow-new-env", "--board", str(board)]
    assert main([*argv, str(first)]) == 0
    references = read_references(board)
    (reference,) = references.values()
    assert (reference.ref_min_score, reference.ref_max_score, reference.dqn_replay_score) == (-5.0, 95.0, 45.0)
    assert references_path(board).name == "board.references.csv"
    other = _minari_run(tmp_path / "elsewhere", "b", tmp_path / "data2", dataset, {"ref_min_score": 0.0}, seed=1)
    capsys.readouterr()
    assert main([*argv, str(other)]) == 0
    assert "has references other than those kept" in capsys.readouterr().err
    assert read_references(board) == references  # the first kept
    # The board normalises by them: 100 (x - min) / (max - min), and (x - random) / (DQN - random).
    show = ["leaderboard", "show", "--board", str(board), "--format", "json", "--reps", "20"]
    for how, expected in (("minari", 100 * (50 + 5) / 100), ("dqn-replay", (50 + 5) / 50)):
        capsys.readouterr()
        assert main([*show, "--normalise", how]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["methods"][0]["iqm"] == pytest.approx(expected)
    capsys.readouterr()
    assert main([*show]) == 0
    # auto's first choice: the last checkpoint's mean, not the last 10 episodes' (ref_max_score)
    shown = json.loads(capsys.readouterr().out)
    assert shown["envs"][dataset]["normaliser"] == "dqn-replay"
    assert shown["methods"][0]["iqm"] == pytest.approx((50 + 5) / 50)
