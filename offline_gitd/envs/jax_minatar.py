"""The five MinAtar games in JAX: ``pgx-minatar``'s games as the package builds ``MinAtar/{Game}-v1``.

Why it exists: the package's main experiment trains DQNs on MinAtar (Young & Tian 2019, "MinAtar:
An Atari-Inspired Testbed for Thorough and Reproducible Reinforcement Learning Experiments",
arXiv:1903.03176), and the Python loop pays a host round trip per env step. With the env in JAX the
whole online loop is one compiled program (:mod:`offline_gitd.online.compiled`). The games come from
a maintained library, ``pgx-minatar`` (the MinAtar games of Pgx, Koyamada et al. 2023, "Pgx:
Hardware-Accelerated Parallel Game Simulators for Reinforcement Learning", a port of ``minatar``
under the same GPL-3.0), not from code the package keeps.

What :class:`MinAtar` adds so that the JAX env is the package's ``MinAtar/{Game}-v1``
(:func:`offline_gitd.envs.make.make_env`, ``minatar`` 1.0.15's gymnasium registration) and a run
or a checkpoint moves between the two loops (docs/minatar.md#the-games-in-jax):

* the action space: each ``-v1`` id's *minimal* action set (Asterix 5, Breakout 3, Freeway 3,
  Seaquest 6, Space Invaders 4 actions), as pgx's ``use_minimal_action_set=True`` maps them;
* sticky actions with probability 0.1, repeating the last action *taken*; pgx draws them as
  ``minatar.Environment.act`` does, but its ``init`` forgets the last action while ``minatar``
  keeps it across ``reset`` (it is set to no-op only when the env is built), so
  :meth:`MinAtar.next_episode` carries it into the next episode, as the gymnasium env does
  (docs/online.md#resume); :meth:`MinAtar.reset` is a freshly built env (last action no-op);
* difficulty ramping: on, as in ``minatar``'s default (pgx's games ramp unconditionally);
* the observation: pgx's bool ``[10, 10, C]`` board, whose channels are ``minatar``'s in
  ``minatar``'s order, made uint8 0/1 as the package gives every MinAtar board to the network
  (:class:`~offline_gitd.envs.images.Uint8Images`);
* a checkpoint: Asterix's state holds an unused empty array, which a checkpoint cannot save; the
  wrapper makes it one element (:func:`checkpointable`);
* Seaquest's oxygen: ``minatar`` 1.0.15 ends the episode on the step that starts with the oxygen
  at 0, pgx one step later (:func:`as_minatar`), and on that last board pgx draws a full oxygen
  gauge where ``minatar`` draws an empty one (:func:`observe`); the wrapper does as ``minatar``;
* the time limit: ``minatar`` has none but Freeway's own (2,500 steps, a termination in both); the
  package caps every MinAtar episode at 10,000 steps (the ``minatar`` domain's horizon) through
  gymnasium's ``TimeLimit``, so ``truncated`` is true on the 10,000th step. pgx has no cap: the
  wrapper counts the steps;
* a finished game: pgx does not step it at all, ``minatar`` still updates its last action; no loop
  steps a finished episode (the next step starts a new one), so this is left as it is;
* randomness lives in the state (the :class:`~offline_gitd.online.compiled.JaxEnv` protocol's
  ``step`` takes no key): the state carries a key, split once per step for pgx's draws.

With those fixes pgx's games agree with ``minatar``'s step for step when both get the same random draws
(tests/envs/test_jax_minatar.py drives both from one stream of draws); only the random streams
differ (JAX keys, not numpy's ``RandomState``), so runs agree in distribution, not episode by
episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from importlib import import_module
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

STICKY_ACTION_PROB = 0.1  # minatar's default, which MinAtar/{Game}-v1 keeps
MAX_EPISODE_STEPS = 10_000  # the package's cap on a MinAtar episode (the minatar domain's horizon)
SEAQUEST_OXYGEN = 7  # the oxygen gauge's channel in Seaquest's board


class GameSpec(NamedTuple):
    """One game: its pgx module and class, its minimal action set (indices into MinAtar's full set
    n, l, u, r, d, f) and its board's channels."""

    module: str
    cls: str
    minimal_actions: tuple[int, ...]
    channels: int


# minatar 1.0.15's Env.minimal_action_set() of each game (its -v1 action space) and state_shape().
GAMES: dict[str, GameSpec] = {
    "MinAtar/Asterix-v1": GameSpec("pgx_minatar.asterix", "MinAtarAsterix", (0, 1, 2, 3, 4), 4),
    "MinAtar/Breakout-v1": GameSpec("pgx_minatar.breakout", "MinAtarBreakout", (0, 1, 3), 4),
    "MinAtar/Freeway-v1": GameSpec("pgx_minatar.freeway", "MinAtarFreeway", (0, 2, 4), 7),
    "MinAtar/Seaquest-v1": GameSpec("pgx_minatar.seaquest", "MinAtarSeaquest", (0, 1, 2, 3, 4, 5), 10),
    "MinAtar/SpaceInvaders-v1": GameSpec("pgx_minatar.space_invaders", "MinAtarSpaceInvaders", (0, 1, 3, 5), 6),
}


class MinAtarState(NamedTuple):
    """pgx's game state (its ``_last_action`` is the sticky actions' memory, a full-set index), the
    step count of the package's time limit, and the key of the next step's draws."""

    game: Any  # the pgx State of the game
    steps: jax.Array  # int32: steps taken in this episode
    key: jax.Array  # PRNG key for the next step's draws


def pgx_game(env_id: str, sticky_action_prob: float = STICKY_ACTION_PROB) -> Any:
    """pgx's env of ``env_id`` with the minimal action set and ``sticky_action_prob``."""
    spec = GAMES[env_id]
    cls = getattr(import_module(spec.module), spec.cls)
    return cls(use_minimal_action_set=True, sticky_action_prob=sticky_action_prob)


def observe(env_id: str, game: Any) -> jax.Array:
    """The board of pgx's ``game`` as the package's ``env_id`` shows it: uint8 0/1 ``[10, 10, C]``.

    One fix: on the step Seaquest's oxygen runs out (oxygen -1, the episode's last board) pgx draws
    a full oxygen gauge (9 cells), as ``minatar`` did before it clamped the gauge at 0; ``minatar``
    1.0.15 draws an empty one (``max(0, oxygen)``), so the gauge row is cleared here."""
    obs = game.observation
    if env_id == "MinAtar/Seaquest-v1":
        obs = obs.at[9, :, SEAQUEST_OXYGEN].set(obs[9, :, SEAQUEST_OXYGEN] & (game._oxygen >= 0))
    return obs.astype(jnp.uint8)


def as_minatar(env_id: str, before: Any, after: Any) -> Any:
    """pgx's state ``after`` one step from ``before``, with the step's end as ``minatar`` 1.0.15
    decides it.

    One fix: Seaquest ends the step that starts with the oxygen at 0 in ``minatar`` (``if oxygen
    <= 0: terminal``, checked before the oxygen drops), while pgx ends it only once the oxygen is
    below 0 (``oxygen < 0``), one step later: that extra step is played in pgx, and it can pay.
    Here the step that starts at 0 is terminal, as in ``minatar``; the rest of the step (its moves,
    its reward) is the same in both."""
    if env_id != "MinAtar/Seaquest-v1":
        return after
    out_of_oxygen = ~before.terminated & (before._oxygen <= 0)
    return after.replace(terminated=after.terminated | out_of_oxygen, _terminal=after._terminal | out_of_oxygen)


def checkpointable(game: Any) -> Any:
    """pgx's ``game`` state with every zero-size field (Asterix's unused ``_shot_timer``, shape
    ``(0,)``) made one element: a run's checkpoint holds the env state, and the checkpoint library
    cannot save an empty array. No game reads such a field, so its value changes nothing."""
    empty = {
        f.name: jnp.zeros((1,), getattr(game, f.name).dtype) for f in fields(game) if getattr(game, f.name).size == 0
    }
    return game.replace(**empty) if empty else game


@dataclass(frozen=True)
class MinAtar:
    """``MinAtar/{Game}-v1`` as the package makes it, as pure functions (jit, vmap, scan).

    ``reset(key) -> (state, obs)`` (a freshly built env's first episode), ``next_episode(state,
    key) -> (state, obs)`` (a later episode of the env left in ``state``: only the sticky actions'
    memory carries over) and ``step(state, action) -> (state, obs, reward, terminated,
    truncated)``, ``action`` a minimal-set index. ``sticky_action_prob`` is minatar's constructor
    argument (0 makes the game deterministic given the actions and pgx's draws).
    """

    env_id: str
    max_episode_steps: int = MAX_EPISODE_STEPS
    sticky_action_prob: float = STICKY_ACTION_PROB
    game: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.env_id not in GAMES:
            raise ValueError(f"no JAX MinAtar game {self.env_id!r}; known: {', '.join(GAMES)}")
        object.__setattr__(self, "game", pgx_game(self.env_id, self.sticky_action_prob))

    @property
    def num_actions(self) -> int:
        return len(GAMES[self.env_id].minimal_actions)

    @property
    def obs_shape(self) -> tuple[int, int, int]:
        return (10, 10, GAMES[self.env_id].channels)

    def start(self, key: jax.Array, last_action: jax.Array) -> tuple[MinAtarState, jax.Array]:
        """minatar's ``reset`` with the sticky actions' memory ``last_action`` (a full-set index)."""
        init_key, key = jax.random.split(key)
        game = checkpointable(self.game.init(init_key))
        game = game.replace(_last_action=jnp.asarray(last_action, jnp.int32))
        return MinAtarState(game, jnp.zeros((), jnp.int32), key), observe(self.env_id, game)

    def reset(self, key: jax.Array) -> tuple[MinAtarState, jax.Array]:
        """The first episode of a freshly built env, whose last action is minatar's initial no-op."""
        return self.start(key, jnp.zeros((), jnp.int32))

    def next_episode(self, state: MinAtarState, key: jax.Array) -> tuple[MinAtarState, jax.Array]:
        """A later episode of the env left in ``state``: minatar's ``reset``, which keeps the last
        action taken (pgx's ``init`` alone would forget it)."""
        return self.start(key, state.game._last_action)

    def step(
        self, state: MinAtarState, action: jax.Array
    ) -> tuple[MinAtarState, jax.Array, jax.Array, jax.Array, jax.Array]:
        """One env step of ``action``: pgx's step (sticky draw, game draws, the game), then the
        package's time limit. A terminated game stays as it is and pays nothing (pgx and minatar)."""
        key, step_key = jax.random.split(state.key)
        game = as_minatar(self.env_id, state.game, self.game.step(state.game, jnp.asarray(action, jnp.int32), step_key))
        steps = state.steps + 1
        return (
            MinAtarState(game, steps, key),
            observe(self.env_id, game),
            game.rewards[0].astype(jnp.float32),
            game.terminated,
            steps >= self.max_episode_steps,
        )
