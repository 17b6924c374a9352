"""``leaderboard show`` and ``plot`` through the CLI, on a small synthetic board."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from offline_gitd.cli import main  # noqa: E402
from offline_gitd.leaderboard.show import HEADER  # noqa: E402
from tests.leaderboard.test_leaderboard_synthetic import write_run  # noqa: E402

METHODS = {("cql", "td", 1, 0.0): 1.0, ("cql", "itd", 5, 0.0): 1.5, ("cql", "gitd", 5, 1.0): 2.0}


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 methods x 2 Atari games x 3 seeds, 8 logged steps each, returns growing with the gain."""
    root = tmp_path_factory.mktemp("board")
    runs = []
    for (algorithm, critic, K, beta), gain in METHODS.items():
        for env, scale in (("Pong", 10.0), ("Breakout", 100.0)):
            for seed in range(3):
                returns = [scale * gain * (step + 1) / 8 * (1 + 0.05 * seed) for step in range(8)]
                runs.append(
                    str(
                        write_run(
                            root / f"{critic}-{env}-{seed}",
                            env=env,
                            algorithm=algorithm,
                            critic=critic,
                            seed=seed,
                            steps=[1000 * step for step in range(8)],
                            returns=returns,
                            K=K,
                            beta=beta,
                        )
                    )
                )
    path = root / "board.csv"
    assert main(["leaderboard", "submit", *runs, "--board", str(path)]) == 0
    return path


def show(board: Path, capsys: pytest.CaptureFixture[str], *options: str) -> str:
    capsys.readouterr()
    assert main(["leaderboard", "show", "--board", str(board), "--reps", "100", *options]) == 0
    return capsys.readouterr().out


def test_show_json_ranks_methods_with_bracketing_intervals(
    board: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = json.loads(show(board, capsys, "--format", "json"))
    assert (report["baseline"], report["normalisation"]) == ("cql:td", "baseline")
    methods = {item["method"]: item for item in report["methods"]}
    assert set(methods) == {"cql:td", "cql:itd", "cql:gitd"}
    assert methods["cql:td"]["auc"] == pytest.approx(1.0)
    assert methods["cql:td"]["p_improve"] == pytest.approx(0.5)
    assert methods["cql:gitd"]["auc"] == pytest.approx(2.0)  # every return doubled
    assert methods["cql:gitd"]["p_improve"] == pytest.approx(1.0)
    for item in methods.values():
        assert (item["envs"], item["seeds"], item["runs"]) == (2, 3, 6)
        for name in ("iqm", "auc", "p_improve"):
            assert item[f"{name}_low"] <= item[name] <= item[f"{name}_high"]


def test_show_csv_markdown_table_and_human_normalisation(
    board: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = list(csv.DictReader(io.StringIO(show(board, capsys, "--format", "csv"))))
    assert tuple(rows[0]) == HEADER and len(rows) == 3
    markdown = show(board, capsys, "--format", "markdown").splitlines()
    assert markdown[0].startswith("| method |") and len(markdown) == 5
    table = show(board, capsys, "--normalise", "human")
    assert "IQM final (human)" in table and "cql:gitd" in table


def test_show_refuses_an_absent_baseline(board: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaderboard", "show", "--board", str(board), "--baseline", "dqn:td"]) == 2
    assert "baseline 'dqn:td' is not on the board" in capsys.readouterr().err


def test_plot_writes_every_figure(
    board: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "figures"
    assert main(["leaderboard", "plot", "--board", str(board), "--out", str(out), "--reps", "50"]) == 0
    printed = capsys.readouterr().out
    for name in ("aggregate.png", "per_env.png", "intervals.png", "profile.png"):
        assert f"wrote {out / name}" in printed
        assert (out / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_leaderboard_help_imports_no_heavy_library() -> None:
    code = (
        "import sys; import offline_gitd.leaderboard.command; "
        "print(sorted({'pandas', 'matplotlib', 'rliable'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


EXAMPLE_BOARDS = sorted((Path(__file__).resolve().parents[2] / "leaderboards").rglob("*.csv"))
EXAMPLE_BOARDS = [path for path in EXAMPLE_BOARDS if "reference" not in path.parts]


@pytest.mark.parametrize("path", EXAMPLE_BOARDS, ids=lambda path: path.name)
def test_committed_example_boards_are_valid_and_show(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The example boards in leaderboards/ come from real runs; each must still parse under the
    current schema and produce a leaderboard against CQL that lists every method on the board."""
    assert main(["leaderboard", "show", "--board", str(path), "--baseline", "cql:td", "--reps", "50"]) == 0
    printed = capsys.readouterr().out
    with path.open(newline="") as handle:
        methods = {f"{row['algorithm']}:{row['critic']}" for row in csv.DictReader(handle)}
    assert "cql:td" in methods and len(methods) > 1
    for method in methods:
        assert method in printed


def test_there_is_an_example_board() -> None:
    assert EXAMPLE_BOARDS, "leaderboards/ should hold at least one example board from real runs"
