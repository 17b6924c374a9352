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
from tests.support.runs import write_run  # noqa: E402

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
    report = json.loads(show(board, capsys, "--format", "json", "--normalise", "baseline"))
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
    markdown = show(board, capsys, "--format", "markdown").split("\n\n")[0].splitlines()
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


LEADERBOARDS = Path(__file__).resolve().parents[2] / "leaderboards"
# Every CSV under leaderboards/ is a board except three kinds of side file: a board's dataset
# references (BOARD.references.csv), a sweep's timings (timings.csv) and a behaviour agent's
# learning curve (behaviour/GAME.csv, checked below). A new kind must be named here to be skipped.
BEHAVIOUR_CURVES = sorted(LEADERBOARDS.rglob("behaviour/*.csv"))
EXAMPLE_BOARDS = [
    path
    for path in sorted(LEADERBOARDS.rglob("*.csv"))
    if "reference" not in path.parts
    and not path.name.endswith(".references.csv")
    and path.name != "timings.csv"
    and path not in BEHAVIOUR_CURVES
]


# A board's baseline where it is not CQL with td: the online board's is DQN at one update per 4 env
# steps (leaderboards/minatar_online/README.md), keyed "dqn:td" while it is the board's only DQN and
# "dqn:td [loop=compiled utd=0.25]" once the one-update-per-step DQN is there too.
BASELINES = {"minatar_online": ("dqn:td [loop=compiled utd=0.25]", "dqn:td")}


def baseline_of(path: Path) -> str:
    """The first of the board's baseline keys that its methods hold (keys are as short as the
    board's rows allow, docs/leaderboard.md)."""
    from offline_gitd.leaderboard.normalise import method_keys, to_frame
    from offline_gitd.leaderboard.schema import read_rows

    keys = set(method_keys(to_frame([row for _, row in read_rows(path)])))
    return next((key for key in BASELINES.get(path.parent.name, ("cql:td",)) if key in keys), "cql:td")


@pytest.mark.parametrize("path", EXAMPLE_BOARDS, ids=lambda path: path.name)
def test_committed_example_boards_are_valid_and_show(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The example boards in leaderboards/ come from real runs; each must still parse under the
    current schema and produce a leaderboard against its baseline that lists every method on the board."""
    baseline = baseline_of(path)
    assert main(["leaderboard", "show", "--board", str(path), "--baseline", baseline, "--reps", "50"]) == 0
    printed = capsys.readouterr().out
    with path.open(newline="") as handle:
        methods = {f"{row['algorithm']}:{row['critic']}" for row in csv.DictReader(handle)}
    assert baseline.split(" [")[0] in methods  # a board in progress may hold the baseline alone (minatar_offline)
    for method in methods:
        assert method in printed


@pytest.mark.parametrize("path", BEHAVIOUR_CURVES, ids=lambda path: path.name)
def test_committed_behaviour_curves_are_whole(path: Path) -> None:
    """A behaviour agent's curve (leaderboards/*/behaviour/*.csv, written by a sweep beside its
    board) has one row per 10,000-step window from the first to its last, and an epsilon that
    never rises."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and set(rows[0]) >= {"env_step", "episodes", "mean_training_return", "epsilon", "q_mean"}
    steps = [int(row["env_step"]) for row in rows]
    assert steps == list(range(steps[0], steps[0] + 10_000 * len(steps), 10_000))
    epsilons = [float(row["epsilon"]) for row in rows]
    assert all(later <= earlier for earlier, later in zip(epsilons, epsilons[1:]))


def test_there_is_an_example_board() -> None:
    assert EXAMPLE_BOARDS, "leaderboards/ should hold at least one example board from real runs"


def test_hopper_board_normalises_by_its_datasets_references(capsys: pytest.CaptureFixture[str]) -> None:
    """leaderboards/mujoco_offline keeps its dataset's references beside the board; with 3 seeds
    the IQM is the mean, so each method's IQM final is D4RL's formula on its mean final return."""
    root = Path(__file__).resolve().parents[2] / "leaderboards" / "mujoco_offline"
    with (root / "board.references.csv").open(newline="") as handle:
        (reference,) = list(csv.DictReader(handle))
    low, high = float(reference["ref_min_score"]), float(reference["ref_max_score"])
    finals: dict[str, dict[str, float]] = {}
    with (root / "board.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            method = f"{row['algorithm']}:{row['critic']}"
            run = finals.setdefault(method, {})
            if int(row["step"]) >= run.get(f"step{row['seed']}", -1):
                run[f"step{row['seed']}"], run[row["seed"]] = int(row["step"]), float(row["return"])
    argv = ["leaderboard", "show", "--board", str(root / "board.csv"), "--baseline", "bc:none", "--reps", "50"]
    for how in ("minari", "auto"):
        capsys.readouterr()
        assert main([*argv, "--normalise", how, "--format", "json"]) == 0
        report = json.loads(capsys.readouterr().out)
        for item in report["methods"]:
            returns = [value for key, value in finals[item["method"]].items() if not key.startswith("step")]
            expected = 100 * (sum(returns) / len(returns) - low) / (high - low)
            assert item["iqm"] == pytest.approx(expected)
        (env,) = report["envs"].values()
        assert env["normaliser"] == "minari" and (env["low"], env["high"]) == (low, high)
    rows = [r for r in report["per_env"] if r["row"] in ("random", "reference (minari)")]
    assert [r["mean_final_return"] for r in rows] == [low, high]


def test_show_prints_each_envs_normalisation_and_the_per_env_table(board: Path, capsys) -> None:
    """The synthetic Atari board: human-normalised by default (each env says so), and per env the
    raw returns of every method with the random and human reference lines."""
    text = show(board, capsys)
    assert "normalised: Breakout: human" in text and "normalised: Pong: human" in text
    per_env = text.split("\n\n")[-1].splitlines()
    assert sum(line.startswith("Pong ") for line in per_env) == 3 + 2  # 3 methods, random, reference
    assert any("reference (human)" in line and "14.6" in line for line in per_env)
    assert any("cql:gitd" in line and "(exact)" in line and "3 x ?" in line for line in per_env)


def test_html_page_holds_the_per_env_table(board: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert main(["leaderboard", "html", "--board", str(board), "--out", str(site), "--reps", "20"]) == 0
    page = (site / "index.html").read_text()
    table = page[page.index('<table id="per-env">') : page.index("</table>", page.index('id="per-env"'))]
    assert table.count("<tr") == 1 + 2 * (3 + 2)  # header; per env 3 methods, random, reference
    assert "reference (human)" in table and "(exact)" in table and "3 &times; ?" in table
    assert "normalised: Pong: human" in page
