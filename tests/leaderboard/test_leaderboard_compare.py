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


def test_between_tests_each_configs_two_samples_against_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # gitd: 10 above td on CPU, 0.5 above on GPU; td the same on both. So CPU's gitd runs (10-13)
    # against GPU's (0.5-3.5) are the only pair that differs: with 4 seeds a side the exact test's
    # smallest p is 2 / C(8, 4) = 2/70.
    cpu, gpu = board(tmp_path, "cpu", shift=10.0, extra=True), board(tmp_path, "gpu", shift=0.5)
    argv = ["leaderboard", "compare", "--board", str(cpu), "--label", "CPU", "--board", str(gpu), "--label", "GPU"]
    assert main([*argv, "--format", "markdown", "--reps", "200", "--between"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "| env | method | seeds | CPU final [95% CI] | GPU final [95% CI] | p | CPU AUC [95% CI] | GPU AUC [95% CI] "
        "| p | random | data |"
    )
    gitd = next(line for line in lines if "| cql:gitd |" in line).split(" | ")
    td = next(line for line in lines if "| cql:td |" in line).split(" | ")
    assert gitd[2] == "4, 4" and gitd[3].startswith("11.50 [") and gitd[4].startswith("2.00 [")
    assert float(gitd[5]) == pytest.approx(2 / 70, abs=5e-4)  # the exact test: every split of the 8 runs
    assert gitd[8] == gitd[5]  # one evaluation a run: its AUC is its final return
    assert td[3] == td[4] and float(td[5]) == 1.0  # the same sample on both boards
    assert "(exact; uncorrected)" in "\n".join(lines)
    assert "- 2 of 4 tests below 0.05 uncorrected; smallest p 0.029." in lines


def test_between_tests_the_auc_and_reads_the_references_beside_the_board(tmp_path: Path) -> None:
    from offline_gitd.leaderboard.compare import read_side, render_between

    def curves(name: str, first: float) -> Path:
        """cql:td, 4 seeds, two evaluations: ``first`` then the seed's number (the final return)."""
        runs = [
            write_run(
                tmp_path / name / f"td-{seed}",
                env="Pong",
                algorithm="cql",
                critic="td",
                seed=seed,
                steps=[5, 10],
                returns=[first, float(seed)],
                config_hash="h-td",
                run_id=f"{name}-td-s{seed}",
            )
            for seed in range(4)
        ]
        path = tmp_path / f"{name}.csv"
        submit(runs, path, allow_new_env=False)
        return path

    cpu, gpu = curves("cpu", 0.0), curves("gpu", 100.0)
    (tmp_path / "cpu.references.csv").write_text(
        "suite,env,dataset,ref_min_score,ref_max_score,dqn_replay_score,source\natari,Pong,d,0.25,9,7.5,test\n"
    )
    sides = [read_side(path, name, "cql:td", 200, 0, (), ()) for path, name in ((cpu, "A"), (gpu, "B"))]
    td = render_between(*sides, "markdown", 0).splitlines()[2].split(" | ")
    assert td[3] == td[4] and float(td[5]) == 1.0  # the same final returns on both boards
    # AUC = the mean of a run's two evaluations: (0 + seed) / 2 on A, (100 + seed) / 2 on B
    assert td[6].startswith("0.75 [") and td[7].startswith("50.75 [")
    assert float(td[8]) == pytest.approx(2 / 70, abs=5e-4)
    assert td[9:] == ["0.25", "7.50 |"]  # only board A records them: its numbers, not blanks


def test_adjusted_adds_holm_and_bh_over_each_boards_tests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cpu, gpu = board(tmp_path, "cpu", shift=10.0, extra=True), board(tmp_path, "gpu", shift=0.5)
    argv = ["leaderboard", "compare", "--board", str(cpu), "--label", "CPU", "--board", str(gpu), "--label", "GPU"]
    assert main([*argv, "--format", "markdown", "--reps", "200", "--adjusted"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| env | method | CPU final [95% CI] | p vs cql:td | Holm | BH | seeds |")
    gitd = next(line for line in lines if "| cql:gitd |" in line).split(" | ")
    # two tests on CPU (gitd, tdrc), one on GPU (gitd): the GPU's adjustments are its raw p. CPU's
    # gitd has the smaller p (2/70, exact): Holm doubles it
    assert gitd[3] == f"{2 / 70:.3f}" and gitd[4] == f"{2 * 2 / 70:.3f}"
    assert gitd[8] == gitd[9] == gitd[10]
    assert "(2 on CPU, 1 on GPU)" in "\n".join(lines)
    assert main([*argv, "--adjusted", "--between"]) == 2
