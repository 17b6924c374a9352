"""The JAX MinAtar games (pgx-minatar behind :class:`offline_gitd.envs.jax_minatar.MinAtar`) are the
package's ``MinAtar/{Game}-v1``: the same spaces; the same distribution of a policy's returns and
episode lengths, sticky actions on in both; and, fed the same random draws with sticky actions off,
the same game step by step (Breakout's step-by-step check is tests/envs/test_jax_minatar_breakout.py;
the other games' is below)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.envs.carry import FRESH_CARRY, set_env_carry
from offline_gitd.envs.jax_minatar import GAMES, MinAtar, as_minatar, observe
from offline_gitd.envs.make import describe_spaces, make_env
from offline_gitd.online.compiled import JAX_ENVS
from tests.support.episodes import assert_same_episodes


@pytest.mark.parametrize("env_id", GAMES)
def test_the_jax_env_has_the_package_envs_spaces(env_id: str) -> None:
    """Same action count (the -v1 minimal set), same uint8 board shape; the compiled loop's table
    builds the wrapper for every game."""
    spaces = describe_spaces(make_env(env_id, 0))
    env = JAX_ENVS[env_id](None)
    _, obs = env.reset(jax.random.PRNGKey(0))
    assert (env.num_actions, obs.shape, obs.dtype) == (spaces.action_size, spaces.obs_shape, np.uint8)
    assert spaces.obs_dtype == np.uint8


# The policies both envs play: uniform-random minimal actions, and, for Freeway (where random play
# seldom crosses the road, so its returns say little), a fixed policy: "up" (minimal action 1) nine
# steps in ten, a random action otherwise, which crosses ~20 times an episode.
UNIFORM, MOSTLY_UP = 0.0, 0.9


def jax_episodes(env: MinAtar, episodes: int, seed: int, up: float = UNIFORM) -> np.ndarray:
    """(return, length) of ``episodes`` episodes, one per lane, each in a new env, sticky actions on."""

    def lane(key: jax.Array) -> jax.Array:
        reset_key, key = jax.random.split(key)
        state, _ = env.reset(reset_key)

        def body(carry: tuple) -> tuple:
            state, key, total, done, length = carry
            key, act_key, up_key = jax.random.split(key, 3)
            action = jax.random.randint(act_key, (), 0, env.num_actions)
            action = jnp.where(jax.random.uniform(up_key) < up, 1, action)
            state, _, reward, terminated, truncated = env.step(state, action)
            return state, key, total + reward, terminated | truncated, length + 1

        _, _, total, _, length = jax.lax.while_loop(
            lambda c: ~c[3], body, (state, key, jnp.float32(0), jnp.bool_(False), jnp.int32(0))
        )
        return jnp.stack([total, length.astype(jnp.float32)])

    return np.asarray(jax.jit(jax.vmap(lane))(jax.random.split(jax.random.PRNGKey(seed), episodes)))


def package_episodes(env_id: str, episodes: int, seed: int, up: float = UNIFORM) -> np.ndarray:
    """(return, length) of ``episodes`` episodes of the package's gymnasium env, each started as
    in a new env (as the JAX lanes are), sticky actions on."""
    env, rng, rows = make_env(env_id, seed), np.random.default_rng(seed), []
    n = env.action_space.n
    for _ in range(episodes):
        env.reset()
        set_env_carry(env, FRESH_CARRY)  # a new env's sticky memory, as the JAX lanes start
        total, length, done = 0.0, 0, False
        while not done:
            action = 1 if rng.random() < up else int(rng.integers(n))
            _, reward, terminated, truncated, _ = env.step(action)
            total, length, done = total + reward, length + 1, terminated or truncated
        rows.append((total, length))
    return np.asarray(rows, np.float32)


# (policy, JAX episodes, Python episodes, the difference in mean return the Welch test detects with
# power 0.8 at alpha 0.01, at most) per case. Episodes are sized to the game's cost: Freeway's last
# 2,501 steps, pgx's Seaquest is the dearest step. The default run checks one case (DEFAULT_CASE) at
# its stated power; `-m slow` checks the others at theirs, and every case with ten times the Python
# episodes (each case takes 35-65 s on 2 cores, compiling the game and playing ~1,000 episodes).
CASES = {
    "MinAtar/Asterix-v1": (UNIFORM, 1000, 300, 0.25),  # mean return ~0.5
    "MinAtar/Breakout-v1": (UNIFORM, 1000, 300, 0.2),  # ~0.38
    "MinAtar/Freeway-v1": (UNIFORM, 500, 40, 0.45),  # ~0.4
    "MinAtar/Freeway-v1 mostly up": (MOSTLY_UP, 500, 60, 3.0),  # ~27
    "MinAtar/Seaquest-v1": (UNIFORM, 500, 500, 0.1),  # ~0.1
    "MinAtar/SpaceInvaders-v1": (UNIFORM, 1000, 200, 1.0),  # ~4.1
}


DEFAULT_CASE = "MinAtar/Breakout-v1"  # the cheapest: short episodes on both sides


def check_same_distribution(case: str, scale: int = 1) -> None:
    env_id = case.split()[0]
    up, jax_count, python_episodes, detects = CASES[case]
    ours = jax_episodes(MinAtar(env_id), jax_count, seed=1, up=up)
    theirs = package_episodes(env_id, scale * python_episodes, seed=2, up=up)
    assert_same_episodes(case, ours, theirs, detects)


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c == DEFAULT_CASE else pytest.mark.slow) for c in CASES])
def test_a_policys_returns_and_lengths_have_the_package_envs_distribution(case: str) -> None:
    """500-1,000 JAX episodes against 40-500 Python ones per game, sticky actions on, each episode
    in a new env; uniform-random minimal actions, and on Freeway also a fixed policy (up nine steps
    in ten, where random play seldom scores): neither a Welch t-test on the means nor a two-sample
    Kolmogorov-Smirnov test tells the returns or the lengths apart at alpha 0.01.

    Power (asserted from the samples' spreads): the Welch test detects, with power 0.8 at alpha
    0.01, a difference in mean return of 0.25 on Asterix (mean ~0.5), 0.2 on Breakout (~0.38),
    0.45 on Freeway (~0.4) and 3 with the fixed policy (~27), 0.1 on Seaquest (~0.1) and 1.0 on
    Space Invaders (~4.1). The default run checks Breakout; ``-m slow`` checks the other cases and
    plays ten times the Python episodes of every case (about a third of those differences where
    the Python sample's spread dominates)."""
    check_same_distribution(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_with_ten_times_the_python_episodes_the_distributions_still_agree(case: str) -> None:
    check_same_distribution(case, scale=10)


# ------------------------------------------------------------------ step by step, the same draws


class Draws:
    """A stand-in for the numpy ``RandomState`` of a minatar game: it serves the draws a spawn asks
    for from queues the test fills with the draws pgx gets, so both games see the same randomness."""

    def __init__(self) -> None:
        self.rands: list[Any] = []
        self.randints: list[Any] = []

    def rand(self, *shape: int) -> Any:
        return self.rands.pop(0)

    def randint(self, *args: Any, **kwargs: Any) -> Any:
        return self.randints.pop(0)


def coin(flag: Any) -> Any:
    """The ``rand()`` value for which minatar's ``rand() < 1/2`` (or ``< 1/3``) is ``flag``."""
    return np.where(flag, 0.1, 0.9)


class Twin:
    """One game twice: minatar 1.0.15's (no sticky actions) and pgx's deterministic step, fed the
    same draws each step. ``draw(rng)`` picks the step's draws from minatar's game before the step
    (pgx's draws as arguments, minatar's as queued answers of :class:`Draws`)."""

    def __init__(self, env_id: str) -> None:
        import importlib

        from minatar import Environment

        spec = GAMES[env_id]
        self.env_id, self.actions = env_id, spec.minimal_actions
        self.module = importlib.import_module(spec.module)
        self.pgx = MinAtar(env_id, sticky_action_prob=0.0).game
        self.game = Environment(spec.module.removeprefix("pgx_minatar."), sticky_action_prob=0.0).env
        self.random = Draws()
        self.game.random = self.random
        self.step_det = jax.jit(self.module._step_det)
        self.observe = jax.jit(lambda state: observe(env_id, state.replace(observation=self.pgx.observe(state))))
        self.pending: dict[str, Any] = {}
        for name in ("_spawn_entity", "_spawn_enemy", "_spawn_diver", "_randomize_cars"):
            if hasattr(self.game, name):
                setattr(self.game, name, self.labelled(name, getattr(self.game, name)))

    def labelled(self, name: str, original: Any) -> Any:
        """``original`` (a minatar spawn), its draws queued first from the step's pgx draws."""

        def spawn(*args: Any, **kwargs: Any) -> Any:
            d = self.pending
            if name == "_spawn_entity":
                free = [i for i, e in enumerate(self.game.entities) if e is None]
                self.random.rands += [coin(d["lr"]), np.where(d["is_gold"], 0.2, 0.5)]
                self.random.randints += [free.index(int(d["slot"]))] if free else []
            elif name == "_spawn_enemy":
                self.random.rands += [coin(d["enemy_lr"]), np.where(d["is_sub"], 0.2, 0.5)]
                self.random.randints += [int(d["enemy_y"])]
            elif name == "_spawn_diver":
                self.random.rands += [coin(d["diver_lr"])]
                self.random.randints += [int(d["diver_y"])]
            else:  # _randomize_cars
                self.random.randints += [np.array(d["speeds"])]  # a copy: minatar multiplies it in place
                self.random.rands += [np.where(np.asarray(d["directions"]) > 0, 0.75, 0.25)]
            return original(*args, **kwargs)

        return spawn

    def draw(self, rng: np.random.Generator) -> dict[str, Any]:
        if self.env_id == "MinAtar/Asterix-v1":
            free = [i for i, e in enumerate(self.game.entities) if e is None]
            slot = int(rng.choice(free)) if free else 0
            return dict(lr=bool(rng.random() < 0.5), is_gold=bool(rng.random() < 1 / 3), slot=slot)
        if self.env_id == "MinAtar/Seaquest-v1":
            return dict(
                enemy_lr=bool(rng.random() < 0.5),
                is_sub=bool(rng.random() < 1 / 3),
                enemy_y=int(rng.integers(1, 9)),
                diver_lr=bool(rng.random() < 0.5),
                diver_y=int(rng.integers(1, 9)),
            )
        if self.env_id == "MinAtar/Freeway-v1":
            return dict(
                speeds=rng.integers(1, 6, 8).astype(np.int32), directions=rng.choice([-1, 1], 8).astype(np.int32)
            )
        return {}

    def reset(self, rng: np.random.Generator) -> Any:
        self.pending = self.draw(rng)
        self.game.reset()
        if self.env_id == "MinAtar/Freeway-v1":
            state = self.module._init_det(jnp.asarray(self.pending["speeds"]), jnp.asarray(self.pending["directions"]))
        else:
            state = self.pgx.init(jax.random.PRNGKey(0))
        assert not self.random.rands and not self.random.randints
        return state

    def step(self, state: Any, action: int, rng: np.random.Generator) -> tuple[Any, tuple, tuple]:
        """One step of both games; returns pgx's new state, pgx's (obs, reward, terminal) and minatar's."""
        self.pending = self.draw(rng)
        full = self.actions[action]
        reward, terminal = self.game.act(full)
        assert not self.random.rands and not self.random.randints, "minatar asked for fewer draws than it was given"
        draws = {k: jnp.asarray(v) for k, v in self.pending.items()}
        state = as_minatar(self.env_id, state, self.step_det(state, jnp.int32(full), **draws))
        ours = (np.asarray(self.observe(state)), float(state.rewards[0]), bool(state.terminated))
        return state, ours, (self.game.state(), float(reward), bool(terminal))


STEP_GAMES = [g for g in GAMES if g != "MinAtar/Breakout-v1"]  # Breakout's: test_jax_minatar_breakout.py


def play_both(env_id: str, episodes: int, max_steps: int, seed: int) -> dict[str, int]:
    """``episodes`` episodes of random play (half the actions one favourite action, so that the
    player reaches more of the board: Freeway's top, Seaquest's surface), both games compared on
    every step: the board (every channel), the reward and the terminal flag. Returns what was seen."""
    twin, rng = Twin(env_id), np.random.default_rng(seed)
    seen = {"steps": 0, "reward": 0, "terminal": 0}
    n = len(twin.actions)
    for episode in range(episodes):
        state = twin.reset(rng)
        np.testing.assert_array_equal(np.asarray(twin.observe(state)), twin.game.state(), err_msg=f"{env_id} start")
        favourite = int(rng.integers(n))
        for t in range(max_steps):
            action = favourite if rng.random() < 0.5 else int(rng.integers(n))
            state, ours, theirs = twin.step(state, action, rng)
            where = f"{env_id} episode {episode} step {t + 1}"
            np.testing.assert_array_equal(ours[0], theirs[0], err_msg=where)
            assert ours[1:] == theirs[1:], (where, ours[1:], theirs[1:])
            seen["steps"] += 1
            seen["reward"] += ours[1] != 0
            if ours[2]:
                seen["terminal"] += 1
                break
    return seen


@pytest.mark.parametrize("env_id", STEP_GAMES)
def test_with_the_same_draws_pgx_plays_minatars_game_step_by_step(env_id: str) -> None:
    """Sticky actions off, both games fed the same random draws (spawns, car speeds): every board,
    reward and terminal flag agrees over 20 episodes of up to 300 steps (Freeway: 3 whole episodes, its
    time limit ends them on step 2,501); the episodes include rewards and terminations. The
    differences the wrapper fixes are checked here with its fixes: the step on which Seaquest's
    oxygen ends the episode, and that last board (:func:`offline_gitd.envs.jax_minatar.as_minatar`,
    :func:`~offline_gitd.envs.jax_minatar.observe`); without them the test fails."""
    episodes, steps = (3, 2_600) if env_id == "MinAtar/Freeway-v1" else (20, 300)
    seen = play_both(env_id, episodes, steps, seed=0)
    assert seen["reward"] > 0, seen
    assert seen["terminal"] > 0, seen


@pytest.mark.slow
@pytest.mark.parametrize("env_id", STEP_GAMES)
def test_longer_step_by_step_play_agrees_too(env_id: str) -> None:
    episodes, steps = (20, 2_600) if env_id == "MinAtar/Freeway-v1" else (300, 2_000)
    play_both(env_id, episodes, steps, seed=1)
