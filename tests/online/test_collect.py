"""``offline_gitd collect``: a trained behaviour agent recorded into a real Minari dataset, which the
offline learner then trains on; existing ids, --data-dir and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.offline import train as offline_learner
from offline_gitd.offline.config import OfflineConfig

DATASET = "tests/LunarLander-v3/dqn-v0"


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> Path:
    """2,000 LunarLander-v3 steps: the table's 1,000 random initial samples, then 1,000 DQN steps."""
    data_dir = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(data_dir / "elsewhere"))  # --data-dir must win
        assert (
            main(
                [
                    "collect",
                    "LunarLander-v3",
                    "--steps",
                    "2000",
                    "--out",
                    DATASET,
                    "--data-dir",
                    str(data_dir),
                    "--no-progress",
                ]
            )
            == 0
        )
    return data_dir


@pytest.fixture
def minari_root(collected, monkeypatch) -> Path:
    root = collected / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


def test_dataset_is_real_minari_with_metadata(minari_root):
    import minari

    assert (minari_root / DATASET).is_dir()
    dataset = minari.load_dataset(DATASET)
    assert dataset.total_steps == 2000
    metadata = dataset.storage.metadata
    assert metadata["algorithm_name"].startswith("DQN (td critic")
    assert metadata["author"] == {"offline_gitd"} or metadata["author"] == "offline_gitd"
    assert metadata["ref_min_score"] < 0 and "ref_max_score" in metadata
    assert "offline_gitd 0." in metadata["description"]
    env = dataset.recover_environment(eval_env=True)
    assert (env.spec.id, env.spec.max_episode_steps) == ("LunarLander-v3", 500)
    assert all(len(e.rewards) <= 500 for e in dataset.iterate_episodes())


def test_offline_learner_trains_on_the_collected_dataset(minari_root, tmp_path):
    cfg = OfflineConfig(
        dataset=f"minari:{DATASET}",
        out=str(tmp_path / "run"),
        critic="gitd",
        K=3,
        mlp_hidden="16,16",
        epochs=1,
        steps_per_epoch=40,
        eval_episodes=1,
        updates_per_call=20,
    )
    run_dir = offline_learner.train(cfg, progress=False)
    assert (run_dir / "results.csv").read_text().count("\n") == 2  # header + one row


def test_existing_dataset_needs_overwrite(minari_root, capsys):
    import minari

    argv = ["collect", "LunarLander-v3", "--steps", "300", "--out", DATASET, "--policy", "random", "--no-progress"]
    assert main(argv) == 2
    assert "already exists locally; pass --overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert f"written to {minari_root}" in capsys.readouterr().out
    dataset = minari.load_dataset(DATASET)
    assert dataset.total_steps == 300 and "ref_min_score" not in dataset.storage.metadata


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["CartPole-v1", "--policy", "sac"], "CartPole-v1 has discrete actions; online sac needs continuous ones"),
        (["Pendulum-v1", "--policy", "dqn"], "Pendulum-v1 has continuous actions; online dqn needs discrete ones"),
        (["LunarLandr-v3"], "unknown environment 'LunarLandr-v3'"),
        (["Pong"], "Atari data comes from RL Unplugged"),
        (["CartPole-v1", "--steps", "0"], "--steps must be >= 1"),
    ],
)
def test_bad_input(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    steps = [] if "--steps" in argv else ["--steps", "10"]
    assert main(["collect", *argv, *steps, "--out", "tests/bad/x-v0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "tests").exists()
