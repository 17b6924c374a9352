"""MinAtar Breakout in pure JAX: the package's ``MinAtar/Breakout-v1`` as functions that jit, vmap and scan.

Why it exists: the package's main experiment trains DQNs on MinAtar (Young & Tian 2019, "MinAtar:
An Atari-Inspired Testbed for Thorough and Reproducible Reinforcement Learning Experiments",
arXiv:1903.03176), and its Python loop pays a host round trip per env step. Written in JAX, the
env lets the whole loop be one compiled program (:mod:`offline_gitd.online.compiled`), as
:mod:`~offline_gitd.envs.jax_cartpole` does for CartPole. It is only worth having if it is the same
MDP, so it follows ``minatar`` 1.0.15 (``environments/breakout.py``, ``environment.py`` and
``gym.py``) as the package builds ``MinAtar/Breakout-v1`` (:func:`offline_gitd.envs.make.make_env`),
rule for rule, and adds nothing:

* actions: the ``-v1`` id's minimal action set, 0 no-op, 1 left, 2 right (MinAtar's full-set
  actions 0, 1 and 3; the others do nothing in Breakout);
* sticky actions (``Environment.act``): with probability 0.1 the action taken is the *last action
  taken* (itself possibly a repeat), not the agent's. The last action survives ``reset``: MinAtar
  sets it to no-op when the env is built and never again, so an episode's first step may repeat the
  previous episode's last action. :meth:`Breakout.reset` is a freshly built env;
  :meth:`Breakout.next_episode` starts a later episode of the same env;
* the start: ball in row 3, at column 0 moving down-right or at column 9 moving down-left (a fair
  coin), paddle in column 4 of row 9, bricks filling rows 1-3, no trail;
* a step: the paddle moves one column (clamped to the board), then the ball moves one cell
  diagonally, and the new cell is resolved in this order:

  - past the left or right wall: the column is clamped and the horizontal direction reversed;
  - then (the direction now the one after the wall) past the top: row 0, vertical direction
    reversed; otherwise on a brick: if the previous step did not strike a brick, the brick goes
    (reward 1), the ball stays in its old row and its vertical direction reverses; if it did (two
    bricks in a row), the ball moves onto the brick and leaves it standing; otherwise in the
    bottom row: first, if no brick is left, rows 1-3 are filled again; then if the paddle (after
    its move) is under the ball's *old* column, the ball stays in its old row with the vertical
    direction reversed; else if it is under the *new* column, the same but both directions
    reversed; else the ball is lost (termination, the ball drawn in the bottom row);
  - "struck a brick" is remembered for the next step only when the new cell held a brick;

* the observation: ``bool`` 10x10x4 boards, channels paddle, ball, trail (the ball's previous
  cell), brick, given to the network as uint8 0/1 (:class:`~offline_gitd.envs.images.Uint8Images`);
* no time limit of MinAtar's own: the package caps every MinAtar episode at 10,000 steps (the
  ``minatar`` domain's ``horizon``), through gymnasium's ``TimeLimit``, so ``truncated`` is true on
  the 10,000th step (with ``terminated`` too if the ball was lost on that very step);
* stepping a terminated game changes nothing and pays nothing (MinAtar's ``act`` returns at once),
  though the sticky-action draw and the step count still happen, as they do in Python.

Randomness lives in the state: ``step`` takes no key (the :class:`~offline_gitd.online.compiled.JaxEnv`
protocol), so the state carries one, split once per step for the sticky-action draw. The game is
integer and boolean arithmetic throughout, so from the same state and actions it is MinAtar's game
to the bit; only the random streams differ (JAX keys, not numpy's ``RandomState``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

SIZE = 10
CHANNELS = ("paddle", "ball", "trail", "brick")
OBS_SHAPE = (SIZE, SIZE, len(CHANNELS))
NUM_ACTIONS = 3  # the minimal action set of MinAtar/Breakout-v1
NOOP, LEFT, RIGHT = 0, 1, 2
MINATAR_ACTIONS = (0, 1, 3)  # each minimal action's index in MinAtar's full set n, l, u, r, d, f
STICKY_ACTION_PROB = 0.1  # MinAtar's default, which MinAtar/Breakout-v1 keeps
MAX_EPISODE_STEPS = 10_000  # the package's cap on a MinAtar episode (the minatar domain's horizon)
BRICK_ROWS = (1, 4)  # rows 1, 2, 3
START_ROW, START_PADDLE = 3, 4

# Ball directions 0 up-left, 1 up-right, 2 down-right, 3 down-left: each one's step and reflections
# (tuples, made arrays where they are used, so that importing the module starts no JAX backend).
DX = (-1, 1, 1, -1)
DY = (-1, -1, 1, 1)
FLIP_X = (1, 0, 3, 2)  # off a side wall
FLIP_Y = (3, 2, 1, 0)  # off the top, a brick or the paddle's middle
FLIP_XY = (2, 3, 0, 1)  # off the paddle's corner: straight back


def turn(table: tuple[int, ...], direction: jax.Array) -> jax.Array:
    """``table[direction]`` for a traced direction."""
    return jnp.asarray(table, jnp.int32)[direction]


class BreakoutState(NamedTuple):
    """The game MinAtar's ``breakout.Env`` keeps, MinAtar's last action, the step count of the
    package's time limit, and the key of the next sticky-action draw (int32 scalars unless said)."""

    ball_x: jax.Array  # column
    ball_y: jax.Array  # row, 0 at the top
    ball_dir: jax.Array  # 0 up-left, 1 up-right, 2 down-right, 3 down-left
    pos: jax.Array  # the paddle's column (it lives in row 9)
    last_x: jax.Array  # the ball's cell before the last step: the trail
    last_y: jax.Array
    bricks: jax.Array  # bool [10, 10]
    strike: jax.Array  # bool: the last step's new cell held a brick
    terminal: jax.Array  # bool: the ball was lost
    last_action: jax.Array  # the last action taken, a minimal-set index (sticky actions repeat it)
    steps: jax.Array  # steps taken in this episode
    key: jax.Array  # PRNG key for the next step's sticky-action draw


def start_bricks() -> jax.Array:
    """Rows 1-3 full: the start, and the refill once every brick is gone."""
    rows = jnp.arange(SIZE)[:, None]
    return jnp.broadcast_to((rows >= BRICK_ROWS[0]) & (rows < BRICK_ROWS[1]), (SIZE, SIZE))


def observe(state: BreakoutState) -> jax.Array:
    """MinAtar's ``state()`` as the package hands it to the network: uint8 [10, 10, 4] 0/1,
    channels paddle (row 9), ball, trail, brick."""
    rows, cols = jnp.arange(SIZE)[:, None], jnp.arange(SIZE)[None, :]
    paddle = (rows == SIZE - 1) & (cols == state.pos)
    ball = (rows == state.ball_y) & (cols == state.ball_x)
    trail = (rows == state.last_y) & (cols == state.last_x)
    return jnp.stack([paddle, ball, trail, state.bricks], axis=-1).astype(jnp.uint8)


def game_step(state: BreakoutState, action: jax.Array) -> tuple[BreakoutState, jax.Array]:
    """One step of the game with the action actually taken (sticky actions already resolved):
    the rules in the module docstring, in MinAtar's order. Returns the new state and the reward;
    a terminated game is returned unchanged with reward 0. ``last_action``, ``steps`` and ``key``
    are left to :meth:`Breakout.step`."""
    pos = jnp.clip(state.pos + jnp.where(action == LEFT, -1, 0) + jnp.where(action == RIGHT, 1, 0), 0, SIZE - 1)
    old_x, old_y, direction = state.ball_x, state.ball_y, state.ball_dir
    new_x, new_y = old_x + turn(DX, direction), old_y + turn(DY, direction)

    off_side = (new_x < 0) | (new_x > SIZE - 1)
    new_x = jnp.clip(new_x, 0, SIZE - 1)
    direction = jnp.where(off_side, turn(FLIP_X, direction), direction)

    # The three cases of the new row, exclusive, in MinAtar's order: top, brick, bottom row.
    off_top = new_y < 0
    row = jnp.clip(new_y, 0, SIZE - 1)  # a safe index; only the brick case reads it
    on_brick = ~off_top & state.bricks[row, new_x]
    breaks = on_brick & ~state.strike
    at_bottom = ~off_top & ~on_brick & (new_y == SIZE - 1)

    bricks = state.bricks.at[row, new_x].set(state.bricks[row, new_x] & ~breaks)
    bricks = jnp.where(at_bottom & ~bricks.any(), start_bricks(), bricks)
    middle = at_bottom & (old_x == pos)  # the paddle under the ball's old column
    corner = at_bottom & ~middle & (new_x == pos)  # under its new column only
    lost = at_bottom & ~middle & ~corner

    direction = jnp.where(off_top | breaks | middle, turn(FLIP_Y, direction), direction)
    direction = jnp.where(corner, turn(FLIP_XY, direction), direction)
    new_y = jnp.where(off_top, 0, jnp.where(breaks | middle | corner, old_y, new_y))

    moved = state._replace(
        ball_x=new_x,
        ball_y=new_y,
        ball_dir=direction,
        pos=pos,
        last_x=old_x,
        last_y=old_y,
        bricks=bricks,
        strike=on_brick,
        terminal=lost,
    )
    done = state.terminal
    new_state = jax.tree.map(lambda old, new: jnp.where(done, old, new), state, moved)
    return new_state, jnp.where(done, 0.0, breaks.astype(jnp.float32))


def start(key: jax.Array, last_action: jax.Array) -> tuple[BreakoutState, jax.Array]:
    """MinAtar's ``reset``: a fair coin puts the ball at column 0 moving down-right or at column 9
    moving down-left, in row 3; the paddle in column 4, rows 1-3 of bricks, no strike; the sticky
    actions' memory is ``last_action``."""
    start_key, key = jax.random.split(key)
    right = jax.random.bernoulli(start_key)
    ball_x = jnp.where(right, SIZE - 1, 0).astype(jnp.int32)
    row, false = jnp.full((), START_ROW, jnp.int32), jnp.zeros((), bool)
    state = BreakoutState(
        ball_x=ball_x,
        ball_y=row,
        ball_dir=jnp.where(right, 3, 2).astype(jnp.int32),
        pos=jnp.full((), START_PADDLE, jnp.int32),
        last_x=ball_x,
        last_y=row,
        bricks=start_bricks(),
        strike=false,
        terminal=false,
        last_action=jnp.asarray(last_action, jnp.int32),
        steps=jnp.zeros((), jnp.int32),
        key=key,
    )
    return state, observe(state)


@dataclass(frozen=True)
class Breakout:
    """``MinAtar/Breakout-v1`` as the package makes it: minimal actions, sticky actions, a
    ``max_episode_steps`` time limit (10,000, the package's MinAtar cap).

    Functional: ``reset(key) -> (state, obs)`` (a freshly built env's first episode),
    ``next_episode(state, key) -> (state, obs)`` (a later episode of the env left in ``state``:
    only the sticky actions' memory carries over) and ``step(state, action) -> (state, obs,
    reward, terminated, truncated)``; all pure, so they jit, vmap and scan. ``sticky_action_prob``
    is MinAtar's constructor argument (0 makes the game deterministic given the actions).
    """

    max_episode_steps: int = MAX_EPISODE_STEPS
    sticky_action_prob: float = STICKY_ACTION_PROB
    env_id: str = "MinAtar/Breakout-v1"
    num_actions: int = NUM_ACTIONS
    obs_shape: tuple[int, int, int] = OBS_SHAPE

    def next_episode(self, state: BreakoutState, key: jax.Array) -> tuple[BreakoutState, jax.Array]:
        """A later episode of the env left in ``state``: MinAtar's ``reset``, which keeps the last
        action taken (the env does not forget it between episodes)."""
        return start(key, state.last_action)

    def reset(self, key: jax.Array) -> tuple[BreakoutState, jax.Array]:
        """The first episode of a freshly built env, whose last action is MinAtar's initial no-op."""
        return start(key, jnp.asarray(NOOP, jnp.int32))

    def step(
        self, state: BreakoutState, action: jax.Array
    ) -> tuple[BreakoutState, jax.Array, jax.Array, jax.Array, jax.Array]:
        """One env step of ``action`` (a minimal-set index): the sticky-action draw, then the game.
        The action taken (the agent's or the repeated one) becomes the last action."""
        key, sticky_key = jax.random.split(state.key)
        sticky = jax.random.uniform(sticky_key) < self.sticky_action_prob
        action = jnp.where(sticky, state.last_action, jnp.asarray(action, jnp.int32))
        state, reward = game_step(state, action)
        state = state._replace(last_action=action, steps=state.steps + 1, key=key)
        truncated = state.steps >= self.max_episode_steps
        return state, observe(state), reward, state.terminal, truncated
