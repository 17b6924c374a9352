"""``offline_gitd demo --quick``: the main job's whole pipeline at a size CI can afford."""

from __future__ import annotations

import csv

import pytest

from offline_gitd.cli import main
from offline_gitd.config.fields import parse_int_range
from offline_gitd.demo import CRITICS, ENVS, QUICK, dataset_id

pytestmark = pytest.mark.e2e


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
    # the printed board is CQL-normalised with CIs, and the outputs are where the demo says
    assert "IQM" in printed and "cql:gitd" in printed and "[" in printed
    for name in ("aggregate.png", "per_env.png", "index.html"):
        assert (out / "site" / name).stat().st_size > 1000
        assert str(out / "site" / name) in printed
