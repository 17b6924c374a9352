"""CartPole-v1 in pure JAX: gymnasium's ``CartPole-v1`` as functions that jit, vmap and scan.

Why it exists: the Python online loop steps a gymnasium env once per env step, a host round trip
each time. An env written in JAX lets the whole loop (acting, env, replay, update) be one compiled
program (:mod:`offline_gitd.online.compiled`), the purejaxrl / gymnax way. It is only worth having
if it is the same MDP, so it copies gymnasium's ``CartPoleEnv`` and its ``CartPole-v1``
registration and nothing else:

* the frictionless cart-pole of Barto, Sutton & Anderson (1983), with gymnasium's equations of
  motion (derived in Florian, "Correct equations for the dynamics of the cart-pole system", 2007)::

      temp   = (F + m_p l theta_dot^2 sin theta) / (m_c + m_p)
      theta_acc = (g sin theta - cos theta temp) / (l (4/3 - m_p cos^2 theta / (m_c + m_p)))
      x_acc  = temp - m_p l theta_acc cos theta / (m_c + m_p)

  with g = 9.8, m_c = 1.0, m_p = 0.1, l = 0.5 (half the pole's length), F = +-10 (action 1
  pushes right, 0 left) and the explicit Euler step of tau = 0.02 s (gymnasium's default
  ``kinematics_integrator = "euler"``: positions move with the old velocities);
* termination when |x| > 2.4 or |theta| > 12 degrees (12 * 2 pi / 360 rad), after the step;
* reward 1 on every step, the terminating one included;
* truncation after 500 steps (``CartPole-v1``'s ``TimeLimit``): ``truncated`` is true on the
  500th step of an episode, with ``terminated`` too if the pole fell on that very step, as
  gymnasium reports it;
* reset to a state drawn uniformly from [-0.05, 0.05]^4.

Why it is not a library's: ``gymnax`` 1.0.1 (the newest release) has CartPole-v1 in JAX, and it
is the same MDP: behind a thin wrapper of this class's interface (gymnax's ``step_env``, which
does not reset, its ``is_truncated`` for the time limit, its state's ``time`` as the step count),
it passes every test of this module (``tests/envs/test_jax_cartpole.py``: the free-running
random episodes, the balanced episode truncated at 500, the returns' distributions, the reset
box) and the compiled loop's CartPole tests. Its one difference is harmless: its reward is
``1 - terminal(previous state)``, 1 on every step the loop takes, since the loop never steps an
ended episode. It is not used because it cannot be installed beside the package: gymnax 1.0.1
requires ``gymnasium>=1.1,<1.4``, the package ``gymnasium>=1.4.0`` (1.4.0 is the tested
version), so pip would replace gymnasium 1.4.0 by 1.3.0, and a resolver given both pins finds no
solution. When a gymnax release admits gymnasium 1.4, this module's body becomes that wrapper and
its tests stay, as checks of the library (docs/online.md#the-compiled-loop).

gymnasium keeps its state in float64 and returns float32 observations; here the state has the
dtype of the reset's draw (float32 unless JAX runs with 64-bit floats), so one step agrees with
gymnasium's to float32 rounding. Trajectories agree as far as the pole's instability lets rounding
differences stay small (the upright pole amplifies them by about e^(4 t), t in seconds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
LENGTH = 0.5  # half the pole's length
POLE_MASS_LENGTH = MASS_POLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02  # seconds between state updates
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
RESET_BOUND = 0.05
MAX_EPISODE_STEPS = 500  # CartPole-v1's TimeLimit
NUM_ACTIONS = 2
OBS_SIZE = 4


class CartPoleState(NamedTuple):
    """The env's whole state: gymnasium's ``(x, x_dot, theta, theta_dot)`` and the step count
    its ``TimeLimit`` wrapper keeps."""

    physics: jax.Array  # [4]: x, x_dot, theta, theta_dot
    steps: jax.Array  # int32: steps taken in this episode


def dynamics(physics: jax.Array, action: jax.Array) -> jax.Array:
    """One Euler step of the cart-pole equations above (gymnasium's ``CartPoleEnv.step``)."""
    x, x_dot, theta, theta_dot = physics[0], physics[1], physics[2], physics[3]
    force = jnp.where(action == 1, FORCE_MAG, -FORCE_MAG).astype(physics.dtype)
    costheta, sintheta = jnp.cos(theta), jnp.sin(theta)
    temp = (force + POLE_MASS_LENGTH * jnp.square(theta_dot) * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (4.0 / 3.0 - MASS_POLE * jnp.square(costheta) / TOTAL_MASS)
    )
    xacc = temp - POLE_MASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    return jnp.stack([x + TAU * x_dot, x_dot + TAU * xacc, theta + TAU * theta_dot, theta_dot + TAU * thetaacc])


def fallen(physics: jax.Array) -> jax.Array:
    """gymnasium's termination: the cart left [-2.4, 2.4] or the pole passed 12 degrees."""
    x, theta = physics[0], physics[2]
    return (x < -X_THRESHOLD) | (x > X_THRESHOLD) | (theta < -THETA_THRESHOLD) | (theta > THETA_THRESHOLD)


@dataclass(frozen=True)
class CartPole:
    """``CartPole-v1`` with a ``max_episode_steps`` time limit (500, as registered).

    Functional: ``reset(key) -> (state, obs)`` (``next_episode(state, key)`` the same) and
    ``step(state, action) -> (state, obs, reward, terminated, truncated)``; all pure, so they jit,
    vmap and scan. Stepping an episode that has ended is the caller's to avoid (the compiled loop
    resets at once), as with gymnasium.
    """

    max_episode_steps: int = MAX_EPISODE_STEPS
    env_id: str = "CartPole-v1"
    num_actions: int = NUM_ACTIONS
    obs_size: int = OBS_SIZE

    def reset(self, key: jax.Array) -> tuple[CartPoleState, jax.Array]:
        physics = jax.random.uniform(key, (OBS_SIZE,), minval=-RESET_BOUND, maxval=RESET_BOUND)
        return CartPoleState(physics, jnp.zeros((), jnp.int32)), physics.astype(jnp.float32)

    def next_episode(self, state: CartPoleState, key: jax.Array) -> tuple[CartPoleState, jax.Array]:
        """The episode after ``state``'s: a plain reset (gymnasium's CartPole keeps nothing across one)."""
        return self.reset(key)

    def step(
        self, state: CartPoleState, action: jax.Array
    ) -> tuple[CartPoleState, jax.Array, jax.Array, jax.Array, jax.Array]:
        physics = dynamics(state.physics, action)
        steps = state.steps + 1
        terminated = fallen(physics)
        truncated = steps >= self.max_episode_steps
        reward = jnp.ones((), jnp.float32)
        return CartPoleState(physics, steps), physics.astype(jnp.float32), reward, terminated, truncated
