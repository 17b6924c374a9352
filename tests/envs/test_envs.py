"""Environment construction: the Machado et al. (2018) Atari protocol on real ROMs, make_env,
describe_spaces and the evaluation helper."""

from __future__ import annotations

from typing import Any

import cv2
import gymnasium as gym
import numpy as np
import pytest

from offline_gitd.envs.atari import (
    RLU_GAMES,
    MachadoAtariPreprocessing,
    make_atari_env,
    resolve_game,
)
from offline_gitd.envs.make import describe_spaces, evaluate, evaluate_policies, make_env
from offline_gitd.errors import UsageError


def _small(frame: np.ndarray) -> np.ndarray:
    return cv2.resize(frame, (84, 84), interpolation=cv2.INTER_AREA)


# --------------------------------------------------------------------------------------------------
# Atari protocol on real ROMs


def test_pong_spaces_minimal_actions_and_sticky_setting() -> None:
    env = make_atari_env("Pong", seed=0)
    ale = env.unwrapped.ale
    assert env.observation_space.shape == (84, 84, 4)
    assert env.observation_space.dtype == np.uint8
    # RL Unplugged action i is the i-th action of ALE's minimal set.
    assert env.action_space.n == 6 == len(ale.getMinimalActionSet())
    assert env.unwrapped.get_action_meanings() == [
        "NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"
    ]  # fmt: skip
    assert ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    assert ale.getInt("max_num_frames_per_episode") == 108_000
    assert make_env("atari:Pong", 0).unwrapped.ale.getFloat("repeat_action_probability") == (pytest.approx(0.25))


def test_reset_stack_is_zero_padded_first_screen() -> None:
    env = make_atari_env("Pong", seed=1)
    obs, _ = env.reset()
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    assert not obs[..., :3].any()
    np.testing.assert_array_equal(obs[..., 3], _small(env.unwrapped.ale.getScreenGrayscale()))


def test_stack_shifts_and_frame_skip_is_four() -> None:
    env = make_atari_env("Pong", seed=2)
    obs, _ = env.reset()
    ale = env.unwrapped.ale
    assert ale.getEpisodeFrameNumber() == 0
    for t in range(1, 41):
        nxt, _, terminated, truncated, info = env.step(t % 6)
        assert not (terminated or truncated)
        np.testing.assert_array_equal(nxt[..., :3], obs[..., 1:])
        assert ale.getEpisodeFrameNumber() == info["episode_frame_number"] == 4 * t
        obs = nxt
    assert obs[..., 0].any()  # the zero padding has been shifted out


def test_max_pool_of_last_two_frames_matches_raw_ale_in_lockstep() -> None:
    """Without sticky actions the emulator is deterministic, so a raw frameskip-1 env fed the same
    actions shows the frames the wrapper pooled, including on the truncated last step (where the
    stock gymnasium 1.4.0 AtariPreprocessing returns a stale observation)."""
    steps = 30
    env = make_atari_env("Breakout", seed=3, sticky=0.0, max_steps=steps)
    raw = gym.make("ALE/Breakout-v5", obs_type="grayscale", frameskip=1,
                   repeat_action_probability=0.0)  # fmt: skip
    obs, _ = env.reset(seed=3)
    frame, _ = raw.reset(seed=3)
    np.testing.assert_array_equal(obs[..., -1], _small(frame))
    rng = np.random.default_rng(0)
    for t in range(steps):
        action = 1 if t % 5 == 0 else int(rng.integers(4))
        obs, reward, terminated, truncated, _ = env.step(action)
        frames, raw_reward = [], 0.0
        for _ in range(4):
            frame, r, *_ = raw.step(action)
            frames.append(frame)
            raw_reward += float(r)
        np.testing.assert_array_equal(obs[..., -1], _small(np.maximum(frames[-2], frames[-1])))
        assert reward == raw_reward
        assert not terminated
    assert truncated


def test_life_loss_does_not_end_the_episode_game_over_does() -> None:
    env = make_atari_env("Breakout", seed=4)
    _, info = env.reset()
    start_lives = info["lives"]
    rng = np.random.default_rng(0)
    lost_a_life_and_continued = False
    for t in range(5_000):
        action = 1 if t % 10 == 0 else int(rng.integers(4))  # FIRE relaunches the ball
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
        lost_a_life_and_continued |= info["lives"] < start_lives
    assert lost_a_life_and_continued
    assert terminated and not truncated and info["lives"] == 0


def test_step_cap_is_a_truncation() -> None:
    env = make_atari_env("Pong", seed=5, max_steps=50)
    env.reset()
    for t in range(1, 51):
        _, _, terminated, truncated, _ = env.step(0)
        assert not terminated
        assert truncated == (t == 50)
    assert env.unwrapped.ale.getEpisodeFrameNumber() == 200


def test_every_rlu_game_resolves_and_unknown_games_are_usage_errors() -> None:
    assert len(RLU_GAMES) == 46
    for game in RLU_GAMES:
        assert resolve_game(game) == f"ALE/{game}-v5"
    assert resolve_game("mspacman") == "ALE/MsPacman-v5"
    with pytest.raises(UsageError, match="Pong") as err:
        make_atari_env("Pongg", seed=0)
    assert "\n" not in str(err.value)
    with pytest.raises(UsageError, match="MsPacman"):
        make_env("atari:MsPacmn", 0)


# --------------------------------------------------------------------------------------------------
# The wrapper on a synthetic ALE-like env: episode ends inside a frame skip, reward clipping


class _FakeALE(gym.Env):
    """Grayscale frames from a seeded RNG, ``reward`` per frame, game over after ``frames``."""

    def __init__(self, frames: int, reward: float) -> None:
        self._frameskip, self._obs_type = 1, "grayscale"
        self.observation_space = gym.spaces.Box(0, 255, (210, 160), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.frames, self.reward, self.shown = frames, reward, []

    def _frame(self) -> np.ndarray:
        self.shown.append(self.np_random.integers(0, 256, (210, 160), dtype=np.uint8))
        return self.shown[-1]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.shown = []
        return self._frame(), {}

    def step(self, action: int):
        done = len(self.shown) == self.frames
        return self._frame(), self.reward, done, False, {}


def test_episode_ending_inside_a_skip_pools_its_own_last_two_frames() -> None:
    env = MachadoAtariPreprocessing(_FakeALE(frames=6, reward=0.5))
    env.reset(seed=0)
    _, reward, terminated, _, _ = env.step(0)
    assert reward == 2.0 and not terminated
    obs, reward, terminated, truncated, _ = env.step(0)
    assert terminated and not truncated and reward == 1.0  # two frames into the second skip
    shown = env.unwrapped.shown
    np.testing.assert_array_equal(obs[..., -1], _small(np.maximum(shown[-2], shown[-1])))


def test_clip_rewards_keeps_the_game_reward_in_info() -> None:
    env = MachadoAtariPreprocessing(_FakeALE(frames=100, reward=3.0), clip_rewards=True)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(0)
    assert reward == 1.0 and info["unclipped_reward"] == 12.0
    unclipped = MachadoAtariPreprocessing(_FakeALE(frames=100, reward=-3.0))
    unclipped.reset(seed=0)
    assert unclipped.step(0)[1] == -12.0


# --------------------------------------------------------------------------------------------------
# make_env, describe_spaces, evaluate


def test_make_env_and_describe_spaces() -> None:
    cartpole = describe_spaces(make_env("CartPole-v1", 0))
    assert cartpole.obs_shape == (4,) and cartpole.action_kind == "discrete"
    assert cartpole.action_size == 2 and cartpole.action_bounds is None
    pendulum = describe_spaces(make_env("Pendulum-v1", 0))
    assert pendulum.action_kind == "continuous" and pendulum.action_size == 1
    np.testing.assert_array_equal(pendulum.action_bounds[0], [-2.0])
    np.testing.assert_array_equal(pendulum.action_bounds[1], [2.0])
    lander = describe_spaces(make_env("LunarLander-v3", 0, max_episode_steps=500))
    assert lander.obs_shape == (8,) and lander.action_kind == "discrete"
    assert lander.action_size == 4
    pong = describe_spaces(make_env("Pong", 0))
    assert (pong.obs_shape, pong.obs_dtype, pong.action_size) == ((84, 84, 4), np.uint8, 6)
    with pytest.raises(UsageError, match="CartPole-v1"):
        make_env("CartPol-v1", 0)


def test_describe_spaces_rejects_unsupported_action_spaces() -> None:
    env = _FakeALE(frames=1, reward=0.0)
    env.action_space = gym.spaces.MultiDiscrete([2, 3])
    with pytest.raises(UsageError, match="MultiDiscrete") as err:
        describe_spaces(env)
    assert "\n" not in str(err.value)


def _cartpole_policy(obs: np.ndarray) -> np.ndarray:
    return (obs[:, 2] > 0).astype(np.int64)  # push towards the lean: a mediocre, varied score


def test_evaluate_returns_one_deterministic_return_per_episode() -> None:
    def env_fn() -> gym.Env:
        return make_env("CartPole-v1", 0, max_episode_steps=100)

    returns = evaluate(_cartpole_policy, env_fn, episodes=5, seed=7, epsilon=0.3, num_envs=2)
    assert returns.shape == (5,)
    assert np.all(returns > 0) and np.all(returns <= 100)
    np.testing.assert_array_equal(
        returns, evaluate(_cartpole_policy, env_fn, episodes=5, seed=7, epsilon=0.3, num_envs=5)
    )
    assert not np.array_equal(returns, evaluate(_cartpole_policy, env_fn, episodes=5, seed=8, epsilon=0.3))
    with pytest.raises(UsageError, match="epsilon"):
        evaluate(lambda o: np.zeros((len(o), 1)), lambda: make_env("Pendulum-v1", 0), 1, 0)


def test_evaluate_policies_gives_each_policy_its_own_evaluation() -> None:
    """Several policies stepped together (one batched call per env step) get exactly the returns
    each would get evaluated alone, with its own env factory and seed."""

    def env_fn() -> gym.Env:
        return make_env("CartPole-v1", 0, max_episode_steps=100)

    def opposite(obs: np.ndarray) -> np.ndarray:
        return 1 - _cartpole_policy(obs)

    def both(obs: np.ndarray) -> np.ndarray:
        assert obs.shape[:2] == (2, 3)  # [policies, slots]: a fixed shape, one compile
        return np.stack([_cartpole_policy(obs[0]), opposite(obs[1])])

    together = evaluate_policies(both, [env_fn, env_fn], episodes=5, seeds=[7, 9], epsilon=0.3, num_envs=3)
    assert together.shape == (2, 5)
    np.testing.assert_array_equal(together[0], evaluate(_cartpole_policy, env_fn, 5, 7, 0.3, num_envs=3))
    np.testing.assert_array_equal(together[1], evaluate(opposite, env_fn, 5, 9, 0.3, num_envs=3))
    with pytest.raises(UsageError, match="one env factory per seed"):
        evaluate_policies(both, [env_fn], episodes=1, seeds=[1, 2])


def test_evaluate_counts_truncated_atari_episodes() -> None:
    def env_fn() -> gym.Env:
        return make_atari_env("Pong", seed=0, max_steps=40)

    def policy(obs: np.ndarray) -> np.ndarray:
        assert obs.shape[1:] == (84, 84, 4)
        return np.full(len(obs), 2)

    returns = evaluate(policy, env_fn, episodes=3, seed=0, epsilon=0.001, num_envs=2)
    assert returns.shape == (3,)
    np.testing.assert_array_equal(returns, evaluate(policy, env_fn, episodes=3, seed=0))
