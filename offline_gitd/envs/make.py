"""Environment construction, space description and evaluation shared by all learners.

``make_env`` is the one place that turns an environment id into a seeded ``gymnasium.Env``:
``atari:{Game}`` and bare RL Unplugged game names get the Machado et al. (2018) protocol
(:mod:`offline_gitd.envs.atari`); any other id goes to ``gymnasium.make`` (classic control, Box2D
``LunarLander-v3``, MuJoCo ``HalfCheetah-v5``). ``describe_spaces`` gives learners what they need to
build networks and to reject action spaces they cannot handle, and ``evaluate`` runs the
epsilon-greedy evaluation of the paper's offline Atari protocol (epsilon 0.001).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import gymnasium as gym
import numpy as np

from offline_gitd.envs.atari import RLU_GAMES, make_atari_env
from offline_gitd.errors import UsageError

ATARI_PREFIX = "atari:"


def make_env(env_id: str, seed: int, **kw: Any) -> gym.Env:
    """Build and seed the environment named ``env_id``.

    ``atari:{Game}`` or a bare RL Unplugged game name (``Pong``) -> :func:`make_atari_env`
    (``kw``: ``sticky``, ``max_steps``, ``clip_rewards``); anything else -> ``gymnasium.make(env_id,
    **kw)`` (e.g. ``max_episode_steps=500``). The env is reset once with ``seed`` and its action
    space seeded, so a later ``reset()`` without a seed continues a deterministic stream.

    Raises:
        UsageError: an unknown id (the message lists close registered ids).
    """
    if env_id.startswith(ATARI_PREFIX):
        return make_atari_env(env_id[len(ATARI_PREFIX) :], seed, **kw)
    if env_id in RLU_GAMES:
        return make_atari_env(env_id, seed, **kw)
    if env_id not in gym.registry:  # exact, versioned ids only: a run names the env it used
        close = difflib.get_close_matches(env_id, list(gym.registry), n=4, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"unknown environment {env_id!r}{hint}")
    env = gym.make(env_id, **kw)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return env


class SpaceInfo(NamedTuple):
    """What a learner needs to know about an environment's spaces."""

    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    action_kind: Literal["discrete", "continuous"]
    action_size: int  # number of actions (discrete) or action dimension (continuous)
    action_bounds: tuple[np.ndarray, np.ndarray] | None  # (low, high) for continuous, else None


def describe_spaces(env: gym.Env) -> SpaceInfo:
    """Describe ``env``'s observation and action spaces.

    Supported: a ``Box`` observation; a ``Discrete`` action space starting at 0 (Q-learning heads
    index actions from 0), or a finite 1-D ``Box`` action space (SAC squashes to its bounds).

    Raises:
        UsageError: any other space, with a one-line message naming it.
    """
    obs, act = env.observation_space, env.action_space
    if not isinstance(obs, gym.spaces.Box):
        raise UsageError(f"unsupported observation space {obs} (need a Box)")
    if isinstance(act, gym.spaces.Discrete):
        if int(act.start) != 0:
            raise UsageError(f"unsupported action space {act} (Discrete must start at 0)")
        return SpaceInfo(obs.shape, obs.dtype, "discrete", int(act.n), None)
    if isinstance(act, gym.spaces.Box):
        if len(act.shape) != 1 or not act.is_bounded("both"):
            raise UsageError(f"unsupported action space {act} (need a bounded 1-D Box)")
        return SpaceInfo(obs.shape, obs.dtype, "continuous", act.shape[0], (act.low, act.high))
    raise UsageError(f"unsupported action space {act} (need Discrete or a 1-D Box)")


def evaluate(
    policy_fn: Callable[[np.ndarray], np.ndarray],
    env_fn: Callable[[], gym.Env],
    episodes: int,
    seed: int,
    epsilon: float = 0.001,
    *,
    num_envs: int = 8,
) -> np.ndarray:
    """Return the undiscounted return of each of ``episodes`` evaluation episodes.

    Up to ``num_envs`` episodes run side by side and ``policy_fn`` gets their observations as one
    batch ``[B, *obs_shape]`` and returns ``B`` actions. With probability ``epsilon`` a discrete
    action is replaced by a uniform random one (epsilon 0.001 is the offline Atari protocol);
    continuous actions must use ``epsilon=0``. An episode that hits its env's step cap
    (truncation) counts the return collected so far. Episode ``i`` is reset with a seed and uses
    an exploration RNG derived from ``(seed, i)`` alone, so the returns are deterministic given
    ``seed`` and a deterministic ``policy_fn``, whatever ``num_envs``. Build ``env_fn`` without
    reward clipping so that the returns are game scores.
    """
    if episodes < 1 or num_envs < 1:
        raise UsageError(f"episodes and num_envs must be >= 1, got {episodes} and {num_envs}")
    if not 0.0 <= epsilon <= 1.0:
        raise UsageError(f"epsilon must be in [0, 1], got {epsilon}")
    envs = [env_fn() for _ in range(min(num_envs, episodes))]
    spaces = describe_spaces(envs[0])
    if spaces.action_kind == "continuous" and epsilon > 0:
        raise UsageError("epsilon-greedy needs discrete actions; evaluate with epsilon=0")

    returns = np.zeros(episodes, np.float64)
    seeds = [np.random.SeedSequence([seed, i]) for i in range(episodes)]
    episode_of: list[int | None] = [None] * len(envs)  # the episode each env is running
    obs: list[np.ndarray | None] = [None] * len(envs)
    rngs: list[np.random.Generator | None] = [None] * len(envs)
    next_episode = 0

    def start(slot: int) -> None:
        nonlocal next_episode
        if next_episode == episodes:
            episode_of[slot] = None
            return
        env_seed, rng_seed = seeds[next_episode].spawn(2)
        obs[slot], _ = envs[slot].reset(seed=int(env_seed.generate_state(1)[0]))
        rngs[slot] = np.random.default_rng(rng_seed)
        episode_of[slot] = next_episode
        next_episode += 1

    for slot in range(len(envs)):
        start(slot)
    try:
        while True:
            active = [slot for slot, ep in enumerate(episode_of) if ep is not None]
            if not active:
                return returns
            actions = np.asarray(policy_fn(np.stack([obs[slot] for slot in active])))
            for slot, action in zip(active, actions):
                rng = rngs[slot]
                if epsilon > 0 and rng.random() < epsilon:
                    action = rng.integers(spaces.action_size)
                if spaces.action_kind == "discrete":
                    action = int(action)
                obs[slot], reward, terminated, truncated, _ = envs[slot].step(action)
                returns[episode_of[slot]] += float(reward)
                if terminated or truncated:
                    start(slot)
    finally:
        for env in envs:
            env.close()
