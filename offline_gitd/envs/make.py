"""Environment construction, space description and evaluation shared by all learners.

``make_env`` is the one place that turns an environment id into a seeded ``gymnasium.Env``:
``atari:{Game}`` and bare RL Unplugged game names get the Machado et al. (2018) protocol
(:mod:`offline_gitd.envs.atari`); any other id goes to ``gymnasium.make`` (classic control, Box2D
``LunarLander-v3``, MuJoCo ``HalfCheetah-v5``, MinAtar ``MinAtar/Breakout-v1``, registered on first use).
Image observations (:mod:`offline_gitd.envs.images`) come out as uint8 H x W x C. ``describe_spaces`` gives learners what they need to
build networks and to reject action spaces they cannot handle, and ``evaluate`` runs the
epsilon-greedy evaluation of the paper's offline Atari protocol (epsilon 0.001).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import gymnasium as gym
import numpy as np

from offline_gitd.envs.atari import RLU_GAMES, ale_games, make_atari_env
from offline_gitd.envs.carry import FRESH_CARRY, set_env_carry
from offline_gitd.envs.d4rl import d4rl_hint
from offline_gitd.envs.images import MINATAR_PREFIX, as_uint8_images, is_image_space, register_minatar
from offline_gitd.errors import UsageError

ATARI_PREFIX = "atari:"
# gymnasium's own Atari ids (ALE/Pong-v5, Pong-v4, PongNoFrameskip-v4, Pong-ram-v0): the raw emulator,
# without the evaluation protocol.
_RAW_ATARI_ID = re.compile(r"(?:ALE/)?(?P<game>[A-Za-z0-9]+?)(?:-ram)?(?:NoFrameskip|Deterministic)?-v\d+")
ALE_ENTRY_POINT = "ale_py.env:AtariEnv"


def make_env(env_id: str, seed: int, **kw: Any) -> gym.Env:
    """Build and seed the environment named ``env_id``.

    ``atari:{Game}`` or a bare RL Unplugged game name (``Pong``) -> :func:`make_atari_env`
    (``kw``: ``sticky``, ``max_steps``, ``clip_rewards``); anything else -> ``gymnasium.make(env_id,
    **kw)`` (e.g. ``max_episode_steps=500``), bool images made uint8. The env is reset once with ``seed`` and its action
    space seeded, so a later ``reset()`` without a seed continues a deterministic stream.

    Raises:
        UsageError: an unknown id (the message lists close registered ids).
    """
    if env_id.startswith(ATARI_PREFIX):
        return make_atari_env(env_id[len(ATARI_PREFIX) :], seed, **kw)
    if env_id in RLU_GAMES:
        return make_atari_env(env_id, seed, **kw)
    if env_id.startswith(MINATAR_PREFIX):
        register_minatar()
    if env_id not in gym.registry:  # exact, versioned ids only: a run names the env it used
        close = env_suggestions(env_id)
        hint = d4rl_hint(env_id) or (f"; did you mean {', '.join(close)}?" if close else "")
        raise UsageError(f"unknown environment {env_id!r}{hint}")
    env = as_uint8_images(gym.make(env_id, **kw))
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return env


def protocol_id(game: str) -> str:
    """The id that plays ALE game ``game`` under the Machado protocol: the bare name for an RL
    Unplugged game (``Pong``), ``atari:{Game}`` for the other ALE games (``atari:Tetris``)."""
    return game if game in RLU_GAMES else f"{ATARI_PREFIX}{game}"


def _protocol_id_of_raw(env_id: str, games: dict[str, str]) -> str | None:
    """The protocol id of a gymnasium Atari id (``Pong-v4`` -> ``Pong``), ``None`` for any other id."""
    spec = gym.registry.get(env_id)
    match = _RAW_ATARI_ID.fullmatch(env_id)
    if spec is None or spec.entry_point != ALE_ENTRY_POINT or not match:
        return None
    by_lower = {name.lower(): name for name in games}
    game = by_lower.get(match["game"].lower())
    return protocol_id(game) if game else None


def env_suggestions(env_id: str, limit: int = 4) -> list[str]:
    """The ids closest to the unknown ``env_id``, best first, each one that keeps the paper's
    evaluation protocol: an Atari game is offered by the name that plays it under the Machado
    protocol (``Pongg`` -> ``Pong``, not gymnasium's ``Pong-v4`` or ``ALE/Pong-v5``, which skip sticky
    actions, frame pooling and the frame cap: docs/reproducing.md#evaluation-protocol). MinAtar's ids
    are registered first, so a misspelt one is found too."""
    register_minatar()
    games = ale_games()
    candidates = [*RLU_GAMES, *(f"{ATARI_PREFIX}{game}" for game in games), *gym.registry]
    by_lower = {name.lower(): name for name in candidates}
    close = [by_lower[env_id.lower()]] if env_id.lower() in by_lower else []
    close += difflib.get_close_matches(env_id, candidates, n=4 * limit, cutoff=0.6)
    offered = [
        protocol_id(name.removeprefix(ATARI_PREFIX))
        if name.startswith(ATARI_PREFIX)
        else _protocol_id_of_raw(name, games) or name
        for name in close
    ]
    return list(dict.fromkeys(offered))[:limit]


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


class EnvProfile(NamedTuple):
    """What the defaults and the network of a (non-Atari) env follow, read from the env itself."""

    spaces: SpaceInfo
    images: bool  # whole H x W x C uint8 images (MinAtar), kept as they are
    domain: str  # continuous | minatar | gym: the domain whose defaults apply
    input_shape: tuple[int, ...]  # one network input: images keep their shape, anything else flattened


def env_profile(env: gym.Env, env_id: str) -> EnvProfile:
    """``env``'s profile (``env_id``: the id it was made from): continuous actions -> continuous,
    a MinAtar id -> minatar, else gym (docs/offline.md#configuration). One rule for an offline
    dataset's evaluation env, an online env and a sweep's planned collection, so that the three
    agree on the domain and so on the defaults a run resolves (its config hash)."""
    spaces = describe_spaces(env)
    images = is_image_space(env.observation_space)
    shape = tuple(spaces.obs_shape) if images else (int(np.prod(spaces.obs_shape)),)
    if spaces.action_kind == "continuous":
        domain = "continuous"
    else:
        domain = "minatar" if env_id.startswith(MINATAR_PREFIX) else "gym"
    return EnvProfile(spaces, images, domain, shape)


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
    batch ``[num_envs, *obs_shape]`` (fixed, so a jitted policy compiles once; a slot whose
    episodes are all done holds its last observation) and returns as many actions. With
    probability ``epsilon`` a discrete action is replaced by a uniform random one (epsilon 0.001
    is the offline Atari protocol); continuous actions must use ``epsilon=0``. An episode that
    hits its env's step cap (truncation) counts the return collected so far. Episode ``i`` is
    reset with a seed and uses an exploration RNG derived from ``(seed, i)`` alone, so the returns
    are deterministic given ``seed`` and a deterministic ``policy_fn``, whatever ``num_envs`` (each
    episode starts as in a new env: offline_gitd/envs/carry.py).
    Build ``env_fn`` without reward clipping so that the returns are game scores.
    """
    return evaluate_policies(
        lambda obs: np.asarray(policy_fn(obs[0]))[None], [env_fn], episodes, [seed], epsilon, num_envs=num_envs
    )[0]


def evaluate_policies(
    policy_fn: Callable[[np.ndarray], np.ndarray],
    env_fns: Sequence[Callable[[], gym.Env]],
    episodes: int,
    seeds: Sequence[int],
    epsilon: float = 0.001,
    *,
    num_envs: int = 8,
) -> np.ndarray:
    """:func:`evaluate` for ``P`` policies at once (one per training seed): returns ``[P, episodes]``.

    ``policy_fn`` gets ``[P, B, *obs_shape]`` (B = min(num_envs, episodes) slots per policy) and
    returns ``[P, B]`` actions, so a vmapped learner acts for all its seeds in one call per env
    step instead of one call per seed. Policy ``p`` plays in envs from ``env_fns[p]`` with the
    episode seeds of ``seeds[p]``: its returns equal ``evaluate`` of that policy alone (tested).
    """
    if episodes < 1 or num_envs < 1:
        raise UsageError(f"episodes and num_envs must be >= 1, got {episodes} and {num_envs}")
    if not 0.0 <= epsilon <= 1.0:
        raise UsageError(f"epsilon must be in [0, 1], got {epsilon}")
    if len(env_fns) != len(seeds) or not seeds:
        raise UsageError(f"need one env factory per seed, got {len(env_fns)} for {len(seeds)} seed(s)")
    slots = min(num_envs, episodes)
    envs = [[env_fn() for _ in range(slots)] for env_fn in env_fns]
    spaces = describe_spaces(envs[0][0])
    if spaces.action_kind == "continuous" and epsilon > 0:
        for row in envs:
            for env in row:
                env.close()
        raise UsageError("epsilon-greedy needs discrete actions; evaluate with epsilon=0")

    returns = np.zeros((len(seeds), episodes), np.float64)
    episode_seeds = [[np.random.SeedSequence([seed, i]) for i in range(episodes)] for seed in seeds]
    episode_of = np.full((len(seeds), slots), -1)  # the episode each env is running, -1: none
    obs: list[list[np.ndarray | None]] = [[None] * slots for _ in seeds]
    rngs: list[list[np.random.Generator | None]] = [[None] * slots for _ in seeds]
    next_episode = [0] * len(seeds)

    def start(p: int, slot: int) -> None:
        if next_episode[p] == episodes:
            episode_of[p, slot] = -1
            return
        env_seed, rng_seed = episode_seeds[p][next_episode[p]].spawn(2)
        obs[p][slot], _ = envs[p][slot].reset(seed=int(env_seed.generate_state(1)[0]))
        # as in a new env: what the slot's previous episode left (MinAtar's last action) stays out
        set_env_carry(envs[p][slot], FRESH_CARRY)
        rngs[p][slot] = np.random.default_rng(rng_seed)
        episode_of[p, slot] = next_episode[p]
        next_episode[p] += 1

    for p in range(len(seeds)):
        for slot in range(slots):
            start(p, slot)
    try:
        while (episode_of >= 0).any():
            actions = np.asarray(policy_fn(np.stack([np.stack(row) for row in obs])))
            for p, slot in zip(*np.nonzero(episode_of >= 0), strict=True):
                action = actions[p, slot]
                rng = rngs[p][slot]
                if epsilon > 0 and rng.random() < epsilon:
                    action = rng.integers(spaces.action_size)
                if spaces.action_kind == "discrete":
                    action = int(action)
                obs[p][slot], reward, terminated, truncated, _ = envs[p][slot].step(action)
                returns[p, episode_of[p, slot]] += float(reward)
                if terminated or truncated:
                    start(p, slot)
        return returns
    finally:
        for row in envs:
            for env in row:
                env.close()
