"""The JAX Breakout (pgx-minatar's game behind :class:`offline_gitd.envs.jax_minatar.MinAtar`) is the
package's MinAtar/Breakout-v1: step by step from the same game state, in the distribution of a
policy's returns and lengths, in its sticky actions and in its time limit. These checks were written
for the package's own JAX Breakout, which the library's game replaced: they now check the library."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from offline_gitd.config.paper import ONLINE_DEFAULTS
from offline_gitd.envs.jax_minatar import GAMES, MAX_EPISODE_STEPS, STICKY_ACTION_PROB, MinAtar
from offline_gitd.envs.jax_minatar import MinAtarState as BreakoutState
from offline_gitd.envs.make import make_env
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.env_info import make_online_env
from offline_gitd.online.train import resolve_config

ENV_ID = "MinAtar/Breakout-v1"
MINATAR_ACTIONS = GAMES[ENV_ID].minimal_actions  # each minimal action's index in MinAtar's full set
NUM_ACTIONS = len(MINATAR_ACTIONS)
ENV = MinAtar(ENV_ID)
DETERMINISTIC = MinAtar(ENV_ID, sticky_action_prob=0.0)
STEP = jax.jit(DETERMINISTIC.step)
TO_MINIMAL = jnp.asarray([MINATAR_ACTIONS.index(a) if a in MINATAR_ACTIONS else -1 for a in range(6)], jnp.int32)


def last_action(state: BreakoutState) -> jax.Array:
    """The sticky actions' memory as a minimal-set index (pgx keeps MinAtar's full-set index)."""
    return TO_MINIMAL[state.game._last_action]


# Ball directions 0 up-left, 1 up-right, 2 down-right, 3 down-left, as MinAtar numbers them.
DX, DY = (-1, 1, 1, -1), (-1, -1, 1, 1)


def package_env(tmp_path: Any, seed: int) -> gym.Env:
    """MinAtar/Breakout-v1 as the package's online loop makes it: its resolved config (the minatar
    domain's 10,000-step horizon) through ``make_online_env``."""
    cfg, info = resolve_config(OnlineConfig(algo="dqn", env=ENV_ID, critic="td", out=str(tmp_path / "run")))
    return make_online_env(cfg, info, seed)


def game_of(env: gym.Env) -> Any:
    """MinAtar's ``breakout.Env`` inside the package's gymnasium env."""
    return env.unwrapped.game.env


# ----------------------------------------------------------------------------- (a) the rules


def random_game(rng: np.random.Generator) -> dict[str, Any]:
    """A game state for both envs: the ball anywhere above the paddle row, any direction, the
    paddle anywhere, either strike flag, and bricks that make every rule likely: the game's rows
    with holes, the last few bricks of a wall (so the rows soon refill), or bricks scattered over
    the whole field (the ball then meets bricks from every side)."""
    bricks = np.zeros((10, 10))  # MinAtar's brick map is float
    kind = rng.integers(3)
    if kind == 0:
        bricks[1:4] = rng.random((3, 10)) < rng.random()
    elif kind == 1:
        bricks[1:4].flat[rng.choice(30, size=rng.integers(0, 3), replace=False)] = 1
    else:
        bricks[:9] = rng.random((9, 10)) < 0.3
    return dict(
        ball_x=int(rng.integers(10)),
        ball_y=int(rng.integers(9)),
        ball_dir=int(rng.integers(4)),
        pos=int(rng.integers(10)),
        last_x=int(rng.integers(10)),
        last_y=int(rng.integers(9)),
        brick_map=bricks,
        strike=bool(rng.integers(2)),
        terminal=False,
    )


@cache
def reset_state() -> BreakoutState:
    """The JAX env's reset state, made once: it is the same on every call (a fixed key; JAX arrays
    are immutable, so the starts can share it), and run eagerly a reset takes ~0.1 s, a minute
    over the 600 starts of the step-by-step test."""
    return DETERMINISTIC.reset(jax.random.PRNGKey(0))[0]


def jax_state(game: dict[str, Any]) -> BreakoutState:
    """The JAX env's state holding the same game (no sticky memory, no steps taken)."""
    scalar = {f"_{name}": jnp.int32(game[name]) for name in ("ball_x", "ball_y", "ball_dir", "pos", "last_x", "last_y")}
    start = reset_state()
    pgx_state = start.game.replace(
        **scalar,
        _brick_map=jnp.asarray(game["brick_map"] == 1),
        _strike=jnp.bool_(game["strike"]),
        _terminal=jnp.bool_(game["terminal"]),
        terminated=jnp.bool_(game["terminal"]),
        _last_action=jnp.int32(0),
    )
    return start._replace(game=pgx_state)


def cases(game: Any, action: int) -> set[str]:
    """The rules one MinAtar step is about to apply, read off its game before the step (for
    counting only: the envs' outputs are what is compared)."""
    pos = min(9, max(0, game.pos + (action == 2) - (action == 1)))
    x, y = game.ball_x + DX[game.ball_dir], game.ball_y + DY[game.ball_dir]
    side = not 0 <= x <= 9
    x = min(9, max(0, x))
    found = {"side wall"} if side else set()
    if y < 0:
        found.add("top corner" if side else "top")
    elif game.brick_map[y, x] == 1:
        found.add("brick after a strike (passes)" if game.strike else "brick")
        found |= {"side wall, then brick"} if side else set()
    elif y == 9:
        found |= {"refill"} if not game.brick_map.any() else set()
        if game.ball_x == pos:
            found.add("paddle under the old column")
        elif x == pos:
            found.add("paddle under the new column only")
        else:
            found.add("lost")
        found |= {"side wall, then paddle row"} if side else set()
    return found


CASES = (
    "side wall",
    "top",
    "top corner",
    "brick",
    "brick after a strike (passes)",
    "side wall, then brick",
    "refill",
    "paddle under the old column",
    "paddle under the new column only",
    "lost",
    "side wall, then paddle row",
)


@jax.jit
def rollouts(states: BreakoutState, actions: jax.Array) -> tuple[jax.Array, ...]:
    """Each start's observations, rewards, terminated and truncated flags under its actions
    ([starts, steps] arrays), the game without sticky actions."""

    def body(state: BreakoutState, action: jax.Array):
        state, obs, reward, terminated, truncated = DETERMINISTIC.step(state, action)
        return state, (obs, reward, terminated, truncated)

    return jax.vmap(lambda state, actions: jax.lax.scan(body, state, actions)[1])(states, actions)


def test_from_the_same_game_the_same_actions_give_minatars_steps() -> None:
    """600 random games, 100 steps each, in the package's env with sticky actions off and in the
    JAX env without them: every observation (uint8, all four channels), reward, terminated and
    truncated flag the same, the steps after the ball is lost (nothing moves, nothing pays)
    included. The actions are random, half of them toward the ball so that games last (~25 steps
    on average before the ball is lost); every rule of the step is met, each at least 30 times
    (counted: the rarest, the paddle under the ball's new column only, ~50 times)."""
    rng = np.random.default_rng(0)
    env = make_env(ENV_ID, 0, sticky_action_prob=0.0)
    game = game_of(env)
    starts, all_actions, theirs, seen = [], [], [], Counter()
    for _ in range(600):
        start = random_game(rng)
        for name, value in start.items():
            setattr(game, name, value.copy() if isinstance(value, np.ndarray) else value)
        starts.append(jax_state(start))
        actions, outputs = [], []
        for _ in range(100):
            toward = 0 if game.ball_x == game.pos else 1 if game.ball_x < game.pos else 2
            action = toward if rng.random() < 0.5 else int(rng.integers(NUM_ACTIONS))
            if not game.terminal:
                seen.update(cases(game, action))
            obs, reward, terminated, truncated, _ = env.step(action)
            actions.append(action)
            outputs.append((obs, reward, terminated, truncated))
        all_actions.append(actions)
        theirs.append([np.stack(column) for column in zip(*outputs)])
    states = jax.tree.map(lambda *xs: jnp.stack(xs), *starts)
    ours = jax.device_get(rollouts(states, jnp.asarray(all_actions, jnp.int32)))
    for i, (their, start) in enumerate(zip(theirs, starts)):
        obs, reward, terminated, truncated = (np.asarray(x[i]) for x in ours)
        assert obs.dtype == their[0].dtype == np.uint8 and obs.shape == their[0].shape == (100, 10, 10, 4)
        bad = np.flatnonzero((obs != their[0]).any(axis=(1, 2, 3)) | (reward != their[1]))
        assert not bad.size, f"game {i} ({start}) differs from step {bad[:1] + 1}"
        np.testing.assert_array_equal(terminated, their[2], err_msg=f"game {i}")
        np.testing.assert_array_equal(truncated, their[3], err_msg=f"game {i}")
    assert all(seen[case] >= 30 for case in CASES), seen


def test_a_reset_is_minatars_start() -> None:
    """The JAX reset's board is one of MinAtar's two starts (the ball in row 3 at column 0 moving
    down-right, or at column 9 moving down-left), each half the time in 2,000 resets; stepped with
    no-ops from it, both envs play the same game."""
    env = make_env(ENV_ID, 0, sticky_action_prob=0.0)
    boards, seeds = {}, {}
    for seed in range(20):
        obs, _ = env.reset(seed=seed)
        boards[game_of(env).ball_x], seeds[game_of(env).ball_x] = obs, seed
    assert sorted(boards) == [0, 9]
    states, obs = jax.jit(jax.vmap(DETERMINISTIC.reset))(jax.random.split(jax.random.PRNGKey(4), 2000))
    obs, column = np.asarray(obs), np.asarray(states.game._ball_x)
    assert set(column.tolist()) == {0, 9}
    for start in (0, 9):
        np.testing.assert_array_equal(obs[column == start], np.broadcast_to(boards[start], obs[column == start].shape))
    assert stats.binomtest(int((column == 9).sum()), 2000).pvalue > 0.001
    for start in (0, 9):
        env.reset(seed=seeds[start])
        state = jax.tree.map(lambda x: x[np.flatnonzero(column == start)[0]], states)
        for _ in range(12):
            theirs = env.step(0)
            state, *ours = STEP(state, 0)
            np.testing.assert_array_equal(ours[0], theirs[0])
            assert (float(ours[1]), bool(ours[2])) == (theirs[1], theirs[2])


# ------------------------------------------------------------ (b) returns and lengths, sticky on


def ball_and_paddle(obs: Any, xp: Any) -> tuple[Any, Any]:
    """The ball's column (channel 1) and the paddle's (channel 0, bottom row) of one board."""
    return xp.argmax(obs[:, :, 1].max(axis=0)), xp.argmax(obs[9, :, 0])


def toward_the_ball(obs: Any, xp: Any) -> Any:
    """Move the paddle one column toward the ball's column, stay under it."""
    ball, paddle = ball_and_paddle(obs, xp)
    return xp.where(ball == paddle, 0, xp.where(ball < paddle, 1, 2))


# Each policy as the JAX env and the package's env see it: (obs, key) -> action and (obs, rng) ->
# action. Uniform random play mostly loses the first ball (~10 steps, at most a brick or two);
# following the ball keeps it in play for ~120 steps and ~10 bricks, lost through sticky actions
# and the paddle's corner bounces, so its returns move with every rule of the game.
POLICIES: dict[str, tuple[Callable[..., Any], Callable[..., int]]] = {
    "uniform-random": (
        lambda obs, key: jax.random.randint(key, (), 0, NUM_ACTIONS),
        lambda obs, rng: int(rng.integers(NUM_ACTIONS)),
    ),
    "toward-the-ball": (
        lambda obs, key: toward_the_ball(obs, jnp),
        lambda obs, rng: int(toward_the_ball(obs, np)),
    ),
}


def episodes_jax(policy: Callable[..., Any], lanes: int, per_lane: int, seed: int) -> np.ndarray:
    """(return, length) of ``per_lane`` consecutive episodes in each of ``lanes`` envs, each
    env's later episodes started with ``next_episode`` as the compiled loop starts them (the
    sticky memory carried over, as one Python env carries it): [lanes * per_lane, 2]."""

    def lane(key: jax.Array) -> jax.Array:
        reset_key, key = jax.random.split(key)
        state, obs = ENV.reset(reset_key)
        done_so_far = jnp.zeros((per_lane, 2), jnp.float32)

        def more(carry: tuple) -> jax.Array:
            return carry[3] < per_lane

        def body(carry: tuple) -> tuple:
            state, obs, key, episode, total, length, table = carry
            key, act_key, reset_key = jax.random.split(key, 3)
            state, obs, reward, terminated, truncated = ENV.step(state, policy(obs, act_key))
            total, length, done = total + reward, length + 1, terminated | truncated
            table = jnp.where(done, table.at[episode].set(jnp.stack([total, length.astype(jnp.float32)])), table)
            fresh_state, fresh_obs = ENV.next_episode(state, reset_key)
            state = jax.tree.map(lambda new, old: jnp.where(done, new, old), fresh_state, state)
            obs = jnp.where(done, fresh_obs, obs)
            zero = jnp.zeros_like
            return (
                state,
                obs,
                key,
                episode + done,
                jnp.where(done, zero(total), total),
                jnp.where(done, zero(length), length),
                table,
            )

        carry = (state, obs, key, jnp.int32(0), jnp.float32(0), jnp.int32(0), done_so_far)
        return jax.lax.while_loop(more, body, carry)[-1]

    keys = jax.random.split(jax.random.PRNGKey(seed), lanes)
    return np.asarray(jax.jit(jax.vmap(lane))(keys)).reshape(-1, 2)


def episodes_package(policy: Callable[..., int], tmp_path: Any, episodes: int, seed: int) -> np.ndarray:
    """(return, length) of ``episodes`` consecutive episodes of one package env: [episodes, 2]."""
    env, rng, rows = package_env(tmp_path, seed), np.random.default_rng(seed), []
    for _ in range(episodes):
        obs, _ = env.reset()
        total, length, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs, rng))
            total, length, done = total + reward, length + 1, terminated or truncated
        rows.append((total, length))
    return np.asarray(rows, np.float32)


@pytest.mark.parametrize("name", POLICIES)
def test_a_policys_returns_and_lengths_have_the_package_envs_distribution(name: str, tmp_path: Any) -> None:
    """400 episodes of the same policy in each env, sticky actions on in both, independent draws:
    two-sample Kolmogorov-Smirnov tests do not tell the returns or the lengths apart (p > 0.01)
    and their means agree within three standard errors."""
    jax_policy, package_policy = POLICIES[name]
    ours, theirs = episodes_jax(jax_policy, 40, 10, seed=1), episodes_package(package_policy, tmp_path, 400, seed=2)
    for column, what in enumerate(("return", "length")):
        a, b = ours[:, column], theirs[:, column]
        test = stats.ks_2samp(a, b)
        assert test.pvalue > 0.01, (what, test, a.mean(), b.mean())
        standard_error = np.sqrt(a.var() / len(a) + b.var() / len(b))
        assert abs(a.mean() - b.mean()) < 3 * standard_error, (what, a.mean(), b.mean())


# -------------------------------------------------------------------------- (c) sticky actions


def binomial_bounds(n: int, p: float) -> tuple[int, int]:
    """Counts outside which a Binomial(n, p) falls with probability below 1e-4 on each side."""
    return int(stats.binom.ppf(1e-4, n, p)), int(stats.binom.isf(1e-4, n, p))


def test_one_step_in_ten_repeats_the_last_action_taken() -> None:
    """The agent always asks for an action other than the last one taken, so a step whose
    action taken is the last one is a sticky step: 0.1 of 40,000 JAX steps (binomial bounds), and
    of 20,000 steps of the package's env (its MinAtar default), each a repeat of the action
    actually taken before it (a repeated repeat included), whatever the game is doing."""

    @jax.jit
    @jax.vmap
    def sticky_steps(key: jax.Array) -> jax.Array:
        state, _ = ENV.reset(key)

        def body(state: BreakoutState, _: None) -> tuple[BreakoutState, jax.Array]:
            # a lost ball starts the next episode, as the loops do (pgx does not step a finished
            # game at all, so its memory would stop changing; the package's env is reset too)
            before = last_action(state)
            state, _, _, terminated, _ = ENV.step(state, (before + 1) % NUM_ACTIONS)
            repeat = last_action(state) == before
            fresh = ENV.next_episode(state, state.key)[0]
            return jax.tree.map(lambda new, old: jnp.where(terminated, new, old), fresh, state), repeat

        return jax.lax.scan(body, state, None, length=1_000)[1]

    repeats = int(np.asarray(sticky_steps(jax.random.split(jax.random.PRNGKey(5), 40))).sum())
    low, high = binomial_bounds(40_000, STICKY_ACTION_PROB)
    assert low <= repeats <= high, (low, repeats, high)

    env = make_env(ENV_ID, 3)
    minimal = {full: index for index, full in enumerate(MINATAR_ACTIONS)}
    repeats = 0
    for _ in range(20_000):
        before = minimal[env.unwrapped.game.last_action]
        _, _, terminated, _, _ = env.step((before + 1) % NUM_ACTIONS)
        repeats += minimal[env.unwrapped.game.last_action] == before
        if terminated:
            env.reset()
    low, high = binomial_bounds(20_000, STICKY_ACTION_PROB)
    assert low <= repeats <= high, (low, repeats, high)


def test_the_last_action_outlives_the_episode_as_in_minatar() -> None:
    """MinAtar's env never forgets its last action: a reset keeps it, so the next episode's first
    step may repeat the previous episode's last action. ``next_episode`` keeps it too; ``reset``
    is a new env, whose last action is the no-op."""
    env = make_env(ENV_ID, 0, sticky_action_prob=0.0)
    env.step(2)
    env.reset()
    assert env.unwrapped.game.last_action == MINATAR_ACTIONS[2]
    state, _ = ENV.reset(jax.random.PRNGKey(0))
    assert int(last_action(state)) == 0
    state = STEP(state, 2)[0]
    fresh, obs = ENV.next_episode(state, jax.random.PRNGKey(1))
    assert int(last_action(fresh)) == 2 and int(fresh.steps) == 0 and not bool(fresh.game.terminated)
    np.testing.assert_array_equal(obs, ENV.reset(jax.random.PRNGKey(1))[1])


# ---------------------------------------------------------------------------- the time limit


def test_the_package_caps_an_episode_at_10_000_steps_as_a_truncation(tmp_path: Any) -> None:
    """The minatar domain's horizon is the JAX env's cap; the package's env and the JAX env, the
    ball kept in play, report truncated on step 10,000 and not before (MinAtar itself never
    truncates); a ball lost on the last step is terminated and truncated at once, as gymnasium's
    TimeLimit reports it."""
    assert ONLINE_DEFAULTS["minatar"]["horizon"] == MAX_EPISODE_STEPS == ENV.max_episode_steps
    env = package_env(tmp_path, 0)
    flags = []
    for _ in range(MAX_EPISODE_STEPS):
        game_of(env).ball_y = 3
        flags.append(env.step(0)[2:4])
    assert flags[-1] == (False, True) and not any(any(pair) for pair in flags[:-1])

    @jax.jit
    def kept_in_play(state: BreakoutState) -> jax.Array:
        def body(state: BreakoutState, _: None):
            state, _, _, terminated, truncated = ENV.step(
                state._replace(game=state.game.replace(_ball_y=jnp.int32(3))), 0
            )
            return state, jnp.stack([terminated, truncated])

        return jax.lax.scan(body, state, None, length=MAX_EPISODE_STEPS)[1]

    flags = np.asarray(kept_in_play(ENV.reset(jax.random.PRNGKey(0))[0]))
    assert flags[:-1].sum() == 0 and flags[-1].tolist() == [False, True]

    # One step from losing the ball (row 8, moving down, the paddle far away) on the last step.
    short = MinAtar(ENV_ID, max_episode_steps=5, sticky_action_prob=0.0)
    state = jax_state(dict(random_game(np.random.default_rng(0)), ball_x=0, ball_y=8, ball_dir=2, pos=9, strike=False))
    state = state._replace(game=state.game.replace(_brick_map=jnp.zeros((10, 10), bool)), steps=jnp.int32(4))
    assert [bool(flag) for flag in short.step(state, 0)[3:]] == [True, True]
