"""``offline_gitd collect``: a behaviour agent trained online, every transition recorded to Minari.

docs/datasets.md's ``collect`` source. The behaviour agent is the online learner itself (DQN with the
paper's Gym data-collection table for discrete actions: LunarLander-v3 with horizon 500,
MountainCar-v0 with horizon 200; SAC with the MuJoCo table for continuous actions), or a uniformly
random policy, which is the online loop with every step an "initial random sample". The training
env is wrapped in ``minari.DataCollector``, so the dataset holds exactly the transitions the agent
saw, exploration included (the paper's "data collected by DQN").

Metadata: ``algorithm_name``, ``author``, ``eval_env`` = the training env's spec (same horizon, so
``recover_environment(eval_env=True)`` rebuilds it), and for a behaviour agent ``ref_min_score`` =
mean return of a uniformly random policy over 100 seeded episodes and ``ref_max_score`` = the
behaviour agent's mean return over its last 10 training episodes (its final performance,
exploration included). A random-policy dataset gets no reference scores (its own score would be
both ends). What the data is, is said twice, exactly (:func:`behaviour_record`,
:func:`describe_collection`): as keys (``behaviour_policy``, ``behaviour_random_steps``: steps of
uniformly random actions, ``behaviour_updates``: gradient updates the agent made) and in
``description``, with the package version, git commit and the config. A behaviour agent whose
``--steps`` do not exceed its initial random samples never trains, and its description says so.

With ``checkpoint_every`` N, the recorded replay (the whole of it, in logged order) is cut into
checkpoints of N env steps, kept in the metadata with the behaviour agent's mean return per
checkpoint (:mod:`offline_gitd.data.minari_checkpoints`): a DQN-replay dataset the RL Unplugged way.
"""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from offline_gitd.critic_registry import critic_names
from offline_gitd.data.minari_checkpoints import checkpoint_metadata
from offline_gitd.data.paths import minari_datasets_dir, use_minari_root
from offline_gitd.envs.atari import RLU_GAMES
from offline_gitd.envs.images import OBSERVATION_LAYOUT
from offline_gitd.envs.make import ATARI_PREFIX, evaluate, make_env
from offline_gitd.errors import UsageError
from offline_gitd.online.config import CollectRequest, OnlineConfig
from offline_gitd.online.env_info import inspect_env
from offline_gitd.online.schedules import total_updates, utd_fraction
from offline_gitd.online.train import train
from offline_gitd.records import check_range
from offline_gitd.rundir.flags import Outputs
from offline_gitd.version import __version__

# Horizons of the Gym data-collection table (docs/reproducing.md#offline-gym-ablation-lunarlander-mountaincar).
COLLECT_HORIZONS = {"LunarLander-v3": 500, "MountainCar-v0": 200}
REFERENCE_EPISODES = 100  # minari's own default for reference scores
FINAL_EPISODES = 10


def _code_version() -> str:
    """Package version and, from a git checkout, the commit (``+dirty`` with local changes)."""
    from offline_gitd.rundir.provenance import describe_commit, git_commit

    git = git_commit()
    if not git.get("commit"):
        return f"offline_gitd {__version__}"
    return f"offline_gitd {__version__} (git {describe_commit(git)})"


def code_record(made_by: dict[str, Any]) -> dict[str, str]:
    """What code and device recorded the data, as metadata keys (the board row's columns of what
    made it, docs/leaderboard.md#what-made-a-row): ``code_commit`` (empty without a checkout, with
    ``code_commit_reason`` saying why), ``code_dirty`` (``true``/``false``), ``code_diff_sha256``
    (SHA-256 of ``git diff HEAD`` when dirty), ``code_version`` and ``collected_on`` (``cpu`` or
    the accelerator's model) and ``collected_cpu`` (the CPU's kind: a seeded recording repeats
    only on the same kind, docs/datasets.md#manifests). Taken from the behaviour run's own
    provenance (its ``config.json``)."""
    from offline_gitd.rundir.provenance import row_facts

    facts = row_facts(made_by)
    git = made_by.get("git") or {}
    return {
        "code_version": __version__,
        "code_commit": facts["commit"],
        "code_dirty": facts["dirty"],
        "code_diff_sha256": facts["diff_sha256"],
        "code_commit_reason": str(git.get("reason") or ""),
        "collected_on": facts["device"],
        "collected_cpu": str((made_by.get("platform") or {}).get("cpu") or ""),
    }


def _check_request(request: CollectRequest) -> tuple[str, str, int | None]:
    """Refuse bad input before any work; returns the policy, the online algo family that runs it
    (a random policy runs in the family of the env's action space) and the horizon."""
    import minari
    from minari.dataset.minari_dataset import parse_dataset_id

    if request.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {request.steps}")
    if request.horizon is not None and request.horizon < 1:
        raise UsageError(f"--horizon must be >= 1, got {request.horizon}")
    if request.checkpoint_every is not None and request.checkpoint_every < 1:
        raise UsageError(f"--checkpoint-every must be >= 1, got {request.checkpoint_every}")
    check_range("--seed", request.seed, 0, 2**31 - 1)
    check_range("--reference-episodes", request.reference_episodes, 0, 10**6)
    if not 0.0 <= request.reference_epsilon <= 1.0:
        raise UsageError(f"--reference-epsilon must be in [0, 1], got {request.reference_epsilon}")
    if request.critic not in critic_names():
        raise UsageError(f"unknown --critic {request.critic!r}; choose one of {', '.join(critic_names())}")
    try:
        parse_dataset_id(request.dataset_id)
    except Exception:  # minari raises ValueErrors, but also TypeErrors for an id with no version
        raise UsageError(
            f"bad Minari dataset id {request.dataset_id!r}: expected [namespace/]name-vN, "
            "e.g. offline_gitd/CartPole-v1/dqn-v0"
        ) from None
    if request.env_id.startswith(("ALE/", ATARI_PREFIX)) or request.env_id in RLU_GAMES:
        raise UsageError("collect records gymnasium and MinAtar envs; Atari data comes from RL Unplugged")
    env = make_env(request.env_id, 0)  # unknown ids -> UsageError with close matches
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    env.close()
    policy = request.policy or ("dqn" if discrete else "sac")
    algo = ("dqn" if discrete else "sac") if policy == "random" else policy
    inspect_env(request.env_id, algo)  # dqn on continuous / sac on discrete -> UsageError
    # minari creates its root folder while listing: a refused request must leave no trace.
    exists = minari_datasets_dir(None).is_dir() and request.dataset_id in minari.list_local_datasets()
    if exists and not request.overwrite:
        raise UsageError(
            f"Minari dataset {request.dataset_id!r} already exists locally; pass --overwrite to replace it"
        )
    return policy, algo, request.horizon or COLLECT_HORIZONS.get(request.env_id)


def _random_reference(env_id: str, horizon: int | None, seed: int) -> float:
    """Mean return of a uniformly random policy over 100 seeded episodes (ref_min_score)."""
    kwargs = {"max_episode_steps": horizon} if horizon else {}
    probe = make_env(env_id, seed, **kwargs)
    space = probe.action_space
    probe.close()
    rng = np.random.default_rng([seed, 2])
    if isinstance(space, gym.spaces.Discrete):

        def policy(obs: np.ndarray) -> np.ndarray:
            return np.zeros(len(obs), np.int64)

        epsilon = 1.0  # every action replaced by a uniform one
    else:

        def policy(obs: np.ndarray) -> np.ndarray:
            return rng.uniform(space.low, space.high, (len(obs), *space.shape)).astype(np.float32)

        epsilon = 0.0
    returns = evaluate(policy, lambda: make_env(env_id, seed, **kwargs), REFERENCE_EPISODES, seed, epsilon)
    return float(np.mean(returns))


def _final_return(run_dir: Path) -> float:
    with (run_dir / "episodes.csv").open() as f:
        returns = [float(row["return"]) for row in csv.DictReader(f)]
    if not returns:
        raise UsageError("the behaviour agent finished no episode: collect more --steps for reference scores")
    return float(np.mean(returns[-FINAL_EPISODES:]))


def evaluation_reference(run_dir: Path, episodes: int, epsilon: float, seed: int) -> dict[str, Any]:
    """The behaviour agent's final policy (its last checkpoint) evaluated over ``episodes``
    episodes, as metadata keys: ``behaviour_eval_score`` (the mean return), ``_std``,
    ``_episodes``, ``_epsilon`` (0 for continuous actions, which take no epsilon) and ``_step``
    (the env step of the checkpoint). The runs trained on the data are evaluated at epsilon 0.001
    (docs/reproducing.md#evaluation-protocol), the data's own training return at its exploration
    epsilon (0.1 on MinAtar): this is the behaviour agent measured as the runs are."""
    import jax
    import jax.numpy as jnp

    from offline_gitd.online.env_info import make_online_env
    from offline_gitd.online.train import build_family
    from offline_gitd.rundir.checkpoints import Checkpoints, restore_seed_states
    from offline_gitd.rundir.files import config_from_record, read_config

    # the final policy, restored as `offline_gitd evaluate` restores any run's (offline_gitd/trained.py)
    cfg = config_from_record(OnlineConfig, run_dir, read_config(run_dir)["config"])
    info = inspect_env(cfg.env, cfg.algo)
    family = build_family(cfg, info)
    step = Checkpoints(run_dir).latest()
    if step is None:
        raise UsageError(f"the behaviour agent saved no checkpoint in {run_dir}: nothing to evaluate")
    state = restore_seed_states(run_dir, step, family, cfg.seed_list)
    state = jax.tree.map(lambda x: x[0], state)  # the one seed a recording has
    act, key, flatten = jax.jit(family.act), jax.random.PRNGKey(cfg.seed_list[0]), not (info.frames or info.images)

    def policy(obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs)
        if flatten:
            obs = obs.reshape(len(obs), -1).astype(np.float32)
        return np.asarray(act(state, jnp.asarray(obs), key))

    used = float(epsilon) if info.spaces.action_kind == "discrete" else 0.0
    returns = evaluate(policy, lambda: make_online_env(cfg, info, seed), episodes, seed, used)
    return {
        "behaviour_eval_score": float(np.mean(returns)),
        "behaviour_eval_score_std": float(np.std(returns)),
        "behaviour_eval_episodes": int(episodes),
        "behaviour_eval_epsilon": used,
        "behaviour_eval_step": int(step),
    }


# How each behaviour agent acts once its initial random samples are done (docs/online.md).
EXPLORATION = {"dqn": "epsilon-greedy", "sac": "sampled from its stochastic policy"}


def behaviour_record(policy: str, steps: int, config: dict[str, Any]) -> dict[str, Any]:
    """What produced the data, as metadata keys: the policy, how many of the ``steps`` took
    uniformly random actions, and how many gradient updates the agent made (the loop's own
    schedule, :func:`~offline_gitd.online.schedules.total_updates`, on the run's resolved config)."""
    if policy == "random":
        return {"behaviour_policy": "random", "behaviour_random_steps": steps, "behaviour_updates": 0}
    initial = int(config["initial_samples"])
    return {
        "behaviour_policy": policy,
        "behaviour_random_steps": min(steps, initial),
        "behaviour_updates": total_updates(steps, utd_fraction(config["utd"]), initial),
    }


def describe_collection(
    *,
    env_id: str,
    horizon: int | None,
    steps: int,
    name: str,
    record: dict[str, Any],
    references: Sequence[str],
    code_version: str,
    config: dict[str, Any],
    evaluated: dict[str, Any] | None = None,
) -> str:
    """The dataset's ``description``: which policy acted, whether and how much it trained, and
    which reference scores are written, from the facts in ``record`` (:func:`behaviour_record`)
    and the keys actually passed to Minari, never from what the policy usually does."""
    head = f"{steps} steps of {env_id} (horizon {horizon or 'default'})"
    policy, random_steps, updates = (
        record["behaviour_policy"],
        record["behaviour_random_steps"],
        record["behaviour_updates"],
    )
    if policy == "random":
        what = f"{head} recorded from a uniformly random policy: every action drawn uniformly, no agent trained."
    elif updates == 0:
        what = (
            f"{head} recorded from a {name} behaviour agent that never trained (0 gradient updates): "
            f"{random_steps} of the {steps} steps are its uniformly random initial samples"
            + (f", the other {steps - random_steps} its untrained policy's." if steps > random_steps else ".")
        )
    else:
        what = (
            f"{head} recorded while a {name} trained online from scratch, exploration included: "
            f"{random_steps} uniformly random initial steps, then {steps - random_steps} steps "
            f"{EXPLORATION[policy]}, {updates} gradient updates in all."
        )
    explained = {
        "ref_min_score": f"ref_min_score: a uniformly random policy's mean return over {REFERENCE_EPISODES} episodes",
        "ref_max_score": f"ref_max_score: the behaviour agent's mean return over its last {FINAL_EPISODES} "
        "training episodes",
    }
    written = [explained[key] for key in ("ref_min_score", "ref_max_score") if key in references]
    if written:
        refs = "; ".join(written) + "."
    elif policy == "random":
        refs = "No reference scores are written: a random policy's own return would be both ends."
    else:
        refs = "No reference scores are written."
    if evaluated:
        refs += (
            f" behaviour_eval_score: the behaviour agent's final policy's mean return over "
            f"{evaluated['behaviour_eval_episodes']} episodes at epsilon {evaluated['behaviour_eval_epsilon']:g}, "
            "as the runs trained on the data are evaluated."
        )
    return f"{what} Collected by {code_version}. {refs} Config: {json.dumps(config, sort_keys=True)}"


def _record_checkpoints(dataset_id: str, every: int) -> None:
    """Cut the written dataset's episodes (the logged replay, in order) into checkpoints of
    ``every`` env steps and keep the cut and the per-checkpoint mean returns in its metadata."""
    import minari

    dataset = minari.load_dataset(dataset_id)
    lengths, returns = [], []
    for episode in dataset.iterate_episodes():
        lengths.append(len(episode.rewards))
        returns.append(float(np.sum(episode.rewards)))
    dataset.storage.update_metadata(checkpoint_metadata(lengths, returns, every))


def recording_env(env: gym.Env) -> tuple[gym.Env, Any]:
    """``env`` recorded by a ``minari.DataCollector`` whose env spec names no code of this package;
    returns the env the agent steps and the collector that writes the dataset.

    MinAtar's bool boards reach the learners as uint8 through :class:`~offline_gitd.envs.images.Uint8Images`.
    Recording inside that wrapper would put it in the dataset's env spec, and ``recover_environment()``
    would need this package. So the collector records the env's own observations, cast to uint8 as
    they are stored (the same images, the same content digest as before), and the agent steps the
    collector wrapped in ``Uint8Images`` again: it sees what it saw before, and minari, gymnasium and
    minatar alone recover the env and the evaluation env.
    """
    import minari

    from offline_gitd.envs.images import Uint8Images

    if not isinstance(env, Uint8Images):
        collector = minari.DataCollector(env)
        return collector, collector

    class Uint8Observations(minari.StepDataCallback):  # type: ignore[misc]
        def __call__(self, env: gym.Env, **kwargs: Any) -> Any:
            step_data = super().__call__(env, **kwargs)
            step_data["observation"] = np.asarray(step_data["observation"], np.uint8)
            return step_data

    collector = minari.DataCollector(
        env.env, step_data_callback=Uint8Observations, observation_space=env.observation_space
    )
    return Uint8Images(collector), collector


def _create_dataset(
    collector: Any,
    request: CollectRequest,
    name: str,
    horizon: int | None,
    behaviour: dict[str, Any],
    scores: dict[str, float],
    config: dict[str, Any],
    evaluated: dict[str, Any],
) -> None:
    """Write the recorded episodes as the Minari dataset ``request.dataset_id``, described."""
    collector.create_dataset(
        dataset_id=request.dataset_id,
        eval_env=collector.env.spec,
        algorithm_name=name,
        author="offline_gitd",
        description=describe_collection(
            env_id=request.env_id,
            horizon=horizon,
            steps=request.steps,
            name=name,
            record=behaviour,
            references=list(scores),
            code_version=_code_version(),
            config=config,
            evaluated=evaluated,
        ),
        **scores,
    )


def collect(request: CollectRequest, *, progress: bool = True, outputs: Outputs | None = None) -> Path:
    """Train (or run) the behaviour policy, record everything, write the dataset; returns the
    Minari root it went to."""
    use_minari_root(request.data_dir)
    policy, algo, horizon = _check_request(request)
    import minari

    run_dir = Path(request.run_dir) if request.run_dir else Path(tempfile.mkdtemp(prefix="offline_gitd-collect-"))
    if request.run_dir is None:
        shutil.rmtree(run_dir)
    cfg = OnlineConfig(
        algo=algo,
        env=request.env_id,
        critic=request.critic if policy != "random" else "td",
        steps=request.steps,
        seeds=str(request.seed),
        horizon=horizon,
        out=str(run_dir),
        # A random policy is the online loop with every step an initial random sample (no update).
        initial_samples=request.steps if policy == "random" else None,
        epsilon_steps=request.epsilon_steps,
        utd=request.utd,
        # the dataset is what the Python loop's gymnasium env records (minari.DataCollector wraps it)
        loop="python",
    )
    collectors: list[Any] = []

    def record(env: gym.Env) -> gym.Env:
        recorded, collector = recording_env(env)
        collectors.append(collector)
        return recorded

    try:
        # a behaviour policy is a dataset's, not a board's: a short DQN collect is still a dataset
        train(cfg, progress=progress, wrap_env=record, outputs=outputs, require_updates=False)
        (collector,) = collectors
        config = json.loads((run_dir / "config.json").read_text())["config"]
        scores: dict[str, float] = {}
        if policy != "random":
            scores = {
                "ref_min_score": _random_reference(request.env_id, horizon, request.seed),
                "ref_max_score": _final_return(run_dir),
                "num_episodes_average_score": REFERENCE_EPISODES,
            }
        evaluated: dict[str, Any] = {}
        if policy != "random" and request.reference_episodes:
            evaluated = evaluation_reference(
                run_dir, request.reference_episodes, request.reference_epsilon, request.seed
            )
        if request.overwrite and request.dataset_id in minari.list_local_datasets():
            minari.delete_dataset(request.dataset_id)
        name = (
            "random policy"
            if policy == "random"
            else f"{policy.upper()} ({config['critic']} critic, offline_gitd online)"
        )
        behaviour = behaviour_record(policy, request.steps, config)
        with warnings.catch_warnings():
            # Minari asks every dataset for a code permalink and an author email: a local collect has
            # neither to give (no versioned URL, no one's address), and the description records the
            # code version and the whole config instead (docs/datasets.md#collecting-datasets). Those two warnings alone
            # are silenced, here alone.
            for field in ("code_permalink", "author_email"):
                warnings.filterwarnings("ignore", message=f"`{field}` is set to None", category=UserWarning)
            _create_dataset(collector, request, name, horizon, behaviour, scores, config, evaluated)
        made_by = json.loads((run_dir / "config.json").read_text())["provenance"]
        layout = {"observation_layout": OBSERVATION_LAYOUT} if collector.env.observation_space.dtype == np.bool_ else {}
        minari.load_dataset(request.dataset_id).storage.update_metadata(
            {**behaviour, **code_record(made_by), **evaluated, **layout}
        )
        collector.close()
        if request.checkpoint_every is not None:
            _record_checkpoints(request.dataset_id, request.checkpoint_every)
    finally:
        if request.run_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)
    return minari_datasets_dir(request.data_dir)
