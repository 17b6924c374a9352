"""The JAX CartPole is gymnasium's CartPole-v1: step by step, episode by episode, and in the
distribution of a policy's returns."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from offline_gitd.envs.jax_cartpole import MAX_EPISODE_STEPS, RESET_BOUND, CartPole, CartPoleState

ENV = CartPole()
STEP = jax.jit(ENV.step)
# float32 rounding of one step, a little amplified by the pole over a short random episode
ATOL = 1e-5


def balance(obs: np.ndarray) -> int:
    """A linear controller that keeps the pole up for the whole 500 steps: push toward where the
    pole is falling, with a little cart-centring."""
    x, x_dot, theta, theta_dot = obs
    return int(theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0)


def gym_env_at(state: CartPoleState) -> gym.Env:
    """gymnasium's CartPole-v1 (with its TimeLimit) put into the JAX env's state."""
    env = gym.make("CartPole-v1")
    env.reset(seed=0)  # the wrappers want a reset before a step
    env.unwrapped.state = np.asarray(state.physics, np.float64)
    return env


def test_random_episodes_follow_gymnasium_to_termination() -> None:
    """Free-running: the same start, the same random actions, every step's observation, reward
    and termination flag the same until both episodes end on the same step."""
    rng = np.random.default_rng(0)
    for episode in range(8):
        state, obs = ENV.reset(jax.random.PRNGKey(episode))
        env = gym_env_at(state)
        np.testing.assert_allclose(obs, env.unwrapped.state, atol=1e-7)
        for t in range(1, MAX_EPISODE_STEPS + 1):
            action = int(rng.integers(2))
            state, obs, reward, terminated, truncated = STEP(state, action)
            gym_obs, gym_reward, gym_terminated, gym_truncated, _ = env.step(action)
            np.testing.assert_allclose(obs, gym_obs, atol=ATOL, err_msg=f"episode {episode}, step {t}")
            assert float(reward) == gym_reward
            assert (bool(terminated), bool(truncated)) == (gym_terminated, gym_truncated), (episode, t)
            if gym_terminated or gym_truncated:
                break
        assert gym_terminated and t < MAX_EPISODE_STEPS  # random play drops the pole early


def test_a_balanced_episode_is_truncated_at_500_steps_like_gymnasium() -> None:
    """Past 500 steps with a balancing policy. The upright pole amplifies rounding by about
    e^(4 t) (t in seconds: e^40 over 500 steps), so even float64 XLA and numpy part ways within
    the episode; each JAX step therefore starts from gymnasium's state (the JAX env's own step
    counter carried along) and must land where gymnasium's step lands."""
    state, _ = ENV.reset(jax.random.PRNGKey(123))
    env = gym_env_at(state)
    gym_obs = np.asarray(env.unwrapped.state, np.float32)
    for t in range(1, MAX_EPISODE_STEPS + 1):
        action = balance(gym_obs)
        synced = CartPoleState(jnp.asarray(env.unwrapped.state, jnp.float32), state.steps)
        state, obs, reward, terminated, truncated = STEP(synced, action)
        gym_obs, gym_reward, gym_terminated, gym_truncated, _ = env.step(action)
        np.testing.assert_allclose(obs, gym_obs, atol=ATOL, err_msg=f"step {t}")
        assert float(reward) == gym_reward
        assert (bool(terminated), bool(truncated)) == (gym_terminated, gym_truncated), t
        if gym_terminated or gym_truncated:
            break
    assert (t, gym_terminated, gym_truncated) == (MAX_EPISODE_STEPS, False, True)


def test_the_jax_env_truncates_its_own_balanced_episode_at_500_steps() -> None:
    """The JAX env alone, acting on its own observations: alive for 499 steps, truncated on the
    500th, and a shorter time limit cuts where it says."""
    for env, limit in ((ENV, MAX_EPISODE_STEPS), (CartPole(max_episode_steps=37), 37)):
        step = jax.jit(env.step)
        state, obs = env.reset(jax.random.PRNGKey(7))
        for t in range(1, limit + 1):
            state, obs, _, terminated, truncated = step(state, balance(np.asarray(obs)))
            assert not terminated
            assert bool(truncated) == (t == limit), t


# Two policies, each as the JAX env and gymnasium see it: (obs, key) -> action and (obs, rng) -> action.
# Uniform random play ends on how fast random pushes tip the pole, and is the protocol's baseline;
# pushing toward the lean keeps the pole up for ~40 steps, ended by the cart's drift and the pole's
# swing, so its returns move with every constant of the dynamics.
POLICIES = {
    "uniform-random": (
        lambda obs, key: jax.random.bernoulli(key).astype(jnp.int32),
        lambda obs, rng: int(rng.integers(2)),
    ),
    "push-toward-the-lean": (
        lambda obs, key: (obs[2] > 0).astype(jnp.int32),
        lambda obs, rng: int(obs[2] > 0),
    ),
}


def returns_jax(policy: Callable[[jax.Array, jax.Array], jax.Array], episodes: int, seed: int) -> np.ndarray:
    """Undiscounted returns of ``policy``, every episode in one vmapped scan over 500 steps."""

    def episode(key: jax.Array) -> jax.Array:
        reset_key, act_key = jax.random.split(key)
        state, obs = ENV.reset(reset_key)

        def body(carry: tuple[CartPoleState, jax.Array, jax.Array, jax.Array], key: jax.Array):
            state, obs, total, done = carry
            state, obs, reward, terminated, truncated = ENV.step(state, policy(obs, key))
            total = total + jnp.where(done, 0.0, reward)
            return (state, obs, total, done | terminated | truncated), None

        carry = (state, obs, jnp.zeros(()), jnp.zeros((), bool))
        (_, _, total, _), _ = jax.lax.scan(body, carry, jax.random.split(act_key, MAX_EPISODE_STEPS))
        return total

    keys = jax.random.split(jax.random.PRNGKey(seed), episodes)
    return np.asarray(jax.jit(jax.vmap(episode))(keys))


def returns_gym(policy: Callable[[np.ndarray, np.random.Generator], int], episodes: int, seed: int) -> np.ndarray:
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed * 100_000 + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs, rng))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return np.asarray(returns)


@pytest.mark.parametrize("name", POLICIES)
def test_a_policys_returns_have_gymnasiums_distribution(name: str) -> None:
    """500 episodes of the same policy in each env, independent draws: a two-sample
    Kolmogorov-Smirnov test does not tell the returns apart (p > 0.01), and the means agree within
    three standard errors. Force 11, tau 0.021, half-length 0.55, an 11-degree threshold or a
    reset box of +-0.1 make the push-toward-the-lean case fail (p < 1e-7); uniform random play
    only notices coarser errors (a 9-degree threshold). Small ones (gravity 9.81) are the
    step-by-step tests' to catch."""
    jax_policy, gym_policy = POLICIES[name]
    ours, theirs = returns_jax(jax_policy, 500, seed=1), returns_gym(gym_policy, 500, seed=2)
    test = stats.ks_2samp(ours, theirs)
    assert test.pvalue > 0.01, (test, ours.mean(), theirs.mean())
    standard_error = np.sqrt(ours.var() / len(ours) + theirs.var() / len(theirs))
    assert abs(ours.mean() - theirs.mean()) < 3 * standard_error, (ours.mean(), theirs.mean())


def test_reset_states_are_uniform_in_the_box() -> None:
    """gymnasium draws all four coordinates from U(-0.05, 0.05); so does the JAX reset (each
    coordinate of 2,000 resets checked against that distribution), with a zero step count."""
    states, obs = jax.jit(jax.vmap(ENV.reset))(jax.random.split(jax.random.PRNGKey(3), 2000))
    obs = np.asarray(obs)
    assert obs.dtype == np.float32 and obs.shape == (2000, 4) and np.abs(obs).max() <= RESET_BOUND
    assert not np.asarray(states.steps).any()
    for coordinate in obs.T:
        assert stats.kstest(coordinate, stats.uniform(-RESET_BOUND, 2 * RESET_BOUND).cdf).pvalue > 0.01
