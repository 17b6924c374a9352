"""``offline_gitd collect``: a trained behaviour agent recorded into a real Minari dataset, which the
offline learner then trains on; existing ids, --data-dir and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.offline import train as offline_learner
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.online.collect import behaviour_record, describe_collection

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


# the collected fixture trains a DQN on LunarLander while it collects: end to end
@pytest.mark.e2e
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
    # What the data is: 1,000 random initial samples (the table's), then DQN, which trained.
    updates = metadata["behaviour_updates"]
    assert (metadata["behaviour_policy"], metadata["behaviour_random_steps"]) == ("dqn", 1000) and updates > 0
    assert (
        f"1000 uniformly random initial steps, then 1000 steps epsilon-greedy, {updates} gradient updates"
        in (metadata["description"])
    )
    assert "ref_min_score: a uniformly random policy" in metadata["description"]
    env = dataset.recover_environment(eval_env=True)
    assert (env.spec.id, env.spec.max_episode_steps) == ("LunarLander-v3", 500)
    assert all(len(e.rewards) <= 500 for e in dataset.iterate_episodes())


@pytest.mark.e2e
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


@pytest.mark.e2e
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


def describe(policy: str, steps: int, initial: int, references: tuple[str, ...]) -> tuple[dict, str]:
    config = {"initial_samples": initial, "utd": 0.25}
    record = behaviour_record(policy, steps, config)
    text = describe_collection(
        env_id="CartPole-v1",
        horizon=None,
        steps=steps,
        name="random policy" if policy == "random" else "DQN (td critic, offline_gitd online)",
        record=record,
        references=references,
        code_version="offline_gitd 9.9",
        config=config,
    )
    return record, text


def test_the_description_says_what_the_data_is() -> None:
    """Random data is never called trained, an agent that never updated is said to have never
    trained, and only the reference scores actually written are explained."""
    both = ("ref_min_score", "ref_max_score")
    record, text = describe("random", 300, 300, ())
    assert record == {"behaviour_policy": "random", "behaviour_random_steps": 300, "behaviour_updates": 0}
    assert "uniformly random policy: every action drawn uniformly, no agent trained" in text
    assert "trained online" not in text and "ref_" not in text and "No reference scores are written" in text
    record, text = describe("dqn", 800, 1000, both)
    assert record == {"behaviour_policy": "dqn", "behaviour_random_steps": 800, "behaviour_updates": 0}
    assert "never trained (0 gradient updates): 800 of the 800 steps are its uniformly random initial samples." in text
    assert "ref_min_score: a uniformly random policy's mean return over 100 episodes" in text
    record, text = describe("dqn", 2000, 1000, both)
    assert record == {"behaviour_policy": "dqn", "behaviour_random_steps": 1000, "behaviour_updates": 250}
    assert "trained online from scratch, exploration included: 1000 uniformly random initial steps, then 1000" in text
    assert "250 gradient updates in all" in text and "ref_max_score: the behaviour agent's" in text
    assert text.endswith('Config: {"initial_samples": 1000, "utd": 0.25}')


def test_random_policy_metadata_says_random_and_writes_no_references(tmp_path, monkeypatch, capsys) -> None:
    import minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    argv = ["collect", "CartPole-v1", "--steps", "100", "--policy", "random", "--out", "tests/CartPole-v1/random-v0"]
    assert main([*argv, "--no-progress"]) == 0
    capsys.readouterr()
    metadata = minari.load_dataset("tests/CartPole-v1/random-v0").storage.metadata
    assert metadata["algorithm_name"] == "random policy"
    assert (metadata["behaviour_policy"], metadata["behaviour_random_steps"], metadata["behaviour_updates"]) == (
        "random",
        100,
        0,
    )
    assert not {"ref_min_score", "ref_max_score"} & set(metadata)
    description = metadata["description"]
    assert description.startswith("100 steps of CartPole-v1 (horizon default) recorded from a uniformly random policy")
    assert "trained" not in description.replace("no agent trained", "") and "ref_" not in description
