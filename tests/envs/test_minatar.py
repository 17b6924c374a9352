"""Image observations through Minari (MinAtar and ALE datasets written by minari's own
DataCollector), the MinAtar torso and domain, and DQN-replay datasets cut into checkpoints."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.config.paper import OFFLINE_DEFAULTS, ONLINE_DEFAULTS
from offline_gitd.data.datasets import dataset_profile, open_offline_data
from offline_gitd.envs.images import register_minatar
from offline_gitd.envs.make import describe_spaces, make_env
from offline_gitd.errors import ConfigError
from offline_gitd.networks import check_torso, make_torso, torso_for_shape
from offline_gitd.offline import train as offline_learner
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.online.env_info import inspect_env
from tests.minari_fixtures import record_random_dataset

# minari warns about unset optional metadata (code permalink, author email) of throwaway datasets
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:minari")

MINATAR = "tests/MinAtar-Breakout-v1/random-v0"
ALE = "tests/ALE-Pong-v5/random-v0"
REPLAY = "tests/MinAtar-Breakout-v1/dqn-replay-v0"


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory):
    """A MinAtar (raw env: bool 10x10x4 boards) and an ALE Pong (210x160x3 RGB) dataset, each a few
    hundred random steps recorded by minari.DataCollector on the env as gymnasium makes it."""
    import ale_py

    gym.register_envs(ale_py)
    register_minatar()
    root = tmp_path_factory.mktemp("minari")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(root))
        record_random_dataset(MINATAR, "MinAtar/Breakout-v1", steps=300)
        record_random_dataset(ALE, "ALE/Pong-v5", steps=120, max_episode_steps=50)
        yield root


def offline_config(dataset: str, out: str, **kw) -> OfflineConfig:
    fields = dict(
        dataset=f"minari:{dataset}",
        out=out,
        critic="td",
        epochs=1,
        steps_per_epoch=4,
        batch_size=4,
        eval_episodes=1,
        horizon=20,
        fraction=1.0,
    )
    return OfflineConfig(**(fields | kw))


def test_minatar_torso_is_young_and_tian() -> None:
    """One 3x3 conv with 16 channels, VALID (10 -> 8), then FC 128; 0/1 boards are not divided by 255."""
    torso = make_torso("minatar")
    boards = np.random.default_rng(0).integers(0, 2, size=(2, 10, 10, 4), dtype=np.uint8)
    params = torso.init(jax.random.key(0), jnp.asarray(boards))["params"]
    assert params["Conv_0"]["kernel"].shape == (3, 3, 4, 16)
    assert params["Dense_0"]["kernel"].shape == (8 * 8 * 16, 128)
    out = torso.apply({"params": params}, jnp.asarray(boards))
    np.testing.assert_allclose(out, torso.apply({"params": params}, jnp.asarray(boards, jnp.float32)))
    assert out.shape == (2, 128)


def test_torso_from_shape_and_one_line_refusals() -> None:
    assert torso_for_shape((10, 10, 4)) == "minatar"
    assert torso_for_shape((210, 160, 3)) == "nature"
    assert torso_for_shape((84, 84, 4)) == "nature"
    assert torso_for_shape((8,)) == "mlp"
    check_torso("nature", (210, 160, 3), "Pong")  # VALID padding reads 210x160 (22x16x64 features)
    with pytest.raises(ConfigError, match=r"needs at least 36x36: use --torso impala or impala-gap or minatar"):
        check_torso("nature", (10, 10, 4), "Breakout")
    with pytest.raises(ConfigError, match=r"image observations of shape \(10, 10, 4\): use --torso minatar"):
        check_torso("mlp", (10, 10, 4), "Breakout")
    with pytest.raises(ConfigError, match="use --torso mlp"):
        check_torso("minatar", (8,), "CartPole")
    params = make_torso("nature").init(jax.random.key(0), jnp.zeros((1, 210, 160, 3), jnp.uint8))
    assert params["params"]["Dense_0"]["kernel"].shape == (22 * 16 * 64, 512)


def test_minatar_env_gives_uint8_boards_and_its_own_domain() -> None:
    env = make_env("MinAtar/Breakout-v1", 0)
    obs, _ = env.reset()
    assert obs.dtype == np.uint8 and obs.shape == (10, 10, 4) and set(np.unique(obs)) <= {0, 1}
    assert describe_spaces(env).action_size == 3  # v1: the minimal action set
    env.close()
    info = inspect_env("MinAtar/Breakout-v1", "dqn")
    assert (info.domain, info.suite, info.name, info.images, info.frames) == (
        "minatar",
        "minatar",
        "Breakout-v1",
        True,
        False,
    )
    assert ONLINE_DEFAULTS["minatar"]["torso"] == OFFLINE_DEFAULTS["minatar"]["torso"] == "minatar"
    assert ONLINE_DEFAULTS["minatar"]["epsilon_end"] == 0.1


@pytest.mark.parametrize(
    "dataset, shape, torso, domain",
    [
        (MINATAR, (10, 10, 4), "minatar", "minatar"),
        # the Nature CNN on 210x160 frames compiles for ~8 s: in the default run, not the quick one
        pytest.param(ALE, (210, 160, 3), "nature", "gym", marks=pytest.mark.e2e),
    ],
)
def test_image_dataset_reaches_a_cnn_unflattened(minari_root, tmp_path, dataset, shape, torso, domain) -> None:
    """The replay's batch is [B, H, W, C] uint8 (not stacked, not flattened), the torso is the CNN the
    shape calls for, and one short epoch trains and evaluates end to end."""
    assert dataset_profile(f"minari:{dataset}") == (domain, shape)
    cfg = offline_learner.resolve_config(offline_config(dataset, str(tmp_path / "run")))
    assert cfg.torso == torso
    data = open_offline_data(cfg)
    batch = data.replay.sample(8, np.random.default_rng(0))
    assert batch.obs.shape == (8, *shape) and batch.obs.dtype == np.uint8
    assert batch.next_obs.shape == (8, *shape) and batch.next_obs.dtype == np.uint8
    if dataset == MINATAR:
        assert set(np.unique(batch.obs)) <= {0, 1}  # bool boards as 0/1
    family = offline_learner.build_family(cfg, data)
    state = family.init(jax.random.key(0))
    assert any("Conv_0" in str(path) for path, _ in jax.tree_util.tree_leaves_with_path(state.params))
    eval_env = data.make_eval_env(0)
    obs, _ = eval_env.reset(seed=0)
    assert obs.shape == shape and obs.dtype == np.uint8  # evaluation feeds what the learner trained on
    eval_env.close()
    run_dir = offline_learner.train(cfg, progress=False)
    assert (run_dir / "results.csv").read_text().count("\n") == 2  # header + one evaluation
    config = json.loads((run_dir / "config.json").read_text())["config"]
    assert config["torso"] == torso


def test_a_torso_that_cannot_read_the_frames_is_refused(minari_root, tmp_path) -> None:
    cfg = offline_config(MINATAR, str(tmp_path / "run"), torso="nature")
    with pytest.raises(ConfigError, match="use --torso"):
        offline_learner.train(cfg, progress=False)
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def dqn_replay(tmp_path_factory):
    """2,000 MinAtar Breakout steps of a DQN agent's replay, cut every 500 env steps."""
    data_dir = tmp_path_factory.mktemp("data")
    argv = ["collect", "MinAtar/Breakout-v1", "--policy", "dqn", "--steps", "2000", "--checkpoint-every", "500"]
    argv += ["--epsilon-steps", "1000", "--utd", "1/4", "--run-dir", str(data_dir / "behaviour")]
    assert main([*argv, "--out", REPLAY, "--data-dir", str(data_dir), "--no-progress"]) == 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(data_dir / "minari"))
        yield data_dir


def logged_checkpoints(dataset, every):
    """Independently of the package: each episode's transitions in logged order, grouped by the
    checkpoint (global env step of its first transition // every) it started in."""
    groups: dict[int, list] = {}
    step = 0
    for episode in dataset.iterate_episodes():
        groups.setdefault(step // every, []).append(episode)
        step += len(episode.rewards)
    return [groups[c] for c in sorted(groups)]


def test_dqn_replay_keeps_the_first_tenth_of_each_checkpoint(dqn_replay, tmp_path) -> None:
    import minari

    behaviour = json.loads((dqn_replay / "behaviour" / "config.json").read_text())["config"]
    assert (behaviour["epsilon_steps"], behaviour["utd"], behaviour["epsilon_end"]) == (1000, 0.25, 0.1)
    dataset = minari.load_dataset(REPLAY)
    metadata = dataset.storage.metadata
    assert dataset.total_steps == 2000 and metadata["checkpoint_every"] == 500
    checkpoints = logged_checkpoints(dataset, 500)
    assert len(checkpoints) == 4
    returns = [float(np.mean([np.sum(e.rewards) for e in episodes])) for episodes in checkpoints]
    np.testing.assert_allclose(metadata["checkpoint_returns"], returns)

    expected_obs, expected_actions, expected_rewards = [], [], []
    for episodes in checkpoints:
        obs = np.concatenate([np.asarray(e.observations[:-1], np.uint8) for e in episodes])
        actions = np.concatenate([e.actions for e in episodes])
        rewards = np.concatenate([e.rewards for e in episodes])
        keep = math.ceil(0.1 * len(rewards))
        expected_obs.append(obs[:keep])
        expected_actions.append(actions[:keep])
        expected_rewards.append(rewards[:keep])

    cfg = offline_learner.resolve_config(offline_config(REPLAY, str(tmp_path / "run"), fraction=0.1))
    store = open_offline_data(cfg).replay.store
    rows = open_offline_data(cfg).replay.transition_rows()
    np.testing.assert_array_equal(store.obs[rows], np.concatenate(expected_obs))
    np.testing.assert_array_equal(store.actions[rows], np.concatenate(expected_actions))
    np.testing.assert_allclose(store.rewards[rows], np.concatenate(expected_rewards))


def test_dqn_replay_at_full_fraction_is_the_whole_replay(dqn_replay, tmp_path) -> None:
    cfg = offline_learner.resolve_config(offline_config(REPLAY, str(tmp_path / "run"), fraction=1.0))
    assert open_offline_data(cfg).replay.store.num_transitions == 2000


def test_bad_checkpoint_every_is_refused(tmp_path, capsys) -> None:
    argv = ["collect", "MinAtar/Breakout-v1", "--steps", "10", "--checkpoint-every", "0", "--out", "x/y-v0"]
    assert main([*argv, "--data-dir", str(tmp_path)]) != 0
    assert "--checkpoint-every must be >= 1" in capsys.readouterr().err


def test_online_dqn_on_minatar_trains_the_minatar_torso_and_evaluates(tmp_path, capsys) -> None:
    run = str(tmp_path / "run")
    argv = ["online", "dqn", "--env", "MinAtar/Breakout-v1", "--loop", "python", "--critic", "td", "--steps", "200"]
    argv += ["--initial-samples", "50", "--log-every", "100", "--checkpoint-every", "200", "--out", run]
    assert main([*argv, "--no-progress"]) == 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["config"]["torso"] == "minatar" and config["config"]["epsilon_end"] == 0.1
    assert (tmp_path / "run" / "results.csv").read_text().splitlines()[1].startswith("minatar,Breakout-v1,dqn,td")
    capsys.readouterr()
    assert main(["evaluate", run, "--episodes", "1"]) == 0
    assert "return" in capsys.readouterr().out
    board = str(tmp_path / "board.csv")  # suite minatar is known to the board: no --allow-new-env
    assert main(["leaderboard", "submit", run, "--board", board]) == 0
    assert (tmp_path / "board.csv").read_text().count("\nminatar,Breakout-v1,dqn,td,") == 2  # steps 100, 200
