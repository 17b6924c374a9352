"""Dataset id -> what the offline loop needs (:class:`OfflineData`), wherever the data came from.

``rlu-atari:Game/run[:checkpoints]`` reads the decoded cache (decoding downloaded shards first if
needed) keeping the first ``fraction`` of each checkpoint, the paper's protocol; evaluation runs
on the real ROM with the Machado et al. protocol. ``minari:ID`` reads a local Minari dataset,
keeping the first ``fraction`` of each checkpoint when the dataset records checkpoint boundaries (a
DQN-replay dataset made by ``offline_gitd collect --policy dqn --checkpoint-every N``, the RL
Unplugged protocol), else its first ``fraction`` of episodes; evaluation runs on
``recover_environment(eval_env=True)``. Image observations stay images (docs/minatar.md); a
MinAtar dataset selects the ``minatar`` domain.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from offline_gitd.data.cache import build_rlu_cache, load_rlu_store
from offline_gitd.data.minari_checkpoints import checkpoint_episodes
from offline_gitd.data.paths import data_dir_flag, data_root, minari_datasets_dir, rlu_raw_dir, use_minari_root
from offline_gitd.data.registry import MinariId, RluAtariId, format_checkpoints, load_rlu_registry, parse_dataset_id
from offline_gitd.data.replay import Replay, Sampler
from offline_gitd.envs.images import MINATAR_PREFIX, as_uint8_images, register_minatar
from offline_gitd.envs.make import SpaceInfo, describe_spaces, env_profile, make_env
from offline_gitd.errors import UsageError

if TYPE_CHECKING:
    from minari import MinariDataset


class DatasetRequest(Protocol):
    """The fields of a (resolved) offline config that say which data to read and how."""

    dataset: str
    data_dir: str | None
    fraction: float
    clip_rewards: bool
    n_step: int
    gamma: float
    horizon: int | None


@dataclass(frozen=True)
class OfflineData:
    """What the offline loop needs from a dataset, wherever it came from (docs/architecture.md#data-flows-one-way)."""

    domain: str  # atari | minatar | gym | continuous: selects the paper's defaults
    replay: Sampler  # .sample(batch_size, rng) -> Batch, .sample_chunk(batch_size, count, rng)
    make_eval_env: Callable[[int], Any]  # seed -> gymnasium.Env for evaluation
    spaces: SpaceInfo
    suite: str
    env_name: str
    description: str
    # The data's content digest (offline_gitd.data.digest): part of a run's identity, set by the
    # training command (docs/leaderboard.md#what-made-a-row); None where it was not taken.
    data_sha256: str | None = None


# RL Unplugged's network input: 4 stacked 84x84 frames.
RLU_OBS_SHAPE = (84, 84, 4)


@dataclass(frozen=True)
class OpenedDataset:
    """A dataset id opened once, before any of its transitions is read: what the config is resolved
    with (:attr:`profile`) and what :func:`open_offline_data` then reads the transitions from, so
    that a run opens its Minari dataset once (RL Unplugged's ids say everything themselves)."""

    dataset: str
    data_dir: str | None
    parsed: RluAtariId | MinariId
    domain: str  # atari | minatar | gym | continuous: the domain whose defaults apply
    obs_shape: tuple[int, ...]  # one network input (which picks the torso when none is given)
    minari: MinariDataset | None = None  # the loaded Minari dataset (None: RL Unplugged)
    spaces: SpaceInfo | None = None  # its evaluation env's spaces (None: RL Unplugged)

    @property
    def profile(self) -> tuple[str, tuple[int, ...]]:
        return self.domain, self.obs_shape


def open_dataset(dataset: str, data_dir: str | None = None) -> OpenedDataset:
    """Open the dataset ``dataset`` names: its Minari metadata and evaluation env (its episodes are
    read later, by :func:`open_offline_data`); ``UsageError`` for a bad id or a missing dataset."""
    parsed = parse_dataset_id(dataset)
    if isinstance(parsed, RluAtariId):
        return OpenedDataset(dataset, data_dir, parsed, "atari", RLU_OBS_SHAPE)
    minari_dataset = _load_minari(parsed.dataset_id, data_dir)
    env = _minari_env(minari_dataset)
    try:
        profile = env_profile(env, _env_id(minari_dataset))
    finally:
        env.close()
    return OpenedDataset(dataset, data_dir, parsed, profile.domain, profile.input_shape, minari_dataset, profile.spaces)


def dataset_profile(dataset: str, data_dir: str | None = None) -> tuple[str, tuple[int, ...]]:
    """The domain whose defaults apply and the shape of one network input (which picks the
    torso when none is given), known before any data is read where the id tells."""
    return open_dataset(dataset, data_dir).profile


def _env_id(dataset: MinariDataset) -> str:
    spec = dataset.spec.env_spec
    return spec.id if spec is not None else ""


def open_offline_data(cfg: DatasetRequest, opened: OpenedDataset | None = None) -> OfflineData:
    """Load the dataset named by the (resolved) config into a replay, with its evaluation env;
    ``opened``: the same dataset already opened (:func:`open_dataset`), not opened again."""
    if opened is None or (opened.dataset, opened.data_dir) != (cfg.dataset, cfg.data_dir):
        opened = open_dataset(cfg.dataset, cfg.data_dir)
    if isinstance(opened.parsed, RluAtariId):
        return _open_rlu(cfg, opened.parsed)
    return _open_minari(cfg, opened)


def _open_rlu(cfg: DatasetRequest, parsed: RluAtariId) -> OfflineData:
    registry = load_rlu_registry()
    checkpoints = parsed.checkpoints or tuple(range(registry.num_shards(parsed.game)))
    raw = rlu_raw_dir(data_root(cfg.data_dir), "atari_episodes_ordered", parsed.game)
    try:
        build_rlu_cache(cfg.data_dir, parsed.game, parsed.run, checkpoints, fraction=cfg.fraction)
    except FileNotFoundError as err:
        raise UsageError(
            f"{err}; fetch it first: offline_gitd fetch rlu-atari --game {parsed.game} --run {parsed.run} "
            f"--checkpoints {format_checkpoints(checkpoints)}{data_dir_flag(cfg.data_dir)} (looked in {raw})"
        ) from None
    store = load_rlu_store(
        cfg.data_dir,
        parsed.game,
        parsed.run,
        checkpoints,
        fraction=cfg.fraction,
        reward="clipped" if cfg.clip_rewards else "unclipped",
    )
    replay = Replay(store, stack=4, n_step=cfg.n_step, gamma=cfg.gamma)
    make_eval_env, spaces = _rlu_eval_env(cfg, parsed)
    if int(np.max(store.actions)) >= spaces.action_size:
        raise UsageError(
            f"{parsed} has action {int(np.max(store.actions))} but {parsed.game}'s minimal action set has "
            f"{spaces.action_size}: the data and the environment disagree"
        )
    return OfflineData("atari", replay, make_eval_env, spaces, "atari", parsed.game, str(parsed))


def eval_env_factory(cfg: DatasetRequest, **make_kw: Any) -> tuple[Callable[[int], Any], SpaceInfo]:
    """The evaluation env of the (resolved) config's dataset, ``seed -> env``, and its spaces,
    without reading the data (a trained run is evaluated from this). ``make_kw`` reaches the env's
    constructor (``render_mode="rgb_array"`` to film it)."""
    parsed = parse_dataset_id(cfg.dataset)
    if isinstance(parsed, RluAtariId):
        return _rlu_eval_env(cfg, parsed, **make_kw)
    return _minari_eval_env(cfg, _load_minari(parsed.dataset_id, cfg.data_dir), **make_kw)


def _rlu_eval_env(cfg: DatasetRequest, parsed: RluAtariId, **make_kw: Any) -> tuple[Callable[[int], Any], SpaceInfo]:
    def make_eval_env(seed: int) -> Any:
        return make_env(f"atari:{parsed.game}", seed, max_steps=cfg.horizon, **make_kw)

    probe = make_eval_env(0)
    spaces = describe_spaces(probe)
    probe.close()
    return make_eval_env, spaces


def _minari_eval_env(
    cfg: DatasetRequest, dataset: MinariDataset, spaces: SpaceInfo | None = None, **make_kw: Any
) -> tuple[Callable[[int], Any], SpaceInfo]:
    """The evaluation env ``seed -> env`` and its spaces (``spaces``: already known, no probe env)."""
    env_kwargs = {"max_episode_steps": cfg.horizon} if cfg.horizon else {}

    def make_eval_env(seed: int) -> Any:
        env = _minari_env(dataset, **env_kwargs, **make_kw)
        env.reset(seed=seed)
        return env

    if spaces is None:
        probe = _minari_env(dataset, **env_kwargs)
        spaces = describe_spaces(probe)
        probe.close()
    return make_eval_env, spaces


def _load_minari(dataset_id: str, data_dir: str | None = None) -> MinariDataset:
    import minari

    root = use_minari_root(data_dir)
    missing = f"not found locally at {root / dataset_id}"
    try:
        # minari creates its root folder while looking: a missing dataset must leave no trace.
        if (root / dataset_id).is_dir():
            problem = episode_count_problem(root / dataset_id)
            if problem:
                raise damaged_minari(dataset_id, root, ValueError(problem))
            return minari.load_dataset(dataset_id)
    except UsageError:
        raise
    except (FileNotFoundError, ValueError) as err:
        missing = str(err).splitlines()[0]
    except Exception as err:  # minari and h5py raise plain errors (even AssertionError) on damage
        raise damaged_minari(dataset_id, root, err) from None
    raise UsageError(
        f"no local Minari dataset {dataset_id!r} ({missing}); "
        f"get it with: offline_gitd fetch minari {dataset_id}{data_dir_flag(data_dir)}  (or make one: "
        f"offline_gitd collect ENV_ID --steps N --out {dataset_id}{data_dir_flag(data_dir)})"
    )


def episode_count_problem(dataset_dir: Path) -> str | None:
    """Why the metadata's ``total_episodes`` cannot be trusted, or ``None``: minari sizes arrays by
    it before reading an episode, so a count that is not the number of episodes in the HDF5 file
    (``10**12`` would be an 8 TiB array) is refused first."""
    import json

    import h5py

    meta_path, data_path = dataset_dir / "data" / "metadata.json", dataset_dir / "data" / "main_data.hdf5"
    if not meta_path.is_file() or not data_path.is_file():
        return None  # minari says what is missing
    claimed = json.loads(meta_path.read_text()).get("total_episodes")
    with h5py.File(data_path, "r") as data:
        present = sum(1 for name in data if name.startswith("episode_"))
    if claimed != present:
        return f"metadata says total_episodes = {claimed!r} but the data holds {present} episodes"
    return None


def damaged_minari(dataset_id: str, root: Path, err: BaseException) -> UsageError:
    """One line for an unreadable Minari HDF5 file: which dataset, where, and how to replace it
    (``fetch minari`` keeps a folder that exists, so it has to go first)."""
    reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return UsageError(
        f"Minari dataset {dataset_id!r} is damaged ({reason}); delete {root / dataset_id} and fetch it again: "
        f"offline_gitd fetch minari {dataset_id}  (or record it again: offline_gitd collect ... --overwrite)"
    )


# Wrappers a dataset's env spec may name: gymnasium's own, and this package's (MinAtar's bool boards
# as uint8, offline_gitd.envs.images).
TRUSTED_WRAPPERS = ("gymnasium.wrappers", "offline_gitd.envs.")


def check_env_entry_points(dataset: Any) -> None:
    """Refuse a Minari dataset whose env specs name code other than the registered env's.

    ``recover_environment`` imports and calls the ``entry_point`` (and every wrapper's) that the
    dataset's metadata names: a dataset from elsewhere could name ``subprocess:getoutput``. Only the
    entry point gymnasium has registered for the spec's id, and gymnasium's own wrappers, are
    accepted (docs/bounds.md#run-directories-are-data)."""
    import gymnasium as gym

    where = f"Minari dataset {dataset.id!r}"
    specs = []
    text = dataset.storage.metadata.get("eval_env_spec")
    if text is not None:
        try:
            specs.append(json.loads(text))
        except (TypeError, ValueError):
            raise UsageError(f"{where} has a malformed eval_env_spec") from None
    if dataset.env_spec is not None:
        spec = dataset.env_spec
        wrappers = [{"entry_point": w.entry_point} for w in spec.additional_wrappers]
        specs.append({"id": spec.id, "entry_point": spec.entry_point, "additional_wrappers": wrappers})
    for spec in specs:
        env_id = spec.get("id") if isinstance(spec, dict) else None
        if isinstance(env_id, str) and env_id.startswith("ALE/"):
            import ale_py

            gym.register_envs(ale_py)
        registered = gym.registry.get(env_id) if isinstance(env_id, str) else None
        if registered is None or spec.get("entry_point") != registered.entry_point:
            raise UsageError(
                f"{where} names env {env_id!r} with entry point {spec.get('entry_point')!r}, not the registered "
                "one: refusing to run code a dataset names"
            )
        for wrapper in spec.get("additional_wrappers") or []:
            entry = wrapper.get("entry_point") if isinstance(wrapper, dict) else None
            if not isinstance(entry, str) or not entry.startswith(TRUSTED_WRAPPERS):
                raise UsageError(f"{where} wraps its env in {entry!r}, not a known wrapper: refusing to run it")


def _minari_env(dataset: MinariDataset, **kwargs: Any) -> Any:
    """The dataset's evaluation env, its bool images (MinAtar) made uint8 like the stored rows; only
    after its env specs are checked to name the registered env and known wrappers."""
    if _env_id(dataset).startswith(MINATAR_PREFIX):
        register_minatar()
    check_env_entry_points(dataset)
    try:
        return as_uint8_images(dataset.recover_environment(eval_env=True, **kwargs))
    except Exception as err:  # minari raises plain errors when the env spec cannot be rebuilt
        raise UsageError(f"cannot rebuild the environment of Minari dataset {dataset.id!r}: {err}") from None


def _open_minari(cfg: DatasetRequest, opened: OpenedDataset) -> OfflineData:
    from offline_gitd.data.minari_source import minari_checkpoint_store, minari_store

    parsed, dataset = opened.parsed, opened.minari
    assert isinstance(parsed, MinariId) and dataset is not None
    make_eval_env, spaces = _minari_eval_env(cfg, dataset, spaces=opened.spaces)
    episodes = dataset.episode_indices
    try:
        segments = checkpoint_episodes(dataset)
        if segments is None:  # no checkpoints recorded: the first fraction of all episodes
            keep = max(1, math.ceil(cfg.fraction * len(episodes) - 1e-9))
            store = minari_store(dataset, episodes[:keep])
        else:
            store = minari_checkpoint_store(dataset, segments, cfg.fraction)
    except (OSError, KeyError) as err:  # h5py reads episodes lazily: damage may show only here
        raise damaged_minari(parsed.dataset_id, minari_datasets_dir(cfg.data_dir), err) from None
    # Whole images and vectors are never stacked (Replay stacks single frames only).
    replay = Replay(store, n_step=cfg.n_step, gamma=cfg.gamma)

    domain = opened.domain  # env_profile's rule, read when the dataset was opened
    if domain == "minatar":
        name = _env_id(dataset)[len(MINATAR_PREFIX) :]
        return OfflineData(domain, replay, make_eval_env, spaces, "minatar", name, str(parsed))
    return OfflineData(domain, replay, make_eval_env, spaces, "minari", parsed.dataset_id, str(parsed))
