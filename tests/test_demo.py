"""``offline_gitd demo --quick``: the main job's whole pipeline at a size CI can afford."""

from __future__ import annotations

import csv

import pytest

from offline_gitd.cli import main
from offline_gitd.config.fields import parse_int_range
from offline_gitd.demo import CRITICS, ENVS, FULL, QUICK, dataset_id


def test_the_full_demo_prints_what_show_prints_for_its_board() -> None:
    # the same replications and flagged-env rule as `leaderboard show`'s defaults, so the table the
    # demo ends on is the one `show --board demo_out/leaderboard.csv --baseline cql:td` prints
    # (docs/getting-started.md#the-demo shows it from the committed board)
    from offline_gitd.leaderboard.command import DEFAULT_REPS

    assert FULL.bootstrap_reps == DEFAULT_REPS and not FULL.keep_flagged_envs


@pytest.mark.e2e
def test_quick_demo_runs_the_whole_pipeline(tmp_path, capsys) -> None:
    out, data = tmp_path / "demo", tmp_path / "data"
    assert main(["demo", "--quick", "--out", str(out), "--data-dir", str(data), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    # real Minari datasets, collected by DQN, cached under the data root
    for env_id in ENVS:
        assert (data / "minari" / dataset_id(env_id, QUICK.collect_steps)).is_dir()
    # every critic trained on every dataset, every seed evaluated after every epoch
    with (out / "leaderboard.csv").open() as f:
        rows = list(csv.DictReader(f))
    seeds = len(parse_int_range(QUICK.seeds, "seeds"))
    assert len(rows) == len(ENVS) * len(CRITICS) * seeds * QUICK.epochs
    assert {r["critic"] for r in rows} == set(CRITICS) and {r["algorithm"] for r in rows} == {"cql"}
    assert {(r["critic"], r["K"]) for r in rows} == {("td", "1"), ("tdrc", "1"), ("itd", "5"), ("gitd", "5")}
    # the demo closes on what `leaderboard show` prints for its board: the summary with CIs, each
    # env's normaliser, the aggregate under each normaliser and the per-env table of raw returns,
    # each figure with the seeds and evaluation episodes behind it (no "?")
    assert "IQM" in printed and "cql:gitd" in printed and "[" in printed
    assert "Normalisation per env" in printed and "The aggregate under each normaliser" in printed
    per_env = [line for line in printed.splitlines() if line.startswith("offline_gitd/") and "cql:" in line]
    assert len(per_env) == len(ENVS) * len(CRITICS)
    episodes = f"{seeds} x {QUICK.eval_episodes}"
    assert all(line.rstrip().endswith(episodes) for line in per_env), per_env
    assert "--keep-flagged-envs" in printed  # the quick size keeps flagged envs, and says so
    assert f"leaderboard show --board {out / 'leaderboard.csv'}" in printed
    # ... and it is that command's output, every table of it (the across-envs test's included)
    from offline_gitd.leaderboard.show import show

    shown = show(out / "leaderboard.csv", "cql:td", "auto", "table", QUICK.bootstrap_reps, 0, keep_flagged=True)
    assert "Across envs:" in shown and shown in printed
    for name in ("aggregate.png", "per_env.png", "index.html"):
        assert (out / "site" / name).stat().st_size > 1000
        assert str(out / "site" / name) in printed
