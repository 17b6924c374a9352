"""Minari datasets built in the test with DataCollector feed the replay; terminal != truncated."""

import gymnasium as gym
import minari
import numpy as np
import pytest

from offline_gitd.data.minari_source import flatten_observations, minari_store
from offline_gitd.data.replay import Replay

GAMMA = 0.9
# minari warns about unset optional metadata (eval env, env spec) of these throwaway datasets
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:minari")


class DictObsEnv(gym.Env):
    """A tiny env with Dict observations and a Box action; terminates at random, else truncated."""

    observation_space = gym.spaces.Dict(
        {"position": gym.spaces.Box(-10, 10, (2,), np.float32), "phase": gym.spaces.Discrete(3)}
    )
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        return {"position": np.array([self.t, -self.t], np.float32), "phase": self.t % 3}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action[0]), bool(self.np_random.random() < 0.15), False, {}


def collect(env, dataset_id, steps, seed=0):
    collector = minari.DataCollector(env)
    collector.reset(seed=seed)
    collector.action_space.seed(seed)
    for _ in range(steps):
        _, _, terminated, truncated, _ = collector.step(collector.action_space.sample())
        if terminated or truncated:
            collector.reset()
    return collector.create_dataset(dataset_id, algorithm_name="random", description="test")


@pytest.fixture(scope="module", autouse=True)
def minari_root(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(tmp_path_factory.mktemp("minari")))
        yield


def check_against_raw(dataset, store):
    """Every episode's rows, ends and last-transition discount match the raw Minari episode."""
    replay = Replay(store, n_step=2, gamma=GAMMA)
    episodes = list(dataset.iterate_episodes())
    assert store.num_episodes == len(episodes)
    assert store.num_transitions == sum(len(e.actions) for e in episodes)
    kinds = set()
    for start, episode in zip(store.episode_starts, episodes, strict=True):
        steps = len(episode.actions)
        rows = np.arange(start, start + steps + 1)
        np.testing.assert_allclose(
            store.obs[rows], flatten_observations(dataset.observation_space, episode.observations)
        )
        np.testing.assert_array_equal(store.terminals[rows[:-1]], episode.terminations)
        terminated, truncated = bool(episode.terminations[-1]), bool(episode.truncations[-1])
        assert terminated or truncated  # both at once counts as terminated
        kinds.add("terminated" if terminated else "truncated")
        last = replay.batch_at(rows[-2:-1])
        assert last.reward[0] == pytest.approx(episode.rewards[-1])
        assert last.discount[0] == pytest.approx(0.0 if terminated else GAMMA)
        np.testing.assert_allclose(last.next_obs[0], store.obs[rows[-1]])
    return kinds


def test_cartpole_discrete_actions():
    # 20 steps: about half of a random policy's CartPole episodes end by termination before it and
    # the rest are truncated at it, so both kinds are in the data whatever the draws (at 40 steps a
    # run could see no truncation at all)
    env = gym.make("CartPole-v1", max_episode_steps=20)
    dataset = collect(env, "test/cartpole/random-v0", 300)
    store = minari_store("test/cartpole/random-v0")
    assert check_against_raw(dataset, store) == {"terminated", "truncated"}
    batch = Replay(store, n_step=3, gamma=GAMMA).sample(16, 0)
    assert batch.obs.shape == (16, 4) and batch.obs.dtype == np.float32
    assert batch.action.dtype == np.int32 and batch.action.shape == (16,)


def test_pendulum_box_actions_truncated_only():
    env = gym.make("Pendulum-v1", max_episode_steps=60)
    dataset = collect(env, "test/pendulum/random-v0", 200)
    store = minari_store(dataset)
    assert check_against_raw(dataset, store) == {"truncated"}
    batch = Replay(store).sample(8, 0)
    assert batch.action.shape == (8, 1) and batch.action.dtype == np.float32
    assert np.all(batch.discount > 0)


def test_dict_observations_are_flattened():
    env = gym.wrappers.TimeLimit(DictObsEnv(), max_episode_steps=12)
    dataset = collect(env, "test/dictobs/random-v0", 200)
    subset = range(dataset.total_episodes - 1)
    store = minari_store(dataset, episode_indices=subset)
    assert store.num_episodes == len(subset)
    first = next(dataset.iterate_episodes([0]))
    step_1 = {key: values[1] for key, values in first.observations.items()}
    np.testing.assert_array_equal(store.obs[1], gym.spaces.flatten(dataset.observation_space, step_1))
    assert store.obs.shape[1] == 2 + 3  # Box(2,) + one-hot Discrete(3)
    assert check_against_raw(dataset, minari_store(dataset)) == {"terminated", "truncated"}
