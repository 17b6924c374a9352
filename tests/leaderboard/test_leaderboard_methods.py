"""A board never pools different experiments (docs/architecture.md#runs-are-self-contained): rows carry their method's config,
``show`` splits what differs, old boards still load, and env / method filters pick a slice."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.config.fields import describe_overrides
from offline_gitd.leaderboard.schema import COLUMNS, LEGACY_COLUMNS, read_rows
from offline_gitd.offline.config import OfflineConfig

REPO = Path(__file__).resolve().parents[2]
LEGACY_BOARD = REPO / "leaderboards" / "gym_offline" / "board-data10-T10.csv"


def write_run(run_dir: Path, env: str, critic: str, seed: int, gain: float, method_config: str, **extra) -> Path:
    """A run directory with one results.csv of 4 logged steps, returns growing with ``gain``."""
    run_dir.mkdir(parents=True)
    fields = dict(suite="atari", env=env, algorithm="cql", critic=critic, K=1, beta=0.0, package_version="0.1.0")
    fields.update(extra)
    with (run_dir / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        for step in range(4):
            writer.writerow(
                {
                    **fields,
                    "seed": seed,
                    "step": 1000 * step,
                    "return": gain * (step + 1) * (1 + 0.1 * seed),
                    "run_id": f"{run_dir.name}-s{seed}",
                    "config_hash": method_config.replace(" ", "") or "none",
                    "created_at": "2026-01-01T00:00:00+00:00",
                    "method_config": method_config,
                }
            )
    return run_dir


def show_json(board: Path, *extra: str, capsys) -> dict[str, dict]:
    capsys.readouterr()
    argv = [
        "leaderboard",
        "show",
        "--board",
        str(board),
        "--format",
        "json",
        "--reps",
        "20",
        "--normalise",
        "baseline",
        "--keep-flagged-envs",
    ]
    assert main([*argv, *extra]) == 0
    return {m["method"]: m for m in json.loads(capsys.readouterr().out)["methods"]}


def test_overrides_name_what_differs_from_the_defaults() -> None:
    cfg = OfflineConfig(dataset="minari:x-v0", out="o", critic="gitd", T=10, lr=0.01, cql_alpha=0.0)
    resolved = cfg.resolve("gym")
    assert resolved.method_config("gym") == "T=10 cql_alpha=0 lr=0.01"
    assert (
        resolved.algorithm_name("discrete") == "offline-dqn" and resolved.algorithm_name("continuous") == "offline-sac"
    )
    plain = OfflineConfig(dataset="minari:x-v0", out="o", critic="gitd", seeds="0-4", epochs=3).resolve("gym")
    assert plain.method_config("gym") == "defaults" and plain.algorithm_name("discrete") == "cql"
    assert describe_overrides({"a": 1.0, "b": 2, "c": "x"}, {"a": 0.5, "b": 2}, ("c",)) == "a=1"


def test_different_configs_of_one_critic_are_split_not_pooled(tmp_path, capsys) -> None:
    runs = []
    for seed in range(2):
        for env in ("Pong", "Breakout"):
            runs.append(write_run(tmp_path / f"td-{env}-{seed}", env, "td", seed, 1.0, "defaults"))
            runs.append(write_run(tmp_path / f"gitd-{env}-{seed}", env, "gitd", seed, 2.0, "defaults"))
            runs.append(write_run(tmp_path / f"gitd-T10-{env}-{seed}", env, "gitd", seed, 8.0, "T=10 lr=0.01"))
    board = tmp_path / "board.csv"
    assert main(["leaderboard", "submit", *map(str, runs), "--board", str(board)]) == 0
    methods = show_json(board, capsys=capsys)
    assert set(methods) == {"cql:td", "cql:gitd [defaults]", "cql:gitd [T=10 lr=0.01]"}
    assert methods["cql:gitd [defaults]"]["iqm"] == pytest.approx(2.0 * 1.05, rel=0.05)
    assert methods["cql:gitd [T=10 lr=0.01]"]["iqm"] == pytest.approx(8.0 * 1.05, rel=0.05)
    assert methods["cql:gitd [defaults]"]["runs"] == 4  # 2 envs x 2 seeds, nothing pooled in


def test_env_and_method_filters_keep_the_baseline(tmp_path, capsys) -> None:
    runs = []
    for seed in range(2):
        for env in ("Pong", "Breakout"):
            runs.append(write_run(tmp_path / f"td-{env}-{seed}", env, "td", seed, 1.0, "defaults"))
            runs.append(write_run(tmp_path / f"itd-{env}-{seed}", env, "itd", seed, 1.5, "defaults"))
        runs.append(write_run(tmp_path / f"gitd-Pong-{seed}", "Pong", "gitd", seed, 3.0, "defaults"))
    board = tmp_path / "board.csv"
    assert main(["leaderboard", "submit", *map(str, runs), "--board", str(board)]) == 0
    assert set(show_json(board, "--env", "Pong", capsys=capsys)) == {"cql:td", "cql:itd", "cql:gitd"}
    only = show_json(board, "--env", "Pong", "--method", "cql:gitd", capsys=capsys)
    assert set(only) == {"cql:td", "cql:gitd"} and only["cql:gitd"]["envs"] == 1
    assert set(show_json(board, "--method", "*:itd", capsys=capsys)) == {"cql:td", "cql:itd"}
    # gitd never ran on Breakout: the whole board has no baseline-comparable gitd there, the filter works
    assert main(["leaderboard", "show", "--board", str(board), "--env", "Seaquest", "--reps", "20"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no rows match --env Seaquest; envs: Breakout, Pong" in err
    assert main(["leaderboard", "show", "--board", str(board), "--method", "sac:*", "--reps", "20"]) == 2
    assert "no rows match --method sac:*" in capsys.readouterr().err


def test_a_board_written_before_method_config_still_loads_and_is_upgraded_on_submit(tmp_path, capsys) -> None:
    board = tmp_path / "board.csv"
    shutil.copy(LEGACY_BOARD, board)
    old_rows = read_rows(board)
    assert all(row.method_config == "" for _, row in old_rows)
    before = show_json(board, capsys=capsys)
    assert "cql:td" in before and not any("[" in key for key in before)  # grouped as they always were
    old_gitd = next(row for _, row in old_rows if row.critic == "gitd")
    run = write_run(
        tmp_path / "new", old_gitd.env, "gitd", 0, 1.0, "T=10", suite="minari", beta=old_gitd.beta, K=old_gitd.K
    )
    assert main(["leaderboard", "submit", str(run), "--board", str(board), "--allow-new-env"]) == 0
    with board.open() as handle:
        assert tuple(next(csv.reader(handle))) == COLUMNS
    rows = read_rows(board)
    assert [row for _, row in rows[: len(old_rows)]] == [row for _, row in old_rows]
    after = show_json(board, capsys=capsys)
    split = {key.split(" [")[1] for key in after if key.startswith("cql:gitd") and " [" in key}
    assert split == {"config not recorded]", "T=10]"}  # the new config is not pooled with the old rows
    assert LEGACY_COLUMNS == COLUMNS[: COLUMNS.index("method_config")]


def test_html_page_names_the_board_file_not_its_local_path(tmp_path, capsys) -> None:
    board = tmp_path / "secret-home" / "board.csv"
    board.parent.mkdir()
    shutil.copy(LEGACY_BOARD, board)
    site = tmp_path / "site"
    assert main(["leaderboard", "html", "--board", str(board), "--out", str(site), "--reps", "20"]) == 0
    page = (site / "index.html").read_text()
    assert "board.csv" in page and "secret-home" not in page and str(tmp_path) not in page


def test_submit_to_a_missing_directory_matches_its_help(tmp_path, capsys) -> None:
    run = write_run(tmp_path / "run", "Pong", "td", 0, 1.0, "defaults")
    with pytest.raises(SystemExit):
        main(["leaderboard", "submit", "--help"])
    assert "its directory must exist" in " ".join(capsys.readouterr().out.split())
    assert main(["leaderboard", "submit", str(run), "--board", str(tmp_path / "nowhere" / "board.csv")]) == 2
    assert "the board's directory does not exist" in capsys.readouterr().err
