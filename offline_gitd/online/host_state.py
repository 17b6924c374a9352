"""The online loop's host side: one seed's replay, RNG and episode, and how a checkpoint keeps it.

A checkpoint is the orbax-saved training state plus ``host_state/<step>.npz``: a sealed npz archive
(a digest line, then the archive; :func:`~offline_gitd.rundir.seals.write_sealed_arrays`) holding
each seed's replay rows and priorities, the actions taken since its episode began, its newest
observation, and one JSON document with the numbers (the numpy RNG's ``bit_generator.state``, the
episode counter and return) and the episode actions' dtype and shape. Shapes and dtypes come from
the env (:func:`action_spec`, :func:`observation_spec`), never from the values held, so every phase
a seed can be in when a checkpoint lands saves and reads back exactly: an episode just reset (no
action yet: an empty ``[0, *shape]`` array), an empty replay, seeds in different phases.

Nothing in it is code: a run directory may come from someone else
(docs/bounds.md#run-directories-are-data). Every value read back is checked against the run's own
config (the replay's shapes, the seeds) before it is used, so a foreign or damaged file is refused
in one line. Host states of older versions were pickles (``<step>.pkl``): they are only read when
the user vouches for the run with ``--trust-pickles``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from offline_gitd.data.episode_store import EpisodeStore
from offline_gitd.errors import UsageError
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.env_info import EnvInfo
from offline_gitd.online.replay import WindowedReplay
from offline_gitd.rundir.seals import (
    DamagedFile,
    read_sealed_arrays,
    read_sealed_pickle,
    write_sealed_arrays,
)

HOST_STATE = "host_state"
SUFFIX = ".npz"
LEGACY_SUFFIX = ".pkl"
# The only bit generator the loop creates (np.random.default_rng); a saved state must name it.
BIT_GENERATOR = "PCG64"


class UntrustedPickle(UsageError):
    """A host state saved as a pickle by an older version: reading it could run code."""


@dataclass
class SeedSlot:
    """One seed's host side. Everything but ``env`` is saved into checkpoints."""

    seed: int
    replay: WindowedReplay
    rng: np.random.Generator  # epsilon draws, random actions, replay sampling
    episode: int = 0  # index of the running episode
    actions: list = field(default_factory=list)  # since the running episode's reset
    obs: Any = None
    episode_return: float = 0.0  # unclipped (the game score)
    episode_length: int = 0
    last_result: float | None = None  # the previous results.csv value, repeated in empty windows
    # What the env kept from before the running episode's reset that its reset seed does not set
    # (offline_gitd.envs.carry: MinAtar's last action, which a sticky first step repeats).
    env_carry: int | None = None
    env: Any = None


def new_slot(cfg: OnlineConfig, info: EnvInfo, seed: int) -> SeedSlot:
    """A fresh slot for ``seed``: an empty replay shaped for the env, the seed's own RNG."""
    spaces = info.spaces
    # Atari rows are single frames (the newest of each stack); images (MinAtar) and vectors are
    # stored whole, images as uint8 and never stacked.
    if info.frames:
        obs_shape, obs_dtype = spaces.obs_shape[:2], np.uint8
    else:
        obs_shape, obs_dtype = info.input_shape, np.uint8 if info.images else np.float32
    if spaces.action_kind == "continuous":
        store = EpisodeStore(obs_shape, obs_dtype, (spaces.action_size,), np.float32)
    else:
        store = EpisodeStore(obs_shape, obs_dtype)
    replay = WindowedReplay(
        store,
        capacity=cfg.replay_size,
        stack=4,
        n_step=cfg.n_step,
        gamma=cfg.gamma,
        prioritized=cfg.per,
        alpha=cfg.per_alpha,
        beta=cfg.per_beta,
    )
    return SeedSlot(seed, replay, np.random.default_rng([seed, 1]))


def host_state_path(run_dir: Path, step: int, suffix: str = SUFFIX) -> Path:
    return run_dir / HOST_STATE / f"{step}{suffix}"


def action_spec(info: EnvInfo) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of one action as the loop takes it and a checkpoint saves it: float32
    ``[action_size]`` for continuous actions, an int64 scalar for discrete ones.

    Declared from the env, never inferred from the actions a slot holds: a slot whose episode has
    just begun holds none, and its (empty) array must still have the right shape and dtype."""
    if info.spaces.action_kind == "continuous":
        return (info.spaces.action_size,), np.dtype(np.float32)
    return (), np.dtype(np.int64)


def observation_spec(info: EnvInfo) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of one network input (a slot's newest observation): uint8 for Atari
    stacks and MinAtar images, float32 vectors otherwise."""
    return info.input_shape, np.dtype(np.uint8 if info.frames or info.images else np.float32)


def episode_actions_array(actions: Sequence[Any], shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The actions taken since an episode's reset as one ``[len(actions), *shape]`` array of
    ``dtype``; an empty episode gives ``[0, *shape]``.

    ``ValueError`` for an action of another shape or one that ``dtype`` cannot hold exactly (a
    float64 action into float32): the env is restored by replaying these actions, so a saved
    action must be the very one taken."""
    out = np.empty((len(actions), *shape), dtype)
    for i, action in enumerate(actions):
        value = np.asarray(action)
        if value.shape != shape or not np.can_cast(value.dtype, dtype, "safe"):
            raise ValueError(
                f"episode action {i} is {value.dtype}{list(value.shape)}, not the env's {dtype}{list(shape)}"
            )
        out[i] = value
    return out


def write_host_state(
    path: Path, updates: int, slots: list[SeedSlot], info: EnvInfo, next_actions: np.ndarray | None = None
) -> None:
    """Save every slot (sealed, verified on write): arrays in the archive, numbers in its JSON.
    ``next_actions``: the policy's actions for the next env step where the last call already made
    them (docs/online.md#one-call-per-env-step), so a resumed run takes them instead of acting in a
    program of its own, whose rounding can differ in the last bit.

    Every array is built from the env's declared shapes and dtypes (:func:`action_spec`,
    :func:`observation_spec`), so a slot in any phase (an episode just reset with no action yet,
    mid-episode, an empty replay) saves, and :func:`read_host_state` gives back the same values,
    dtypes and shapes."""
    action_shape, action_dtype = action_spec(info)
    obs_shape, obs_dtype = observation_spec(info)
    arrays: dict[str, np.ndarray] = {}
    seeds = []
    for i, slot in enumerate(slots):
        prefix = f"s{i}."
        for name, value in {**slot.replay.store.state_arrays(), **slot.replay.priority_arrays()}.items():
            arrays[prefix + name] = value
        obs = np.asarray(slot.obs)
        if (obs.shape, obs.dtype) != (obs_shape, obs_dtype):
            raise ValueError(
                f"seed {slot.seed}'s observation is {obs.dtype}{list(obs.shape)}, not {obs_dtype}{list(obs_shape)}"
            )
        arrays[prefix + "obs_now"] = obs
        arrays[prefix + "episode_actions"] = episode_actions_array(slot.actions, action_shape, action_dtype)
        seeds.append(
            {
                "seed": slot.seed,
                "rng": slot.rng.bit_generator.state,
                "episode": slot.episode,
                "episode_return": slot.episode_return,
                "episode_length": slot.episode_length,
                "last_result": slot.last_result,
                "env_carry": slot.env_carry,
            }
        )
    meta = {
        "updates": updates,
        "slots": seeds,
        # What the episode actions are, written out: the archive describes itself.
        "episode_actions": {"dtype": action_dtype.str, "shape": list(action_shape)},
    }
    if next_actions is not None:
        arrays["next_actions"] = np.asarray(next_actions)
    write_sealed_arrays(path, arrays, meta)


def read_host_state(path: Path, cfg: OnlineConfig, info: EnvInfo) -> dict[str, Any]:
    """``{"updates": int, "slots": [SeedSlot fields], "next_actions": array or None}`` from a sealed
    archive, every value checked against the run's config: :class:`DamagedFile` (one line) for
    anything that does not fit."""
    arrays, meta = read_sealed_arrays(path)
    try:
        return _decode(arrays, meta, cfg, info)
    except (KeyError, TypeError, ValueError, OverflowError, IndexError) as err:
        raise DamagedFile(f"{path} does not hold this run's host state ({_reason(err)})") from None


def _reason(err: Exception) -> str:
    return f"missing {err}" if isinstance(err, KeyError) else (str(err).splitlines() or [type(err).__name__])[0]


def _decode(arrays: dict[str, np.ndarray], meta: dict[str, Any], cfg: OnlineConfig, info: EnvInfo) -> dict[str, Any]:
    updates, saved = meta["updates"], meta["slots"]
    if type(updates) is not int or updates < 0 or not isinstance(saved, list):
        raise ValueError("updates or slots are malformed")
    seeds = cfg.seed_list
    if [entry.get("seed") if isinstance(entry, dict) else None for entry in saved] != seeds:
        raise ValueError(f"its seeds are not the run's {seeds}")
    continuous = info.spaces.action_kind == "continuous"
    action_shape, action_dtype = action_spec(info)
    declared = meta.get("episode_actions")  # absent from archives of older versions
    if declared is not None and declared != {"dtype": action_dtype.str, "shape": list(action_shape)}:
        raise ValueError(f"its episode actions are {declared}, not this env's")
    slots = []
    for i, entry in enumerate(saved):
        fresh = new_slot(cfg, info, entry["seed"])
        prefix = f"s{i}."
        mine = {name[len(prefix) :]: value for name, value in arrays.items() if name.startswith(prefix)}
        fresh.replay.store.load_state_arrays(mine)
        priorities = {
            name: mine[name] for name in ("priority_tree", "max_priority", "synced_rows", "evicted") if name in mine
        }
        fresh.replay.load_priority_arrays(priorities)
        obs = mine["obs_now"]
        obs_shape, obs_dtype = observation_spec(info)
        if (obs.dtype, obs.shape) != (obs_dtype, obs_shape):
            raise ValueError(f"its observation {obs.dtype}{list(obs.shape)} does not fit the env")
        actions = mine["episode_actions"]
        if actions.dtype != action_dtype or actions.ndim != 1 + len(action_shape) or actions.shape[1:] != action_shape:
            raise ValueError("its episode actions do not fit the env")
        # Each action as the loop holds it: a float32 [action_size] array, or a Python int.
        episode_actions: list = [a.copy() for a in actions] if continuous else [int(a) for a in actions]
        rng = np.random.Generator(np.random.PCG64())
        state = entry["rng"]
        if not isinstance(state, dict) or state.get("bit_generator") != BIT_GENERATOR:
            raise ValueError(f"its RNG state is not a {BIT_GENERATOR} state")
        rng.bit_generator.state = state
        episode, length, ret, last = (
            entry["episode"],
            entry["episode_length"],
            entry["episode_return"],
            entry["last_result"],
        )
        if type(episode) is not int or type(length) is not int or episode < 0 or length != len(episode_actions):
            raise ValueError("its episode counters are malformed")
        if type(ret) not in (int, float) or (last is not None and type(last) not in (int, float)):
            raise ValueError("its returns are malformed")
        carry = entry.get("env_carry")  # absent from archives of older versions
        if carry is not None and type(carry) is not int:
            raise ValueError("its env carry is malformed")
        slots.append(
            {
                "seed": fresh.seed,
                "replay": fresh.replay,
                "rng": rng,
                "episode": episode,
                "actions": episode_actions,
                "obs": obs,
                "episode_return": float(ret),
                "episode_length": length,
                "last_result": None if last is None else float(last),
                "env_carry": carry,
            }
        )
    return {"updates": updates, "slots": slots, "next_actions": _next_actions(arrays.get("next_actions"), seeds, info)}


def _next_actions(value: np.ndarray | None, seeds: list[int], info: EnvInfo) -> np.ndarray | None:
    """The saved actions for the next env step, checked: one per seed, of the policy's kind
    (a float32 vector of the action size, or an integer action index). Absent from archives of
    older versions and from checkpoints where the loop had not acted ahead."""
    if value is None:
        return None
    if info.spaces.action_kind == "continuous":
        fits = value.dtype == np.float32 and value.shape == (len(seeds), info.spaces.action_size)
    else:
        fits = value.dtype.kind in "iu" and value.shape == (len(seeds),)
    if not fits:
        raise ValueError(f"its next actions {value.dtype}{list(value.shape)} do not fit the env and seeds")
    return value


def read_legacy_host_state(path: Path, trust_pickles: bool) -> dict[str, Any]:
    """A pickled host state of an older version: refused in one line unless the user vouches for
    the run directory (``--trust-pickles``), since unpickling runs whatever code the file names."""
    if not trust_pickles:
        raise UntrustedPickle(
            f"{path} is a pickle (a host state saved by an older version); reading it can run any code it "
            "holds: resume with --trust-pickles only if you made this run directory or trust its source"
        )
    host = read_sealed_pickle(path)
    for saved in host["slots"]:
        saved.pop("env", None)
    return host
