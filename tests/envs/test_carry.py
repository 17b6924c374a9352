"""What MinAtar keeps across a reset, and the online loop's exact resume of an episode that starts
with a sticky action (offline_gitd/envs/carry.py, docs/online.md#resume).

``minatar.Environment.reset`` keeps ``last_action``; a sticky first step (probability 0.1) repeats
it. Replaying an episode's actions from its reset seed in a fresh env is exact only when that carry
is put back: the default-size MinAtar resume of tests/online/test_resume_boundaries.py failed on it.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from offline_gitd.envs.carry import env_carry, set_env_carry
from offline_gitd.envs.make import make_env
from offline_gitd.online.host_state import SeedSlot
from offline_gitd.online.loop import _restore_env, _start_episode, episode_seed

LEFT, NOOP = 1, 0  # Breakout's action indices: n l u r d f
INFO = SimpleNamespace(env_id="MinAtar/Breakout-v1", frames=False, images=True)


def first_step(env: gym.Env, seed: int, carry: int) -> np.ndarray:
    env.reset(seed=seed)
    set_env_carry(env, carry)
    return env.step(NOOP)[0]


def test_the_carry_is_minatars_last_action_and_other_envs_have_none() -> None:
    env = make_env("MinAtar/Breakout-v1", 0)
    set_env_carry(env, LEFT)
    assert env_carry(env) == LEFT and env.unwrapped.game.last_action == LEFT
    env.reset(seed=3)
    assert env_carry(env) == LEFT  # the reset keeps it: the reason this module exists
    cartpole = make_env("CartPole-v1", 0)
    assert env_carry(cartpole) is None
    set_env_carry(cartpole, None)  # nothing to put back, nothing done
    set_env_carry(cartpole, 2)


def test_an_episode_with_a_sticky_first_step_resumes_exactly_only_with_its_carry() -> None:
    env = make_env("MinAtar/Breakout-v1", 0)
    # An episode of run seed 0 whose first step is sticky: its first observation depends on the carry.
    episode = next(
        e
        for e in range(500)
        if not np.array_equal(first_step(env, episode_seed(0, e), LEFT), first_step(env, episode_seed(0, e), NOOP))
    )
    # The previous episode ended with 'left', so the new episode starts with that carry.
    slot = SeedSlot(seed=0, replay=None, rng=np.random.default_rng(0), episode=episode, env=env)
    set_env_carry(env, LEFT)
    _start_episode(slot, INFO)
    assert slot.env_carry == LEFT
    for _ in range(5):
        slot.actions.append(NOOP)
        slot.obs = np.asarray(env.step(NOOP)[0])
    # A resume: a fresh env (its last action the initial 0) reset with the episode's seed.
    resumed = copy.copy(slot)
    resumed.env = make_env("MinAtar/Breakout-v1", 0)
    _restore_env(resumed, INFO, slot.obs)
    without = copy.copy(slot)
    without.env, without.env_carry = make_env("MinAtar/Breakout-v1", 0), None  # as before the carry was kept
    with pytest.raises(RuntimeError, match="did not replay deterministically"):
        _restore_env(without, INFO, slot.obs)


def test_an_evaluation_episode_returns_the_same_whatever_ran_before_it_in_its_env() -> None:
    """``evaluate``'s returns are the same for 1 env or 8 side by side: each episode starts from a new
    env's carry, not from the last action of the episode that ran before it in its slot (episode 130
    of these 300 differed before)."""
    from offline_gitd.envs.make import evaluate

    def policy(obs: np.ndarray) -> np.ndarray:  # deterministic, and varied enough to end episodes on any action
        flat = np.asarray(obs).reshape(obs.shape[0], -1).astype(np.int64)
        return (flat * np.arange(1, flat.shape[1] + 1)).sum(1) % 3

    def env_fn() -> gym.Env:
        return make_env("MinAtar/Breakout-v1", 0)

    one = evaluate(policy, env_fn, 300, seed=0, epsilon=0.0, num_envs=1)
    eight = evaluate(policy, env_fn, 300, seed=0, epsilon=0.0, num_envs=8)
    np.testing.assert_array_equal(one, eight)
