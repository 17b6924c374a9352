"""``leaderboard compare``: two boards of the same configs side by side, each with its own test
against its own baseline, never pooled (docs/leaderboard.md#two-boards-side-by-side)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.leaderboard.submit import submit
from tests.support.runs import write_run


def board(root: Path, name: str, shift: float, extra: bool = False) -> Path:
    """A board of cql:td and cql:gitd on Pong, 4 seeds each; gitd ``shift`` above td."""
    runs = []
    for critic, config_hash, offset in (("td", "h-td", 0.0), ("gitd", "h-gitd", shift)):
        for seed in range(4):
            runs.append(
                write_run(
                    root / name / f"{critic}-{seed}",
                    env="Pong",
                    algorithm="cql",
                    critic=critic,
                    seed=seed,
                    steps=[10],
                    returns=[float(seed) + offset],
                    config_hash=config_hash,
                    run_id=f"{name}-{critic}-s{seed}",
                )  # fmt: skip
            )
    if extra:  # a config the other board lacks
        runs.append(
            write_run(
                root / name / "tdrc",
                env="Pong",
                algorithm="cql",
                critic="tdrc",
                seed=0,
                steps=[10],
                returns=[1.0],
                config_hash="h-tdrc",
                run_id=f"{name}-tdrc-s0",
            )  # fmt: skip
        )
    path = root / f"{name}.csv"
    submit(runs, path, allow_new_env=False)
    return path


def test_two_boards_side_by_side_each_with_its_own_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cpu, gpu = board(tmp_path, "cpu", shift=10.0, extra=True), board(tmp_path, "gpu", shift=0.5)
    argv = ["leaderboard", "compare", "--board", str(cpu), "--label", "CPU", "--board", str(gpu), "--label", "GPU"]
    assert main([*argv, "--format", "markdown", "--reps", "200"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert (
        lines[0]
        == "| env | method | CPU final [95% CI] | p vs cql:td | seeds | GPU final [95% CI] | p vs cql:td | seeds |"
    )
    gitd = next(line for line in lines if "| cql:gitd |" in line).split(" | ")
    # each board's own sample: CPU gitd is 10 above its td, GPU gitd 0.5 above its td
    assert gitd[2].startswith("11.50 [") and gitd[5].startswith("2.00 [")
    assert float(gitd[3]) < 0.05 < float(gitd[6])  # exact permutation tests, each against its own td
    assert gitd[4] == "4" and gitd[7].rstrip(" |") == "4"  # not pooled: 4 seeds a side, not 8
    assert "cql:tdrc" not in out and "Left out: (env, config) pairs on one board only (1 on CPU, 0 on GPU)" in out
    assert "Not independent samples, and not pooled" in out


def test_compare_takes_exactly_two_boards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cpu = board(tmp_path, "cpu", shift=1.0)
    assert main(["leaderboard", "compare", "--board", str(cpu)]) == 2
    assert "compare takes two boards" in capsys.readouterr().err
    assert main(["leaderboard", "compare", "--board", str(cpu), "--board", str(cpu), "--label", "one"]) == 2
    assert "--label names both boards or neither" in capsys.readouterr().err
