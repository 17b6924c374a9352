"""``leaderboard submit`` means one thing (docs/leaderboard.md#one-board-one-kind-of-row): a second
submit of rows the board holds is a no-op whatever their env; rows of another protocol, suite or
major version are refused unless ``--allow-mixed``; a run that made no update is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offline_gitd.cli import main
from offline_gitd.leaderboard.schema import ResultRow, row_kind, row_kind_of, shorten
from tests.support.runs import result_record, write_run

OWN = "offline_gitd/CartPole-v1/dqn-v0"  # a dataset the package collected: in no registry


def submit(capsys, *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["leaderboard", "submit", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def own_run(root: Path, name: str, seed: int = 0, **fields) -> Path:
    return write_run(
        root / name, env=OWN, algorithm="cql", critic="td", seed=seed, steps=[0, 10], returns=[1.0, 2.0],
        suite="minari", run_id=f"{name}-s{seed}", **fields,
    )  # fmt: skip


def test_a_second_submit_of_a_new_env_is_a_no_op(tmp_path: Path, capsys) -> None:
    board, run = tmp_path / "board.csv", own_run(tmp_path, "a")
    code, _, err = submit(capsys, run, "--board", board)
    assert code == 2 and "pass --allow-new-env" in err and not board.exists()
    assert submit(capsys, run, "--board", board, "--allow-new-env")[0] == 0
    before = board.read_bytes()
    code, out, _ = submit(capsys, run, "--board", board)
    assert code == 0 and "nothing to add: all 2 row(s) are already on" in out
    assert board.read_bytes() == before
    # the board knows the env now: another run of it needs no flag
    code, out, _ = submit(capsys, own_run(tmp_path, "b", seed=1), "--board", board)
    assert code == 0 and "added 2 row(s)" in out


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        (dict(algorithm="sac"), "an online atari row of version 0.1.x, where"),
        (dict(suite="minatar", env="Breakout-v1"), "an offline minatar row of version 0.1.x"),
        (dict(package_version="9.9.0"), "an offline atari row of version 9.x"),
        (dict(package_version="0.2.0"), "an offline atari row of version 0.2.x"),
    ],
)
def test_rows_of_another_kind_are_refused_unless_asked(tmp_path: Path, capsys, fields: dict, said: str) -> None:
    board = tmp_path / "board.csv"
    first = write_run(tmp_path / "first", env="Pong", algorithm="cql", critic="td", seed=0, steps=[0], returns=[1.0])
    assert submit(capsys, first, "--board", board)[0] == 0
    before = board.read_bytes()
    env = fields.pop("env", "Pong")
    algorithm = fields.pop("algorithm", "cql")
    other = write_run(
        tmp_path / "other", env=env, algorithm=algorithm, critic="td", seed=1, steps=[0], returns=[2.0], **fields
    )
    code, _, err = submit(capsys, other, "--board", board)
    assert code == 2 and said in err and "is an offline atari row of version 0.1.x" in err and "--allow-mixed" in err
    assert err.count("\n") == 1 and board.read_bytes() == before
    code, out, _ = submit(capsys, other, "--board", board, "--allow-mixed")
    assert code == 0 and "added 1 row(s)" in out


def test_the_kind_of_a_row() -> None:
    record = result_record(env="Pong", algorithm="dqn", critic="td", seed=0, step=0, value=1.0)
    assert row_kind(ResultRow.from_mapping(record)) == ("online", "atari", "0.1")
    for version, major in (
        ("1.4.2", "1"),
        ("12.0", "12"),
        ("0.10.3", "0.10"),
        ("dev", "dev"),
        ("²", "²"),
        ("0.²", "0.²"),
    ):
        assert row_kind(ResultRow.from_mapping({**record, "package_version": version}))[2] == major


def test_shorten_keeps_short_names_and_cuts_long_ones() -> None:
    assert shorten("cql:gitd") == "cql:gitd"
    long = "x" * 20_000
    cut = shorten(long)
    assert len(cut) <= 60 and "(20000 chars)" in cut
    assert shorten("a\nb") == "a\\nb" and "\n" not in shorten("a\n" * 100)


def untrained_run(root: Path, last_step: int, utd: object = 1) -> Path:
    run = write_run(
        root / f"sac-{last_step}", env="Pendulum-v1", algorithm="sac", critic="td", seed=0,
        steps=[1000, last_step], returns=[-1200.0, -1100.0], suite="gym",
    )  # fmt: skip
    config = {"initial_samples": 5000, "utd": utd, "steps": last_step}
    (run / "config.json").write_text(json.dumps({"config": config}))
    return run


def test_a_run_that_made_no_update_is_refused(tmp_path: Path, capsys) -> None:
    board = tmp_path / "board.csv"
    code, _, err = submit(capsys, untrained_run(tmp_path, 3000), "--board", board, "--allow-new-env")
    assert code == 2 and err.count("\n") == 1 and not board.exists()
    assert "made no update by its last row (step 3000 is within its initial random samples)" in err
    # 1/4: the first update comes 4 steps after the initial samples
    assert submit(capsys, untrained_run(tmp_path, 5003, "1/4"), "--board", board, "--allow-new-env")[0] == 2
    assert submit(capsys, untrained_run(tmp_path, 5004, "0.25"), "--board", board, "--allow-new-env")[0] == 0


@pytest.fixture(scope="module")
def mixed_board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cql:td and cql:gitd on two Atari envs, version 0.1 and 0.2 rows, and an online SAC run on
    Pendulum: pooled on purpose (``--allow-mixed``)."""
    root = tmp_path_factory.mktemp("mixed")
    runs = []
    for critic, gain in (("td", 1.0), ("gitd", 1.5)):
        for env in ("Pong", "Breakout"):
            for seed, version in ((0, "0.1.0"), (1, "0.1.0"), (2, "0.2.0")):
                runs.append(
                    write_run(
                        root / f"{critic}-{env}-{seed}",
                        env=env,
                        algorithm="cql",
                        critic=critic,
                        seed=seed,
                        steps=[0, 1000],
                        returns=[gain, gain * (2 + seed)],
                        package_version=version,
                    )  # fmt: skip
                )
    for seed in range(2):
        runs.append(
            write_run(
                root / f"sac-{seed}",
                env="Pendulum-v1",
                suite="gym",
                algorithm="sac",
                critic="td",
                seed=seed,
                steps=[0, 1000],
                returns=[-1200.0, -300.0 - seed],
            )  # fmt: skip
        )
    board = root / "board.csv"
    assert main(["leaderboard", "submit", *map(str, runs), "--board", str(board), "--allow-mixed"]) == 0
    return board


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_show_leaves_out_what_the_baseline_never_ran_and_says_what_it_pooled(mixed_board: Path, capsys, fmt) -> None:
    capsys.readouterr()
    argv = ["leaderboard", "show", "--board", str(mixed_board), "--baseline", "cql:td", "--reps", "50"]
    assert main([*argv, "--format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "csv":
        assert "sac:td" not in out and "cql:gitd" in out
        return
    left = "env Pendulum-v1 (1 method(s): sac:td): the baseline cql:td has no runs there"
    pooled = "8 offline atari row(s) of version 0.2.x"
    if fmt == "json":
        report = json.loads(out)
        assert report["left_out"] == [left] and pooled in report["pooled"]
        assert "16 offline atari row(s) of version 0.1.x" in report["pooled"]
        return
    assert f"left out: {left}" in out
    assert "pooled: 16 offline atari row(s) of version 0.1.x, 8 offline atari row(s) of version 0.2.x" in out


@settings(max_examples=200)
@given(version=st.text(min_size=1))
def test_any_version_has_a_kind(version: str) -> None:
    """A board row's version is any text (``package_version`` is data): its kind never raises."""
    protocol, suite, major = row_kind_of("cql", "atari", version)
    assert (protocol, suite) == ("offline", "atari") and major
