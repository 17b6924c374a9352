"""Reference scores, published curves, and the registry of known suites and envs.

The scores are data, not code: they live as CSV in ``reference_tables/`` beside this module, with
their source in a header comment (docs/leaderboard.md#reference-tables), and this module only reads them.
They are package data, read through ``importlib.resources``, so an installed wheel has them too. The env
registry exists so that a typo (``pong`` for ``Pong``) is refused at submit time instead of
silently becoming a new env on the board; ``--allow-new-env`` is the escape hatch.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from typing import NamedTuple

from offline_gitd.errors import UsageError

REFERENCE_TABLES = resources.files("offline_gitd.leaderboard") / "reference_tables"
ATARI_TABLE = REFERENCE_TABLES / "atari_human_random.csv"
D4RL_TABLE = REFERENCE_TABLES / "d4rl_ref_scores.csv"
MINATAR_DQN_TABLE = REFERENCE_TABLES / "minatar_young_tian_dqn.csv"

GYM_ENVS: frozenset[str] = frozenset({"MountainCar-v0", "LunarLander-v3", "CartPole-v1", "Pendulum-v1", "Acrobot-v1"})
# MinAtar's five games (Young & Tian 2019), full (v0) and minimal (v1) action sets: suite minatar,
# normalised by the baseline method (docs/minatar.md).
MINATAR_GAMES: tuple[str, ...] = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
MINATAR_ENVS: frozenset[str] = frozenset(f"{game}-v{version}" for game in MINATAR_GAMES for version in (0, 1))
MUJOCO_ENVS: frozenset[str] = frozenset(
    f"{name}-v5"
    for name in (
        "Ant",
        "HalfCheetah",
        "Hopper",
        "Humanoid",
        "HumanoidStandup",
        "InvertedDoublePendulum",
        "InvertedPendulum",
        "Pusher",
        "Reacher",
        "Swimmer",
        "Walker2d",
    )
)


def _minari_to_d4rl() -> dict[str, str]:
    """Minari dataset ids whose environment has a D4RL reference score, mapped to the D4RL id.

    D4RL's min/max are per environment (a random and an expert policy's returns), identical across
    the datasets of one env, so they normalise any return in that env. Minari re-released the
    D4RL datasets (Adroit -v1 as ``D4RL/<task>/<data>-v2``, kitchen, antmaze) and added
    ``mujoco/<env>/<data>-v0`` on the v5 MuJoCo envs, for which the D4RL (v2) score is the usual
    approximation. Pointmaze is left out: Minari regenerated it with a different reward scale.
    """
    mapping = {}
    for task in ("pen", "hammer", "relocate", "door"):
        for data in ("human", "cloned", "expert"):
            mapping[f"D4RL/{task}/{data}-v2"] = f"{task}-{data}-v1"
    for data in ("complete", "partial", "mixed"):
        mapping[f"D4RL/kitchen/{data}-v2"] = f"kitchen-{data}-v0"
    for maze in ("umaze", "umaze-diverse", "medium-play", "medium-diverse", "large-play", "large-diverse"):
        mapping[f"D4RL/antmaze/{maze}-v1"] = f"antmaze-{maze}-v2"
    for env in ("halfcheetah", "hopper", "walker2d", "ant"):
        for data in ("medium", "expert"):  # Minari's "simple" has no D4RL counterpart
            mapping[f"mujoco/{env}/{data}-v0"] = f"{env}-{data}-v2"
    return mapping


MINARI_TO_D4RL: dict[str, str] = _minari_to_d4rl()


def _data_lines(path: Traversable) -> Iterator[str]:
    """The lines of a reference CSV without its ``#`` header comment."""
    with path.open(encoding="utf-8") as handle:
        yield from (line for line in handle if not line.startswith("#"))


@functools.cache
def atari_scores() -> dict[str, tuple[float | None, float | None]]:
    """Game name -> (random, human); ``None`` where the source has no score (Carnival, Pooyan)."""
    table = {}
    for record in csv.DictReader(_data_lines(ATARI_TABLE)):
        table[record["game"]] = (
            float(record["random"]) if record["random"] else None,
            float(record["human"]) if record["human"] else None,
        )
    return table


@functools.cache
def d4rl_scores() -> dict[str, tuple[float, float]]:
    """D4RL id -> (ref_min_score, ref_max_score)."""
    return {
        record["d4rl_id"]: (float(record["ref_min_score"]), float(record["ref_max_score"]))
        for record in csv.DictReader(_data_lines(D4RL_TABLE))
    }


def d4rl_reference(suite: str, env: str) -> tuple[float, float] | None:
    """(ref_min_score, ref_max_score) of a leaderboard ``(suite, env)`` where D4RL has one, else None:
    what a training run needs to log D4RL-normalised scores as it goes (as CORL does)."""
    if suite not in ("minari", "d4rl"):
        return None
    return d4rl_scores().get(MINARI_TO_D4RL.get(env, env))


def d4rl_normalised(value: float, reference: tuple[float, float]) -> float:
    """D4RL's normalised score: 100 * (return - min) / (max - min)."""
    low, high = reference
    return 100.0 * (value - low) / (high - low)


class PublishedPoint(NamedTuple):
    """One point of a published learning curve: its value at ``env_steps``, and where it comes from."""

    env_steps: int
    value: float
    source: str


@functools.cache
def minatar_dqn_curve() -> dict[str, tuple[PublishedPoint, ...]]:
    """MinAtar env id -> Young & Tian's DQN (training return at 1M and 5M frames), by env steps.

    A behaviour agent's curve is judged against theirs at the same frames (docs/minatar.md). The
    two ids of a game (``Breakout-v0``, the full action set, and ``Breakout-v1``, the minimal one)
    map to the same points: they differ in the actions offered, not in the game, and their figure has
    one curve per game.
    """
    points: dict[str, list[PublishedPoint]] = {}
    for record in csv.DictReader(_data_lines(MINATAR_DQN_TABLE)):
        point = PublishedPoint(int(record["env_steps"]), float(record["return"]), record["source"])
        for version in (0, 1):
            points.setdefault(f"{record['game']}-v{version}", []).append(point)
    return {env: tuple(sorted(curve)) for env, curve in points.items()}


@functools.cache
def known_envs() -> dict[str, frozenset[str]]:
    """Suite -> the env names a row of that suite may use without ``--allow-new-env``."""
    return {
        "atari": frozenset(atari_scores()),
        "gym": GYM_ENVS,
        "minatar": MINATAR_ENVS,
        "mujoco": MUJOCO_ENVS,
        "minari": frozenset(MINARI_TO_D4RL),
        "d4rl": frozenset(d4rl_scores()),
    }


def check_env(suite: str, env: str, allow_new_env: bool) -> None:
    """Refuse an unknown suite always, and an unknown env of a known suite unless allowed."""
    registry = known_envs()
    if suite not in registry:
        raise UsageError(f"unknown suite {suite!r}; known: {', '.join(sorted(registry))}")
    if env not in registry[suite] and not allow_new_env:
        raise UsageError(f"unknown {suite} env {env!r} (pass --allow-new-env to add it to the board)")
