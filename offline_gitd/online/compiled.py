"""Online DQN as one compiled program, for environments written in JAX (purejaxrl / gymnax style).

The Python loop (:mod:`offline_gitd.online.loop`) steps gymnasium envs on the host, so every env
step is at least one round trip into compiled code. When the env itself is JAX
(:data:`JAX_ENVS`), the whole step (epsilon-greedy acting, the env with its automatic reset, the
replay write, the batch draw and the updates) can be one ``lax.scan`` body, and ``chunk`` env steps
one call: the host is touched once per chunk, not once per step (Lu et al. 2022, "Discovered
Policy Optimisation", whose PureJaxRL showed the speed-up on accelerators).
``offline_gitd online dqn --loop compiled`` runs it in an online run directory, one call per
logging window (:mod:`offline_gitd.online.compiled_run`).

What is shared with the Python loop, so that the two train the same agent:

* the update is the family's own pure step, ``family.step`` of the DQN family
  :func:`~offline_gitd.online.train.build_family` builds from the resolved config (any critic:
  ``td``, ``gitd`` ... with its K heads), and the greedy action is ``family.act``;
* the schedules are :mod:`offline_gitd.online.schedules`' functions, evaluated on the host for
  each chunk's steps and fed to the scan: uniformly random actions for the initial samples, then
  epsilon decaying linearly, and the updates of each step (UTD n: n after every step; UTD 1/n:
  one after every n-th step), none before the initial samples are in;
* the replay stores ``discount = gamma * (1 - terminated)``: a truncated episode bootstraps, a
  terminated one does not; rewards are clipped for learning only where ``clip_rewards`` says;
* each seed's network starts from ``family.init(PRNGKey(seed))``, as in the Python loop;
* observations are stored as the env gives them: float32 vectors (CartPole) or uint8 H x W x C
  images fed to the image torso whole (MinAtar's boards, ``--torso minatar``), as the Python loop
  stores them.

What differs: the random streams (JAX keys, not numpy's per-seed generators and per-episode reset
seeds), so runs agree in distribution, not step by step; the replay is a ring of the newest
``replay_size`` transitions (the Python loop's window counts rows, and a truncated episode's
last observation takes a row of its own); 1-step returns and uniform sampling only (no
``--n-step``, no PER); no ``--init-from``; discrete actions only (DQN, not SAC).

Seeds run in lockstep: the per-seed chunk is vmapped over a leading seed axis, the schedule
arrays are shared (not mapped), so the "update now?" test stays one scalar and a step without
updates skips them (a ``lax.cond``) instead of computing and discarding them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.batch import Batch
from offline_gitd.choices import JAX_ENV_IDS
from offline_gitd.envs.jax_cartpole import CartPole
from offline_gitd.envs.jax_minatar import GAMES as MINATAR_GAMES
from offline_gitd.envs.jax_minatar import MinAtar
from offline_gitd.errors import ConfigError
from offline_gitd.learners.drivers import choose_compiler_options
from offline_gitd.learners.family import DiscreteFamily
from offline_gitd.online.config import OnlineConfig, check_compiled_loop
from offline_gitd.online.env_info import EnvInfo, obs_example
from offline_gitd.online.schedules import epsilon_at, updates_after_step, utd_fraction
from offline_gitd.rundir.metrics import PER_SAMPLE


class JaxEnv(Protocol):
    """A discrete-action env as pure functions (:class:`~offline_gitd.envs.jax_cartpole.CartPole`).

    The observation's shape and dtype are those ``reset`` returns (the replay and the spaces check
    read them there). ``next_episode(state, key)`` starts the episode after the one that ended in
    ``state``: a gymnasium env is reset, not rebuilt, between episodes, and an env may keep
    something across the reset (MinAtar's sticky actions keep the last action taken); an env that
    keeps nothing returns ``reset(key)``.
    """

    env_id: str
    num_actions: int

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]: ...

    def next_episode(self, state: Any, key: jax.Array) -> tuple[Any, jax.Array]: ...

    def step(self, state: Any, action: jax.Array) -> tuple[Any, jax.Array, jax.Array, jax.Array, jax.Array]: ...


# The gymnasium ids with a JAX twin checked against gymnasium (tests/envs), from the run's horizon
# (None: the id's own time limit; MinAtar has none, so the package's MinAtar cap, 10,000 steps):
# CartPole written here, the five MinAtar games from pgx-minatar (offline_gitd.envs.jax_minatar).
# Their names are offline_gitd.choices.JAX_ENV_IDS, which the command line refuses other envs by
# before importing JAX.
JAX_ENVS: dict[str, Callable[[int | None], JaxEnv]] = {
    "CartPole-v1": lambda horizon: CartPole(max_episode_steps=horizon) if horizon else CartPole(),
    **{
        env_id: (
            lambda horizon, env_id=env_id: MinAtar(env_id, max_episode_steps=horizon) if horizon else MinAtar(env_id)
        )
        for env_id in MINATAR_GAMES
    },
}


def jax_env(env_id: str, horizon: int | None = None) -> JaxEnv:
    """The JAX twin of ``env_id``; a :class:`ConfigError` naming the supported ids otherwise."""
    if env_id not in JAX_ENVS:
        raise ConfigError(f"the compiled loop needs an env written in JAX: {', '.join(JAX_ENV_IDS)}; got {env_id!r}")
    return JAX_ENVS[env_id](horizon)


# ------------------------------------------------------------------------------------------ replay


class Ring(NamedTuple):
    """One seed's replay: the newest ``capacity`` transitions in a ring of device arrays.

    ``count`` is the number of transitions ever written: the next one goes to ``count % capacity``
    and the filled part is the first ``min(count, capacity)`` slots.
    """

    obs: jax.Array  # [C, *obs_shape]: float32 vectors or uint8 images, as the env gives them
    action: jax.Array  # [C] int32
    reward: jax.Array  # [C] float32 (clipped if the run clips)
    discount: jax.Array  # [C] float32: gamma * (1 - terminated)
    next_obs: jax.Array  # [C, *obs_shape], as obs
    count: jax.Array  # int32


def ring_init(capacity: int, obs_size: int | tuple[int, ...], dtype: Any = jnp.float32) -> Ring:
    """An empty ring for observations of ``obs_size`` (a vector's length or an image's shape),
    stored as ``dtype`` (uint8 images take a quarter of float32's memory: 100,000 MinAtar
    transitions are 80 MB)."""
    shape = (obs_size,) if isinstance(obs_size, int) else tuple(obs_size)
    zeros = jnp.zeros((capacity,), jnp.float32)
    return Ring(
        jnp.zeros((capacity, *shape), dtype),
        jnp.zeros((capacity,), jnp.int32),
        zeros,
        zeros,
        jnp.zeros((capacity, *shape), dtype),
        jnp.zeros((), jnp.int32),
    )


def ring_add(
    ring: Ring, obs: jax.Array, action: jax.Array, reward: jax.Array, discount: jax.Array, next_obs: jax.Array
) -> Ring:
    """``ring`` with one transition written over its oldest slot."""
    i = ring.count % ring.action.shape[0]
    return Ring(
        ring.obs.at[i].set(obs),
        ring.action.at[i].set(action),
        ring.reward.at[i].set(reward),
        ring.discount.at[i].set(discount),
        ring.next_obs.at[i].set(next_obs),
        ring.count + 1,
    )


def ring_sample(ring: Ring, key: jax.Array, batch_size: int) -> Batch:
    """``batch_size`` transitions drawn uniformly, with replacement, from the filled part (which
    must hold one); importance weights 1, as uniform sampling has."""
    filled = jnp.minimum(ring.count, ring.action.shape[0])
    rows = jax.random.randint(key, (batch_size,), 0, filled)
    return Batch(
        ring.obs[rows],
        ring.action[rows],
        ring.reward[rows],
        ring.discount[rows],
        ring.next_obs[rows],
        jnp.ones((batch_size,), jnp.float32),
    )


# -------------------------------------------------------------------------------------------- loop


@dataclass(frozen=True)
class Schedule:
    """The run config's numbers the compiled loop uses (static: they shape the program)."""

    batch_size: int
    replay_size: int
    gamma: float
    clip_rewards: bool
    initial_samples: int
    epsilon_start: float
    epsilon_end: float
    epsilon_steps: int
    utd: float  # an integer n >= 1 or 1/n (schedules.utd_fraction)

    @property
    def updates_per_update_step(self) -> int:
        """n for UTD n, 1 for UTD 1/n: how many updates a step that updates runs."""
        return max(1, int(utd_fraction(self.utd)))

    def epsilons(self, first_step: int, steps: int) -> np.ndarray:
        """Exploration rate of env steps ``first_step + 1 .. first_step + steps`` (1-based): the
        Python loop's ``epsilon_at(step - 1, ...)``, 1 during the initial samples."""
        return np.asarray(
            [
                epsilon_at(t - 1, self.epsilon_start, self.epsilon_end, self.epsilon_steps, self.initial_samples)
                for t in range(first_step + 1, first_step + steps + 1)
            ],
            np.float32,
        )

    def update_steps(self, first_step: int, steps: int) -> np.ndarray:
        """Whether each of those env steps is followed by updates (``updates_per_update_step`` of them)."""
        utd, n = utd_fraction(self.utd), self.updates_per_update_step
        counts = [
            updates_after_step(t, utd, self.initial_samples) for t in range(first_step + 1, first_step + steps + 1)
        ]
        if set(counts) - {0, n}:  # pragma: no cover - utd_fraction admits only n and 1/n
            raise AssertionError(f"UTD {self.utd}: update counts {sorted(set(counts))}, expected 0 or {n}")
        return np.asarray(counts, bool)


def schedule_from_config(cfg: OnlineConfig) -> Schedule:
    """The :class:`Schedule` of a resolved config."""
    return Schedule(
        batch_size=cfg.batch_size,
        replay_size=cfg.replay_size,
        gamma=cfg.gamma,
        clip_rewards=bool(cfg.clip_rewards),
        initial_samples=cfg.initial_samples,
        epsilon_start=cfg.epsilon_start,
        epsilon_end=cfg.epsilon_end,
        epsilon_steps=cfg.epsilon_steps,
        utd=cfg.utd,
    )


class SeedCarry(NamedTuple):
    """One seed's whole loop state between env steps: the scan's carry (leading seed axis when
    vmapped). A pytree of device arrays, so a checkpoint of the compiled loop is "save the carry"."""

    learner: Any  # the family's training state (DiscreteState)
    env_state: Any
    obs: jax.Array  # the observation the next action is chosen from
    replay: Ring
    rng: jax.Array
    episode_return: jax.Array  # float32, unclipped, of the running episode
    episode_length: jax.Array  # int32


class StepRecord(NamedTuple):
    """What one env step reports, stacked to [seeds, steps] by a chunk: the finished episodes
    (``episodes.csv``) and the updates' metrics (``metrics.csv``) without a host sync per step."""

    done: jax.Array  # bool: an episode ended on this step (terminated or truncated)
    episode_return: jax.Array  # float32: the ended episode's return, 0 where none ended
    episode_length: jax.Array  # int32: its length, 0 where none ended
    updates: jax.Array  # int32: updates run after this step
    # each metric of each of the step's ``updates_per_update_step`` updates ([n, ...]; zeros on a
    # step without updates), so the host averages a window over updates as the Python loop does
    metrics: dict[str, jax.Array]


def update_metrics(aux: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """One update's metrics as the run directory logs them: a per-sample vector (``td_abs``) as its
    batch mean under its column's name (``td_abs_mean``), everything else as it is."""
    return {PER_SAMPLE.get(name, name): value.mean(-1) if name in PER_SAMPLE else value for name, value in aux.items()}


@dataclass(frozen=True)
class CompiledDQN:
    """The compiled loop of one resolved DQN config: ``init(seeds)`` then ``run_chunk`` repeatedly."""

    family: DiscreteFamily
    env: JaxEnv
    schedule: Schedule

    # -- one seed ----------------------------------------------------------------------------

    def init_seed(self, seed: jax.Array) -> SeedCarry:
        """Seed ``seed``'s network as the Python loop makes it (``family.init(PRNGKey(seed))``),
        an empty replay, its first episode reset."""
        key = jax.random.PRNGKey(seed)
        reset_key, rng = jax.random.split(jax.random.fold_in(key, 1))
        env_state, obs = self.env.reset(reset_key)
        zero = jnp.zeros((), jnp.float32)
        replay = ring_init(self.schedule.replay_size, obs.shape, obs.dtype)
        return SeedCarry(self.family.init(key), env_state, obs, replay, rng, zero, jnp.zeros((), jnp.int32))

    def env_step(self, carry: SeedCarry, epsilon: jax.Array) -> tuple[SeedCarry, StepRecord]:
        """Act epsilon-greedily, step the env, store the transition, reset an ended episode."""
        s = self.schedule
        rng, explore_key, random_key, reset_key = jax.random.split(carry.rng, 4)
        greedy = self.family.act(carry.learner, carry.obs[None], None)[0]
        random_action = jax.random.randint(random_key, (), 0, self.env.num_actions)
        action = jnp.where(jax.random.uniform(explore_key) < epsilon, random_action, greedy).astype(jnp.int32)
        env_state, next_obs, reward, terminated, truncated = self.env.step(carry.env_state, action)
        learn_reward = jnp.clip(reward, -1.0, 1.0) if s.clip_rewards else reward
        discount = s.gamma * (1.0 - terminated.astype(jnp.float32))
        replay = ring_add(carry.replay, carry.obs, action, learn_reward, discount, next_obs)
        episode_return, episode_length = carry.episode_return + reward, carry.episode_length + 1
        done = terminated | truncated
        fresh_state, fresh_obs = self.env.next_episode(env_state, reset_key)
        env_state = jax.tree.map(lambda new, old: jnp.where(done, new, old), fresh_state, env_state)
        record = StepRecord(
            done,
            jnp.where(done, episode_return, 0.0),
            jnp.where(done, episode_length, 0),
            jnp.zeros((), jnp.int32),
            {},
        )
        carry = SeedCarry(
            carry.learner,
            env_state,
            jnp.where(done, fresh_obs, next_obs),
            replay,
            rng,
            jnp.where(done, 0.0, episode_return),
            jnp.where(done, 0, episode_length),
        )
        return carry, record

    def updates(self, carry: SeedCarry) -> tuple[SeedCarry, dict[str, jax.Array]]:
        """``updates_per_update_step`` updates of ``family.step``, each on a fresh uniform batch;
        the metrics of each, stacked."""
        rng, key = jax.random.split(carry.rng)

        def one(learner: Any, key: jax.Array) -> tuple[Any, dict[str, jax.Array]]:
            learner, aux = self.family.step(learner, ring_sample(carry.replay, key, self.schedule.batch_size))
            return learner, update_metrics(aux)

        keys = jax.random.split(key, self.schedule.updates_per_update_step)
        learner, metrics = jax.lax.scan(one, carry.learner, keys)
        return carry._replace(learner=learner, rng=rng), metrics

    def seed_chunk(self, carry: SeedCarry, epsilons: jax.Array, update: jax.Array) -> tuple[SeedCarry, StepRecord]:
        """One seed's ``len(epsilons)`` env steps in one scan: each step, then its updates where
        ``update`` says (a real branch: the flags are the same for every seed)."""
        n = self.schedule.updates_per_update_step

        def skip(carry: SeedCarry) -> tuple[SeedCarry, dict[str, jax.Array]]:
            shapes = jax.eval_shape(self.updates, carry)[1]
            return carry, jax.tree.map(lambda m: jnp.zeros(m.shape, m.dtype), shapes)

        def body(carry: SeedCarry, xs: tuple[jax.Array, jax.Array]) -> tuple[SeedCarry, StepRecord]:
            epsilon, update_now = xs
            carry, record = self.env_step(carry, epsilon)
            carry, metrics = jax.lax.cond(update_now, self.updates, skip, carry)
            return carry, record._replace(updates=jnp.where(update_now, n, 0).astype(jnp.int32), metrics=metrics)

        return jax.lax.scan(body, carry, (epsilons, update))

    # -- every seed ----------------------------------------------------------------------------

    def init(self, seeds: Sequence[int]) -> SeedCarry:
        """Every seed's carry, stacked on a leading seed axis."""
        return jax.jit(jax.vmap(self.init_seed))(jnp.asarray(seeds, jnp.int32))

    @cached_property
    def program(self) -> Callable[[SeedCarry, jax.Array, jax.Array], tuple[SeedCarry, StepRecord]]:
        """The chunk over every seed, compiled once per chunk length (the carry is donated)."""
        chunk = jax.vmap(self.seed_chunk, in_axes=(0, None, None))
        return jax.jit(chunk, donate_argnums=0, compiler_options=choose_compiler_options())

    def run_chunk(self, carry: SeedCarry, first_step: int, steps: int) -> tuple[SeedCarry, StepRecord]:
        """Env steps ``first_step + 1 .. first_step + steps`` of every seed in one call; ``carry``
        is consumed (its buffers are reused). Records come back as device arrays [seeds, steps]."""
        s = self.schedule
        return self.program(
            carry, jnp.asarray(s.epsilons(first_step, steps)), jnp.asarray(s.update_steps(first_step, steps))
        )


def compiled_loop(cfg: OnlineConfig, family: DiscreteFamily, info: EnvInfo | None = None) -> CompiledDQN:
    """The compiled loop of a resolved ``cfg`` with learner ``family``; where gymnasium's env
    ``info`` is given, the JAX env's spaces are checked against it."""
    check_compiled_loop(cfg)
    env = jax_env(cfg.env, cfg.horizon)
    obs = jax.eval_shape(env.reset, jax.random.PRNGKey(0))[1]
    if info is not None and (info.spaces.action_size, info.input_shape, obs_example(info).dtype) != (
        env.num_actions,
        obs.shape,
        obs.dtype,
    ):
        raise ConfigError(f"{cfg.env}: the JAX env's spaces differ from gymnasium's")  # pragma: no cover
    return CompiledDQN(family, env, schedule_from_config(cfg))


def finished_episodes(
    records: StepRecord, seeds: Sequence[int], first_step: int, episodes_before: Sequence[int]
) -> list[dict[str, Any]]:
    """The episodes a chunk finished, as the Python loop's ``episodes.csv`` rows (step, seed,
    episode, return, length); ``episodes_before``: each seed's episodes finished before the chunk."""
    done, returns, lengths = (np.asarray(x) for x in (records.done, records.episode_return, records.episode_length))
    rows = []
    for i, seed in enumerate(seeds):
        for k, t in enumerate(np.flatnonzero(done[i])):
            rows.append(
                {
                    "step": first_step + int(t) + 1,
                    "seed": seed,
                    "episode": episodes_before[i] + k,
                    "return": float(returns[i, t]),
                    "length": int(lengths[i, t]),
                }
            )
    return sorted(rows, key=lambda row: (row["step"], row["seed"]))
