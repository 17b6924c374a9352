"""Every offline algorithm resumes exactly (docs/runs.md): a run stopped after its first epoch and
resumed to its second ends with the very state, results and evaluation returns of a run that never
stopped. CQL on discrete actions (CartPole: episodes that terminate early) and on continuous ones
(Pendulum: fixed 200-step episodes, every evaluation ending on a truncation), BC, TD3+BC and IQL.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

import offline_gitd
from offline_gitd.cli import main
from tests.minari_fixtures import record_random_dataset

CARTPOLE, PENDULUM = "tests/cartpole/random-v0", "tests/pendulum/random-v0"
SMALL = ["--mlp-hidden", "16,16", "--steps-per-epoch", "20", "--eval-episodes", "1", "--batch-size", "16"]
SMALL += ["--updates-per-call", "10", "--seeds", "0-1", "--no-progress", "--no-tensorboard"]


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("minari")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(root))
        record_random_dataset(CARTPOLE, "CartPole-v1", steps=400)
        record_random_dataset(PENDULUM, "Pendulum-v1", steps=400)
    return root


@pytest.mark.e2e
@pytest.mark.parametrize(
    "algo, dataset",
    [
        # discrete CQL's resume is also tests/offline/test_offline.py's, under both drivers
        pytest.param("cql", CARTPOLE, marks=pytest.mark.slow),
        ("bc", CARTPOLE),
        pytest.param("cql", PENDULUM, marks=pytest.mark.slow),  # CQL-SAC: 30 sampled actions, compiles long
        ("td3bc", PENDULUM),
        pytest.param("iql", PENDULUM, marks=pytest.mark.slow),  # slow: keeps make test inside its budget
    ],
)
def test_a_resumed_run_ends_where_an_uninterrupted_one_does(minari_root, tmp_path, monkeypatch, algo, dataset) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    train = ["train", "--dataset", f"minari:{dataset}", "--algo", algo, *SMALL]
    assert main([*train, "--epochs", "2", "--out", str(tmp_path / "straight")]) == 0
    assert main([*train, "--epochs", "1", "--out", str(tmp_path / "stopped")]) == 0
    resume = ["train", "--out", str(tmp_path / "stopped"), "--resume", "--epochs", "2", "--no-progress"]
    assert main([*resume, "--no-tensorboard"]) == 0
    straight, resumed = offline_gitd.load_run(tmp_path / "straight"), offline_gitd.load_run(tmp_path / "stopped")
    assert straight.checkpoints() == resumed.checkpoints() == [1, 2]
    for a, b in zip(jax.tree.leaves(straight.agent().state), jax.tree.leaves(resumed.agent().state), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    columns = ["seed", "step", "return"]
    assert straight.results[columns].equals(resumed.results[columns])
    assert len(resumed.results) == 4  # 2 epochs x 2 seeds, none written twice
