"""Using a trained agent: ``load_run`` (policy, metrics, evaluate), ``offline_gitd evaluate``,
videos, and the evaluation statistics logged during training."""

from __future__ import annotations

from pathlib import Path

import cv2
import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import offline_gitd
from offline_gitd.cli import main
from offline_gitd.leaderboard.reference import d4rl_reference, d4rl_scores
from offline_gitd.offline.loop import _eval_stats, evaluation_seed
from offline_gitd.offline.train import train
from tests.minari_fixtures import record_random_dataset
from tests.offline.test_offline import small_config
from tests.support.argv import online_cartpole

pytestmark = pytest.mark.e2e

DATASET = "tests/cartpole/eval-v0"


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory) -> Path:
    """A two-seed, two-epoch offline run on a random CartPole dataset."""
    root = tmp_path_factory.mktemp("eval")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(root / "minari"))
        record_random_dataset(DATASET, "CartPole-v1", steps=800)
        cfg = small_config(
            f"minari:{DATASET}",
            root / "run",
            K=2,
            mlp_hidden="16",
            steps_per_epoch=40,
            eval_episodes=3,
            updates_per_call=20,
        )
        train(cfg, progress=False)
    return root


@pytest.fixture
def run_dir(offline_run, monkeypatch) -> Path:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(offline_run / "minari"))
    return offline_run / "run"


def test_load_run_reproduces_the_training_evaluation(run_dir) -> None:
    run = offline_gitd.load_run(run_dir)
    assert run.kind == "offline" and run.seeds == [0, 1] and run.checkpoints() == [1, 2]
    metrics = run.metrics
    assert isinstance(metrics, pd.DataFrame) and len(metrics) == 4
    # the run records the evaluation seed of every (seed, epoch): docs/runs.md#evaluating-a-trained-agent
    for row in metrics.itertuples():
        assert row.eval_seed == evaluation_seed(row.seed, row.epoch)
    assert evaluation_seed(0, 1) != evaluation_seed(0, 2) != evaluation_seed(1, 2)
    for seed in run.seeds:
        for epoch in run.checkpoints():
            logged = metrics[(metrics.seed == seed) & (metrics.epoch == epoch)].iloc[0]
            # the defaults are the loop's evaluation (3 episodes, its seed): the logged return, bit for bit
            returns = run.evaluate(seed=seed, epoch=epoch)
            assert len(returns) == 3
            assert float(np.mean(returns)) == logged.eval_return
            assert float(np.std(returns)) == logged.eval_return_std


def test_cli_defaults_print_the_logged_return_of_the_last_checkpoint(run_dir, capsys) -> None:
    assert main(["evaluate", str(run_dir)]) == 0
    out = capsys.readouterr().out
    metrics = pd.read_csv(run_dir / "metrics.csv")
    for seed in (0, 1):
        logged = metrics[(metrics.seed == seed) & (metrics.epoch == 2)].iloc[0]
        assert (
            f"seed {seed} at epoch 2: return {logged.eval_return:.2f} +- {logged.eval_return_std:.2f} "
            f"over 3 episode(s), evaluation seed {int(logged.eval_seed)}"
        ) in out


def test_an_older_run_without_the_column_evaluates_with_the_same_seed(run_dir, tmp_path) -> None:
    """Runs written before ``eval_seed`` was logged: the seed is recomputed, the same function."""
    import shutil

    copy = tmp_path / "old"
    shutil.copytree(run_dir, copy)
    metrics = pd.read_csv(copy / "metrics.csv").drop(columns=["eval_seed"])
    metrics.to_csv(copy / "metrics.csv", index=False)
    run = offline_gitd.load_run(copy)
    assert run.evaluation_protocol(1, 2) == (3, evaluation_seed(1, 2))
    assert (
        float(np.mean(run.evaluate(seed=1))) == metrics[(metrics.seed == 1) & (metrics.epoch == 2)].eval_return.iloc[0]
    )


def test_policy_is_a_callable_of_one_observation(run_dir) -> None:
    run = offline_gitd.load_run(run_dir)
    act = run.policy(seed=1, epoch=1)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    action = act(obs)
    assert isinstance(action, int) and env.action_space.contains(action)
    env.step(action)


def test_cli_prints_mean_and_std_and_films(run_dir, tmp_path, capsys) -> None:
    video = tmp_path / "agent.mp4"
    assert main(["evaluate", str(run_dir), "--episodes", "2", "--video", str(video)]) == 0
    out = capsys.readouterr().out
    assert "seed 0 at epoch 2: return" in out and "+-" in out and "seed 1 at epoch 2" in out
    capture = cv2.VideoCapture(str(video))
    frames = 0
    while capture.read()[0]:
        frames += 1
    assert frames >= 9  # a CartPole episode lasts at least 9 steps (plus the first frame)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--epoch", "7"], "no checkpoint at epoch 7"),
        (["--seed", "5"], "seed 5 is not in"),
        (["--episodes", "0"], "--episodes must be >= 1"),
        (["--video", "out.gif"], ".mp4 or .avi"),
    ],
)
def test_bad_input_is_one_line(run_dir, capsys, argv, message) -> None:
    assert main(["evaluate", str(run_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_not_a_run_directory(tmp_path, capsys) -> None:
    assert main(["evaluate", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_online_run_policy_and_episodes(tmp_path) -> None:
    argv = online_cartpole(
        critic="td", steps=100, mlp_hidden=8, batch_size=8, initial_samples=50, log_every=50, checkpoint_every=50
    )
    assert main([*argv, "--out", str(tmp_path / "run"), "--no-progress", "--no-tensorboard"]) == 0
    run = offline_gitd.load_run(tmp_path / "run")
    assert run.kind == "online" and run.checkpoints() == [50, 100]
    assert len(run.episodes) > 0 and set(run.results["step"]) == {50, 100}
    returns = run.evaluate(2, epoch=50)
    assert returns.shape == (2,) and np.all(returns >= 8)


def test_eval_stats_log_std_and_d4rl_score() -> None:
    low, high = d4rl_scores()["hopper-medium-v2"]
    assert d4rl_reference("minari", "mujoco/hopper/medium-v0") == (low, high)
    stats = _eval_stats(np.array([low, high]), d4rl_reference("minari", "mujoco/hopper/medium-v0"))
    assert stats == pytest.approx(
        {"eval_return": (low + high) / 2, "eval_return_std": (high - low) / 2, "eval_d4rl_score": 50.0}
    )
    assert d4rl_reference("gym", "CartPole-v1") is None
    assert set(_eval_stats(np.array([1.0]), None)) == {"eval_return", "eval_return_std"}


def test_continuous_actions_reproduce_the_logged_return_exactly(tmp_path, monkeypatch, capsys) -> None:
    """Pendulum's returns are sums of real-valued rewards, so a changed action anywhere changes
    them: the default ``evaluate`` of the last checkpoint equals metrics.csv to the last bit."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    record_random_dataset("tests/pendulum/eval-v0", "Pendulum-v1", steps=400)
    run_dir = tmp_path / "run"
    cfg = small_config(
        "minari:tests/pendulum/eval-v0", run_dir, algo="td3bc", critic="td", K=1, steps_per_epoch=30, eval_episodes=2
    )
    train(cfg, progress=False)
    run = offline_gitd.load_run(run_dir)
    metrics = run.metrics
    for seed in run.seeds:
        logged = metrics[(metrics.seed == seed) & (metrics.epoch == 2)].iloc[0]
        returns = run.evaluate(seed=seed)
        assert float(np.mean(returns)) == logged.eval_return and logged.eval_return != round(logged.eval_return)
