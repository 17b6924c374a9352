"""A trained policy plays the JAX MinAtar games (pgx-minatar behind
:class:`offline_gitd.envs.jax_minatar.MinAtar`) as it plays the package's ``MinAtar/{Game}-v1``
(``minatar`` 1.0.15): the same distribution of its returns and episode lengths.

Why a trained policy: uniform-random play (tests/envs/test_jax_minatar.py) loses within a few
dozen steps, so it rarely reaches what a learning agent reaches: the later, faster levels of
difficulty ramping, Breakout's second wall of bricks, Seaquest's surfacing and divers, Space
Invaders' second wave. A policy better than random spends its episodes there, so a difference in
those rules shows in its returns.

The policy is fixed and cheap: a DQN trained inside the test with the package's compiled loop
on the JAX game itself (seed 0, ``TRAIN``'s config, 30,000 env steps; the whole test took 5 to 15
minutes a game on a shared 2-core machine), deterministic for a given JAX and XLA. A hand-coded
heuristic would be cheaper but would only cover what its author thought of; the trained network
acts on whatever the board shows.
It then acts epsilon-greedily with its own fixed epsilon (``EPSILON``) in both envs, sticky
actions on in both, each episode in a new env. The test asserts the policy is better than random
(on the JAX game, against uniform-random play), then that a Welch t-test and a two-sample
Kolmogorov-Smirnov test do not tell the two envs' returns or lengths apart at alpha 0.01, and
the power it states (:data:`CASES`), from the samples' own spreads.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from offline_gitd.envs.carry import FRESH_CARRY, set_env_carry
from offline_gitd.envs.jax_minatar import MinAtar
from offline_gitd.envs.make import make_env
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.train import compiled_dqn
from tests.support.episodes import assert_same_episodes

# The DQN (the minatar domain's network and batch, docs/minatar.md) with a schedule shrunk to a
# test's budget: 1,000 random steps, epsilon 1 -> 0.1 over half the run, one update per env step,
# the target every 250 updates, a 20,000-transition replay, Adam at Young & Tian's lr 2.5e-4.
TRAIN = dict(
    algo="dqn",
    critic="td",
    seeds="0",
    initial_samples=1_000,
    epsilon_end=0.1,
    T=250,
    replay_size=20_000,
    lr=2.5e-4,
    utd=1.0,
)
EPSILON = 0.05  # the trained policy's own exploration while it is measured, in both envs

# (env steps of training, JAX episodes, Python episodes, the difference in mean return the Welch
# test detects with power 0.8 at alpha 0.01, at most) per game; the comments give the trained
# policy's mean return, against uniform-random play's.
# Python episodes are sized to the game's cost (Freeway's last 2,501 steps) and to the spread.
CASES = {
    "MinAtar/Asterix-v1": (30_000, 1000, 500, 0.25),  # ~0.7 (random ~0.5)
    "MinAtar/Breakout-v1": (30_000, 1000, 300, 0.8),  # ~5 (random ~0.4)
    "MinAtar/Freeway-v1": (30_000, 1000, 100, 2.0),  # ~8 (random ~0.4)
    "MinAtar/Seaquest-v1": (30_000, 1000, 500, 0.2),  # ~0.4 (random ~0.1)
    "MinAtar/SpaceInvaders-v1": (30_000, 1000, 300, 2.0),  # ~19 (random ~4.1)
}


def train(env_id: str, steps: int, out: str) -> tuple[Any, Any]:
    """The compiled loop's DQN after ``steps`` env steps of seed 0 on the JAX game: its family
    (for ``act``) and its learner state."""
    loop, _ = compiled_dqn(OnlineConfig(env=env_id, steps=steps, epsilon_steps=steps // 2, out=out, **TRAIN))
    carry = loop.init([0])
    chunk = 5_000
    for first in range(0, steps, chunk):
        carry, _ = loop.run_chunk(carry, first, min(chunk, steps - first))
    return loop.family, jax.tree.map(lambda x: x[0], carry.learner)


def jax_episodes(env: MinAtar, act: Any, episodes: int, seed: int, epsilon: float) -> np.ndarray:
    """(return, length) of ``episodes`` episodes, one per lane, each in a new env, sticky actions
    on: ``act(obs)`` with probability 1 - ``epsilon``, a uniformly random action otherwise."""

    def lane(key: jax.Array) -> jax.Array:
        reset_key, key = jax.random.split(key)
        state, obs = env.reset(reset_key)

        def body(carry: tuple) -> tuple:
            state, obs, key, total, done, length = carry
            key, explore_key, random_key = jax.random.split(key, 3)
            random_action = jax.random.randint(random_key, (), 0, env.num_actions)
            action = jnp.where(jax.random.uniform(explore_key) < epsilon, random_action, act(obs))
            state, obs, reward, terminated, truncated = env.step(state, action)
            return state, obs, key, total + reward, terminated | truncated, length + 1

        carry = (state, obs, key, jnp.float32(0), jnp.bool_(False), jnp.int32(0))
        _, _, _, total, _, length = jax.lax.while_loop(lambda c: ~c[4], body, carry)
        return jnp.stack([total, length.astype(jnp.float32)])

    return np.asarray(jax.jit(jax.vmap(lane))(jax.random.split(jax.random.PRNGKey(seed), episodes)))


def package_episodes(env_id: str, act: Any, episodes: int, seed: int, epsilon: float) -> np.ndarray:
    """(return, length) of ``episodes`` episodes of the package's gymnasium env (``minatar``
    1.0.15), each started as in a new env (as the JAX lanes are), sticky actions on, the same
    epsilon-greedy policy."""
    env, rng, rows = make_env(env_id, seed), np.random.default_rng(seed), []
    n = env.action_space.n
    for _ in range(episodes):
        obs, _ = env.reset()
        set_env_carry(env, FRESH_CARRY)  # a new env's sticky memory, as the JAX lanes start
        total, length, done = 0.0, 0, False
        while not done:
            action = int(rng.integers(n)) if rng.random() < epsilon else int(act(obs))
            obs, reward, terminated, truncated, _ = env.step(action)
            total, length, done = total + reward, length + 1, terminated or truncated
        rows.append((total, length))
    return np.asarray(rows, np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", CASES)
def test_a_trained_policys_returns_and_lengths_have_the_package_envs_distribution(env_id: str, tmp_path: Any) -> None:
    """A DQN trained on the JAX game for 30,000 env steps (better than uniform-random play there:
    a one-sided Welch test, p < 0.001), epsilon 0.05, sticky actions on: 1,000 JAX episodes
    against 100-500 Python ones; neither a Welch t-test on the means nor a two-sample
    Kolmogorov-Smirnov test tells the returns or the lengths apart at alpha 0.01.

    Power (asserted from the samples' spreads): the Welch test detects, with power 0.8 at alpha
    0.01, a difference in mean return of 0.25 on Asterix (trained mean ~0.7, random ~0.5), 0.8 on
    Breakout (~5, random ~0.4), 2 on Freeway (~8, random ~0.4), 0.2 on Seaquest (~0.4, random
    ~0.1) and 2 on Space Invaders (~19, random ~4.1)."""
    steps, jax_count, python_count, detects = CASES[env_id]
    family, learner = train(env_id, steps, str(tmp_path / "run"))
    greedy = jax.jit(lambda obs: family.act(learner, obs[None], None)[0])
    env = MinAtar(env_id)

    ours = jax_episodes(env, greedy, jax_count, seed=1, epsilon=EPSILON)
    random_play = jax_episodes(env, greedy, jax_count, seed=3, epsilon=1.0)
    better = stats.ttest_ind(ours[:, 0], random_play[:, 0], equal_var=False, alternative="greater")
    assert better.pvalue < 1e-3, (env_id, ours[:, 0].mean(), random_play[:, 0].mean(), better)

    theirs = package_episodes(env_id, lambda obs: greedy(jnp.asarray(obs)), python_count, seed=2, epsilon=EPSILON)
    assert_same_episodes(env_id, ours, theirs, detects)
