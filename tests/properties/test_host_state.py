"""An online checkpoint's host side round-trips exactly, whatever phase each seed is in.

A checkpoint can land anywhere (docs/online.md#resume): on an episode boundary (the slot was just
reset and holds no action yet), mid-episode, before the replay holds a transition, with each seed
in a different phase, with discrete or continuous actions, vector, image or frame observations,
uniform or prioritised replay, a last step that terminated or was truncated. Generated slots in
such states are saved with :func:`write_host_state` and read back with :func:`read_host_state`:
every array must come back with its dtype, shape and bytes, every number and RNG state equal, and
the restored replay must then sample and grow exactly as the original does. The windowed replay
must also always find a transition to sample (a window of 2 rows once held none and spun forever).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offline_gitd.data.episode_store import EpisodeStore
from offline_gitd.envs.make import SpaceInfo
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.env_info import EnvInfo
from offline_gitd.online.host_state import (
    SeedSlot,
    action_spec,
    episode_actions_array,
    new_slot,
    observation_spec,
    read_host_state,
    write_host_state,
)
from offline_gitd.online.replay import WindowedReplay
from offline_gitd.rundir.seals import DamagedFile, read_sealed_arrays, write_sealed_arrays
from tests.properties.checks import share

# Kinds of env a run can have: (domain, observation shape, action kind). Shapes are small so that
# hundreds of examples stay quick; the code paths are those of the full-size envs.
ENV_KINDS = {
    "vector-discrete": ("gym", (4,), "discrete"),  # CartPole, MountainCar
    "vector-continuous": ("continuous", (3,), "continuous"),  # Pendulum, MuJoCo
    "image-discrete": ("minatar", (5, 5, 3), "discrete"),  # MinAtar boards, whole uint8 images
    "frames-discrete": ("atari", (6, 6, 4), "discrete"),  # Atari: single frames, stacked at sampling
}
# How an episode in the replay ended; "open" is the running episode (no end yet).
ENDS = ("terminated", "truncated", "both", "open")


def env_info(kind: str, action_size: int) -> EnvInfo:
    domain, obs_shape, action_kind = ENV_KINDS[kind]
    is_uint8 = domain in ("minatar", "atari")
    bounds = (np.full(action_size, -2.0, np.float32), np.full(action_size, 2.0, np.float32))
    spaces = SpaceInfo(
        obs_shape,
        np.dtype(np.uint8 if is_uint8 else np.float32),
        action_kind,
        action_size,
        bounds if action_kind == "continuous" else None,
    )
    return EnvInfo(f"test/{kind}", domain, "gym", kind, spaces, images=domain == "minatar")


def run_config(seeds: int, capacity: int, per: bool, n_step: int) -> OnlineConfig:
    return OnlineConfig(
        algo="dqn",
        env="test",
        seeds=f"0-{seeds - 1}",
        replay_size=capacity,
        per=per,
        n_step=n_step,
        gamma=0.9,
        per_alpha=0.6,
        per_beta=0.4,
    )


def random_obs(rng: np.random.Generator, info: EnvInfo) -> np.ndarray:
    """Any bit pattern (NaN payloads, -0.0, denormals included): equality is checked bytewise."""
    shape, dtype = observation_spec(info)
    return rng.integers(0, 256, (*shape, dtype.itemsize), np.uint8).view(dtype).reshape(shape)


def random_action(rng: np.random.Generator, info: EnvInfo) -> Any:
    """An action as the loop takes it: a Python int, or a float32 [action_size] array."""
    if info.spaces.action_kind == "discrete":
        return int(rng.integers(info.spaces.action_size))
    return rng.uniform(-2.0, 2.0, info.spaces.action_size).astype(np.float32)


def row_of(info: EnvInfo, obs: np.ndarray) -> np.ndarray:
    """What the loop stores per step (loop._row): the newest frame of an Atari stack."""
    return obs[..., -1] if info.frames else obs


@st.composite
def slot_plans(draw: st.DrawFn) -> dict[str, Any]:
    """One seed's history: finished episodes (length, end) and the running episode's length."""
    episodes = draw(
        st.lists(st.tuples(st.integers(1, 5), st.sampled_from(ENDS[:3])), max_size=4),
    )
    return {
        "episodes": episodes,
        "running": draw(st.integers(0, 5)),  # 0: just reset, the boundary a checkpoint can land on
        "seed_bits": draw(st.integers(0, 2**32 - 1)),
        "draws": draw(st.integers(0, 5)),  # RNG draws beyond the steps
        "priorities": draw(st.booleans()),  # write |TD| priorities back (prioritised replay)
        "episode": draw(st.integers(0, 10**6)),
        "last_result": draw(st.none() | st.floats(allow_nan=False, allow_infinity=False, width=32)),
        "env_carry": draw(st.none() | st.integers(0, 5)),  # MinAtar's last action, None for other envs
    }


@st.composite
def runs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(ENV_KINDS)))
    return {
        "kind": kind,
        "action_size": draw(st.integers(1, 3)) if ENV_KINDS[kind][2] == "continuous" else draw(st.integers(2, 6)),
        "capacity": draw(st.integers(2, 12)),
        "per": draw(st.booleans()),
        "n_step": draw(st.integers(1, 3)),
        "updates": draw(st.integers(0, 2**40)),
        "slots": draw(st.lists(slot_plans(), min_size=1, max_size=3)),
    }


def step_slot(slot: SeedSlot, info: EnvInfo, rng: np.random.Generator, terminated: bool, truncated: bool) -> None:
    """One env step as the loop takes it (loop.OnlineRun._env_step), with a made-up env."""
    action = random_action(rng, info)
    next_obs = random_obs(rng, info)
    reward = float(rng.normal())
    slot.replay.store.add(row_of(info, slot.obs), action, reward, terminated, truncated, row_of(info, next_obs))
    slot.actions.append(action)
    slot.episode_return += reward
    slot.episode_length += 1
    slot.obs = next_obs
    if terminated or truncated:
        slot.episode += 1
        slot.obs, slot.actions, slot.episode_return, slot.episode_length = random_obs(rng, info), [], 0.0, 0


def build_slot(cfg: OnlineConfig, info: EnvInfo, seed: int, plan: dict[str, Any]) -> SeedSlot:
    """A slot that lived through ``plan``: its finished episodes, then its running one."""
    rng = np.random.default_rng(plan["seed_bits"])
    slot = new_slot(cfg, info, seed)
    slot.episode = plan["episode"]
    slot.obs = random_obs(rng, info)
    for length, end in plan["episodes"]:
        for t in range(length):
            last = t == length - 1
            step_slot(slot, info, rng, last and end in ("terminated", "both"), last and end in ("truncated", "both"))
    for _ in range(plan["running"]):
        step_slot(slot, info, rng, False, False)
    replay = slot.replay
    if replay.store.num_transitions:
        rows, _ = replay.sample_rows(4, slot.rng)  # syncs and evicts priorities, as training does
        if replay.prioritized and plan["priorities"]:
            replay.update_priorities(rows, rng.normal(size=len(rows)))
    for _ in range(plan["draws"]):
        slot.rng.random()
    slot.last_result = plan["last_result"]
    slot.env_carry = plan["env_carry"]
    return slot


def assert_same_array(a: np.ndarray, b: np.ndarray, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{what}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
    assert a.tobytes() == b.tobytes(), f"{what}: bytes differ"


def assert_same_slot(saved: SeedSlot, loaded: dict[str, Any]) -> None:
    """Every field of the slot, bit for bit (actions one by one, each with its type)."""
    assert loaded["seed"] == saved.seed and loaded["episode"] == saved.episode
    assert loaded["episode_length"] == saved.episode_length == len(saved.actions)
    assert np.float64(loaded["episode_return"]).tobytes() == np.float64(saved.episode_return).tobytes()
    assert loaded["last_result"] == saved.last_result
    assert loaded["env_carry"] == saved.env_carry and type(loaded["env_carry"]) is type(saved.env_carry)
    assert_same_array(loaded["obs"], saved.obs, "obs")
    assert len(loaded["actions"]) == len(saved.actions)
    for mine, theirs in zip(loaded["actions"], saved.actions, strict=True):
        assert type(mine) is type(theirs)
        if isinstance(theirs, np.ndarray):
            assert_same_array(mine, theirs, "episode action")
        else:
            assert mine == theirs
    assert loaded["rng"].bit_generator.state == saved.rng.bit_generator.state
    replay, original = loaded["replay"], saved.replay
    for name, value in original.store.state_arrays().items():
        assert_same_array(replay.store.state_arrays()[name], value, f"replay {name}")
    mine_priorities, their_priorities = replay.priority_arrays(), original.priority_arrays()
    assert mine_priorities.keys() == their_priorities.keys()
    for name, value in their_priorities.items():
        assert_same_array(mine_priorities[name], value, f"replay {name}")


def assert_same_future(saved: SeedSlot, loaded: dict[str, Any], info: EnvInfo, seed_bits: int) -> None:
    """The restored replay goes on as the original: same batches drawn, same rows after more steps."""
    restored = SeedSlot(**loaded)
    for slot in (saved, restored):
        rng = np.random.default_rng([seed_bits, 7])  # the same made-up env for both
        for t in range(4):
            step_slot(slot, info, rng, False, t == 3)
    replays = [saved.replay, restored.replay]
    for _ in range(2):
        batches = []
        for slot in (saved, restored):
            batch, rows = slot.replay.sample_with_rows(5, slot.rng)
            if slot.replay.prioritized:
                slot.replay.update_priorities(rows, np.arange(len(rows), dtype=np.float64))
            batches.append(batch)
        for field, mine, theirs in zip(batches[0]._fields, batches[1], batches[0], strict=True):
            assert_same_array(mine, theirs, f"sampled {field}")
    for name, value in replays[0].store.state_arrays().items():
        assert_same_array(replays[1].store.state_arrays()[name], value, f"replay {name} after more steps")


@share(0.1)
@given(runs())
def test_host_state_round_trips_bit_for_bit(tmp_path_factory: pytest.TempPathFactory, run: dict[str, Any]) -> None:
    info = env_info(run["kind"], run["action_size"])
    cfg = run_config(len(run["slots"]), run["capacity"], run["per"], run["n_step"])
    slots = [build_slot(cfg, info, seed, plan) for seed, plan in zip(cfg.seed_list, run["slots"], strict=True)]
    path = tmp_path_factory.mktemp("host") / "1.npz"
    write_host_state(path, run["updates"], slots, info)
    host = read_host_state(path, cfg, info)
    assert host["updates"] == run["updates"]
    for saved, loaded in zip(slots, host["slots"], strict=True):
        assert_same_slot(saved, loaded)
    # Saving what was read gives the same archive: nothing is lost or reshaped on the way.
    again = path.with_name("2.npz")
    write_host_state(again, host["updates"], [SeedSlot(**loaded) for loaded in host["slots"]], info)
    (arrays_a, meta_a), (arrays_b, meta_b) = read_sealed_arrays(path), read_sealed_arrays(again)
    assert meta_a == meta_b and arrays_a.keys() == arrays_b.keys()
    for name in arrays_a:
        assert_same_array(arrays_b[name], arrays_a[name], name)
    for saved, loaded, plan in zip(slots, host["slots"], run["slots"], strict=True):
        assert_same_future(saved, loaded, info, plan["seed_bits"])


def slots_at_reset(cfg: OnlineConfig, info: EnvInfo, rng: np.random.Generator) -> list[SeedSlot]:
    """A new slot per seed of ``cfg``, each holding a first observation and nothing else."""
    slots = [new_slot(cfg, info, seed) for seed in cfg.seed_list]
    for slot in slots:
        slot.obs = random_obs(rng, info)
    return slots


@pytest.mark.parametrize("kind", sorted(ENV_KINDS))
def test_a_just_reset_slot_saves_an_empty_array_of_the_envs_kind(tmp_path: Path, kind: str) -> None:
    """The crash of issue 38 in its smallest form: a slot whose episode has just ended (Pendulum's
    every 200 steps) holds no action; its archive member is ``[0, *shape]`` of the action dtype."""
    info = env_info(kind, 2)
    cfg = run_config(2, 10, False, 1)
    rng = np.random.default_rng(0)
    slots = slots_at_reset(cfg, info, rng)
    for t in range(3):  # seed 0 ends an episode on the checkpoint's step, seed 1 is mid-episode
        step_slot(slots[0], info, rng, False, t == 2)
        step_slot(slots[1], info, rng, False, False)
    path = tmp_path / "3.npz"
    write_host_state(path, 0, slots, info)
    arrays, meta = read_sealed_arrays(path)
    shape, dtype = action_spec(info)
    assert (arrays["s0.episode_actions"].dtype, arrays["s0.episode_actions"].shape) == (dtype, (0, *shape))
    assert (arrays["s1.episode_actions"].dtype, arrays["s1.episode_actions"].shape) == (dtype, (3, *shape))
    assert meta["episode_actions"] == {"dtype": dtype.str, "shape": list(shape)}
    host = read_host_state(path, cfg, info)
    assert host["slots"][0]["actions"] == [] and len(host["slots"][1]["actions"]) == 3


def test_an_empty_replay_round_trips(tmp_path: Path) -> None:
    info = env_info("vector-continuous", 1)
    cfg = run_config(1, 10, True, 3)
    slot = new_slot(cfg, info, 0)
    slot.obs = random_obs(np.random.default_rng(1), info)
    write_host_state(tmp_path / "0.npz", 0, [slot], info)
    (loaded,) = read_host_state(tmp_path / "0.npz", cfg, info)["slots"]
    assert_same_slot(slot, loaded)
    assert loaded["replay"].store.num_rows == 0


def test_archives_of_older_versions_without_the_action_spec_still_read(tmp_path: Path) -> None:
    info = env_info("vector-continuous", 2)
    cfg = run_config(1, 10, False, 1)
    plan = {"episodes": [(3, "truncated")], "running": 2, "seed_bits": 5, "draws": 1, "priorities": False}
    slot = build_slot(cfg, info, 0, {**plan, "episode": 1, "last_result": -3.5, "env_carry": None})
    path = tmp_path / "5.npz"
    write_host_state(path, 5, [slot], info)
    arrays, meta = read_sealed_arrays(path)
    del meta["episode_actions"]
    for entry in meta["slots"]:
        del entry["env_carry"]
    write_sealed_arrays(path, arrays, meta)
    assert_same_slot(slot, read_host_state(path, cfg, info)["slots"][0])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a, m: m.update(episode_actions={"dtype": "<f8", "shape": [2]}), "episode actions are"),
        (lambda a, m: a.update({"s0.episode_actions": a["s0.episode_actions"].astype(np.float64)}), "do not fit"),
        (lambda a, m: a.update({"s0.episode_actions": a["s0.episode_actions"][:, :1]}), "do not fit"),
        (lambda a, m: a.update({"s0.episode_actions": np.zeros(2, np.float32)}), "do not fit"),
    ],
)
def test_episode_actions_that_do_not_fit_the_env_are_refused(tmp_path: Path, change, message: str) -> None:
    info = env_info("vector-continuous", 2)
    cfg = run_config(1, 10, False, 1)
    slot = new_slot(cfg, info, 0)
    rng = np.random.default_rng(2)
    slot.obs = random_obs(rng, info)
    step_slot(slot, info, rng, False, False)
    step_slot(slot, info, rng, False, False)
    path = tmp_path / "2.npz"
    write_host_state(path, 0, [slot], info)
    arrays, meta = read_sealed_arrays(path)
    change(arrays, meta)
    write_sealed_arrays(path, arrays, meta)
    with pytest.raises(DamagedFile, match=message):
        read_host_state(path, cfg, info)


@pytest.mark.parametrize("kind", ["vector-continuous", "vector-discrete"])
def test_the_actions_chosen_ahead_round_trip_and_are_absent_where_none_were(tmp_path: Path, kind: str) -> None:
    """A run stopped off the checkpoint grid keeps the next step's actions (docs/online.md#one-call-per-env-step)."""
    info = env_info(kind, 2)
    cfg = run_config(2, 10, False, 1)
    rng = np.random.default_rng(3)
    slots = slots_at_reset(cfg, info, rng)
    ahead = rng.uniform(-1, 1, (2, 2)).astype(np.float32) if kind == "vector-continuous" else np.array([1, 0], np.int32)
    write_host_state(tmp_path / "7.npz", 0, slots, info, ahead)
    loaded = read_host_state(tmp_path / "7.npz", cfg, info)["next_actions"]
    assert (loaded.dtype, loaded.tobytes()) == (ahead.dtype, ahead.tobytes())
    write_host_state(tmp_path / "8.npz", 0, slots, info)
    assert read_host_state(tmp_path / "8.npz", cfg, info)["next_actions"] is None


@pytest.mark.parametrize(
    ("kind", "ahead"),
    [
        ("vector-continuous", np.zeros((2, 2), np.float64)),  # the policy's actions are float32
        ("vector-continuous", np.zeros((3, 2), np.float32)),  # one per seed
        ("vector-continuous", np.zeros((2, 3), np.float32)),  # of the action size
        ("vector-discrete", np.zeros(2, np.float32)),  # action indices
        ("vector-discrete", np.zeros((2, 1), np.int32)),
    ],
)
def test_actions_chosen_ahead_that_do_not_fit_are_refused(tmp_path: Path, kind: str, ahead: np.ndarray) -> None:
    info = env_info(kind, 2)
    cfg = run_config(2, 10, False, 1)
    rng = np.random.default_rng(4)
    slots = slots_at_reset(cfg, info, rng)
    write_host_state(tmp_path / "7.npz", 0, slots, info, ahead)
    with pytest.raises(DamagedFile, match="next actions"):
        read_host_state(tmp_path / "7.npz", cfg, info)


@pytest.mark.parametrize(
    ("actions", "shape", "dtype"),
    [
        ([np.zeros(2, np.float64)], (2,), np.float32),  # would lose bits: the env replays these
        ([np.zeros(3, np.float32)], (2,), np.float32),
        ([1.5], (), np.int64),
    ],
)
def test_an_action_the_archive_cannot_hold_exactly_is_refused_on_write(actions, shape, dtype) -> None:
    with pytest.raises(ValueError, match="not the env's"):
        episode_actions_array(actions, shape, np.dtype(dtype))


@share(0.2)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.sampled_from(ENDS[:3])), max_size=5),
    st.integers(0, 3),
    st.integers(2, 6),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_the_sampling_window_always_holds_a_transition(
    episodes: list[tuple[int, str]], running: int, capacity: int, per: bool, seed: int
) -> None:
    """Every row drawn starts a transition, whatever the window's size and where episodes end;
    the window is the newest ``capacity`` rows unless those hold no transition at all."""
    store = EpisodeStore((2,), np.float32)
    replay = WindowedReplay(store, capacity=capacity, prioritized=per)
    obs = np.zeros(2, np.float32)
    for length, end in episodes:
        for t in range(length):
            last = t == length - 1
            store.add(obs, 0, 1.0, last and end in ("terminated", "both"), last and end in ("truncated", "both"), obs)
    for _ in range(running):
        store.add(obs, 0, 1.0, False)
    if store.num_transitions == 0:
        assert store.last_transition_row() == -1
        return
    rows, weights = replay.sample_rows(8, np.random.default_rng(seed))
    _, ends = store.locate(rows)
    assert store.starts_transition(rows, ends).all() and np.isfinite(weights).all()
    assert rows.min() >= replay.low
    every = np.arange(store.num_rows)
    assert store.last_transition_row() == every[store.starts_transition(every, store.locate(every)[1])].max()
    if replay.low < max(0, store.num_rows - capacity):  # reached back: the newest rows hold none
        window = np.arange(store.num_rows - capacity, store.num_rows)
        assert not store.starts_transition(window, store.locate(window)[1]).any()
