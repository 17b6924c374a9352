"""A trained run from Python: its config, its metrics as DataFrames, its agent as a policy.

    >>> import offline_gitd
    >>> run = offline_gitd.load_run("runs/ll-gitd")
    >>> run.metrics.groupby("step").eval_return.mean()      # metrics.csv as a DataFrame
    >>> act = run.policy(seed=0)                            # latest checkpoint, greedy
    >>> act(env.reset()[0])                                 # one observation -> one action
    >>> run.evaluate(seed=0)                                # the returns the loop logged (offline)

Everything is rebuilt from the run directory alone (docs/architecture.md#runs-are-self-contained): the resolved config says which
learner family to build, the checkpoint holds every seed's training state, and the same env
factories and :func:`~offline_gitd.envs.make.evaluate` as training are used, so ``evaluate`` is
the training loop's evaluation protocol (Atari: epsilon 0.001 and Machado et al.'s env).
An offline run's evaluation env comes from its dataset's id: a Minari dataset must be available
locally (its env spec lives there); the data itself is not read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from offline_gitd.errors import UsageError
from offline_gitd.rundir.checkpoints import restore_seed_states
from offline_gitd.rundir.files import (
    CHECKPOINTS,
    CONFIG_FILE,
    METRICS_FILE,
    RESULTS_FILE,
    config_from_record,
    read_config,
)

EPISODES_FILE = "episodes.csv"
# Atari evaluation protocol (docs/reproducing.md#evaluation-protocol: epsilon 0.001), online runs included.
ATARI_EVAL_EPSILON = 0.001


@dataclass(frozen=True)
class Agent:
    """A restored learner: the family (pure functions), every seed's state, and its env."""

    family: Any
    state: Any  # pytree with a leading seed axis
    seeds: tuple[int, ...]
    checkpoint: int  # epoch (offline) or env step (online)
    make_env: Callable[..., Any]  # (seed, **make_kw) -> gymnasium.Env
    flatten: bool  # vector observations are flattened to float32 before the network
    epsilon: float  # evaluation epsilon (discrete actions only)

    def seed_state(self, seed: int) -> Any:
        import jax

        if seed not in self.seeds:
            raise UsageError(f"seed {seed} is not in this run (its seeds: {', '.join(map(str, self.seeds))})")
        index = self.seeds.index(seed)
        return jax.tree.map(lambda x: x[index], self.state)

    def batch_policy(self, seed: int) -> Callable[[np.ndarray], np.ndarray]:
        """Observations ``[B, *obs]`` as the env returns them -> ``B`` actions, greedy (no epsilon)."""
        import jax
        import jax.numpy as jnp

        state, act = self.seed_state(seed), jax.jit(self.family.act)
        key = jax.random.PRNGKey(seed)

        def policy(obs: np.ndarray) -> np.ndarray:
            obs = np.asarray(obs)
            if self.flatten:
                obs = obs.reshape(len(obs), -1).astype(np.float32)
            return np.asarray(act(state, jnp.asarray(obs), key))

        return policy


class Run:
    """A run directory (``offline_gitd train`` or ``online``), read lazily."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not (self.path / CONFIG_FILE).exists():
            raise UsageError(f"{self.path} is not a run directory: no {CONFIG_FILE}")
        self.provenance = read_config(self.path)
        self.kind = "offline" if "dataset" in self.provenance["config"] else "online"
        self.config  # noqa: B018 -- checked now: a malformed or absurd config is one line at load time

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, {self.kind}, env {self.provenance.get('env')})"

    @functools.cached_property
    def config(self) -> Any:
        """The resolved config dataclass (:class:`OfflineConfig` or :class:`OnlineConfig`)."""
        if self.kind == "offline":
            from offline_gitd.offline.config import OfflineConfig

            return config_from_record(OfflineConfig, self.path, self.provenance["config"])
        from offline_gitd.online.config import OnlineConfig

        return config_from_record(OnlineConfig, self.path, self.provenance["config"])

    @property
    def seeds(self) -> list[int]:
        return self.config.seed_list

    def _csv(self, name: str) -> pd.DataFrame:
        path = self.path / name
        return pd.read_csv(path) if path.exists() else pd.DataFrame()

    @property
    def metrics(self) -> pd.DataFrame:
        """``metrics.csv``: one row per seed per epoch (offline) or logging window (online)."""
        return self._csv(METRICS_FILE)

    @property
    def results(self) -> pd.DataFrame:
        """``results.csv``: the leaderboard rows."""
        return self._csv(RESULTS_FILE)

    @property
    def episodes(self) -> pd.DataFrame:
        """``episodes.csv`` (online runs): every finished training episode; empty offline."""
        return self._csv(EPISODES_FILE)

    def checkpoints(self) -> list[int]:
        """Saved checkpoints: epochs (offline) or env steps (online), oldest first."""
        directory = self.path / CHECKPOINTS
        return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.exists() else []

    def agent(self, epoch: int | None = None) -> Agent:
        """The learner restored from checkpoint ``epoch`` (default: the latest)."""
        saved = self.checkpoints()
        if not saved:
            raise UsageError(f"{self.path} holds no checkpoint yet")
        if epoch is None:
            epoch = saved[-1]
        elif epoch not in saved:
            unit = "epoch" if self.kind == "offline" else "env step"
            raise UsageError(f"no checkpoint at {unit} {epoch} in {self.path} (saved: {', '.join(map(str, saved))})")
        family, make_env, flatten, epsilon = self._family_and_env()
        state = restore_seed_states(self.path, epoch, family, self.seeds)  # either pipeline, either loop
        return Agent(family, state, tuple(self.seeds), epoch, make_env, flatten, epsilon)

    def _family_and_env(self) -> tuple[Any, Callable[..., Any], bool, float]:
        cfg = self.config
        if self.kind == "offline":
            from offline_gitd.data.datasets import eval_env_factory
            from offline_gitd.offline.train import family_for

            make_eval_env, spaces = eval_env_factory(cfg)
            frames = len(spaces.obs_shape) == 3
            example = (
                np.zeros((1, *spaces.obs_shape), np.uint8)
                if frames
                else np.zeros((1, int(np.prod(spaces.obs_shape))), np.float32)
            )

            def make_env(seed: int, **make_kw: Any) -> Any:
                return eval_env_factory(cfg, **make_kw)[0](seed) if make_kw else make_eval_env(seed)

            epsilon = cfg.eval_epsilon if spaces.action_kind == "discrete" else 0.0
            return family_for(cfg, spaces, example), make_env, not frames, float(epsilon or 0.0)
        from offline_gitd.online.env_info import inspect_env, make_online_env
        from offline_gitd.online.train import build_family

        info = inspect_env(cfg.env, cfg.algo)

        def make_env(seed: int, **make_kw: Any) -> Any:
            return make_online_env(cfg, info, seed, **make_kw)

        epsilon = ATARI_EVAL_EPSILON if info.domain in ("atari", "minatar") else 0.0
        return build_family(cfg, info), make_env, not (info.frames or info.images), epsilon

    def policy(self, seed: int | None = None, epoch: int | None = None) -> Callable[[np.ndarray], Any]:
        """One observation (as the env returns it) -> one action (as the env takes it), greedy.

        ``seed``: which training seed's agent (default: the run's first); ``epoch``: which
        checkpoint (default: the latest)."""
        batch = self.agent(epoch).batch_policy(self.seeds[0] if seed is None else seed)

        def act(obs: np.ndarray) -> Any:
            action = batch(np.asarray(obs)[None])[0]
            return int(action) if np.ndim(action) == 0 else action

        return act

    def evaluate(
        self,
        episodes: int | None = None,
        seed: int | None = None,
        epoch: int | None = None,
        *,
        eval_seed: int | None = None,
        video: str | Path | None = None,
    ) -> np.ndarray:
        """Returns of ``episodes`` evaluation episodes of training seed ``seed`` (default: the
        first) at checkpoint ``epoch`` (default: the latest); ``video`` also films one more episode
        (seeded by ``eval_seed``) to that file.

        The defaults are the training loop's own evaluation (docs/runs.md#evaluating-a-trained-agent):
        for an offline run, its ``--eval-episodes`` and the evaluation seed it used after that epoch
        (``metrics.csv``'s ``eval_seed``), played by the loop's own function (:meth:`_loop_evaluation`),
        so the returns are those it logged, bit for bit on the same machine. An online run logs its training episodes, not an evaluation: there the
        defaults are 10 episodes and evaluation seed 0."""
        from offline_gitd.envs.make import evaluate
        from offline_gitd.envs.video import record_episode

        agent = self.agent(epoch)
        seed = self.seeds[0] if seed is None else seed
        policy = agent.batch_policy(seed)  # refuses a seed the run does not have
        if self.kind == "offline" and episodes is None and eval_seed is None and self.config.eval_episodes:
            returns = self._loop_evaluation(agent)[agent.seeds.index(seed)]
            episodes, eval_seed = self.evaluation_protocol(seed, agent.checkpoint)
        else:
            episodes, eval_seed = self.evaluation_protocol(seed, agent.checkpoint, episodes, eval_seed)
            returns = evaluate(policy, lambda: agent.make_env(eval_seed), episodes, eval_seed, agent.epsilon)
        if video is not None:
            env = agent.make_env(eval_seed, render_mode="rgb_array")
            record_episode(policy, env, Path(video), seed=eval_seed, epsilon=agent.epsilon)
        return returns

    def _loop_evaluation(self, agent: Agent) -> list[np.ndarray]:
        """Every seed's returns of the offline loop's evaluation at ``agent``'s checkpoint, computed
        by the loop's own function on the same program (all seeds' states vmapped, one call per
        env step): a seed's policy alone is another XLA program (a vmapped convolution is a grouped
        one), whose last bits may differ. Cached per checkpoint: ``evaluate`` of each seed in turn
        plays the episodes once."""
        cache = self.__dict__.setdefault("_loop_evaluations", {})
        if agent.checkpoint not in cache:
            import types

            import jax

            from offline_gitd.offline.loop import evaluate_seeds

            data = types.SimpleNamespace(make_eval_env=agent.make_env)
            act = jax.jit(jax.vmap(agent.family.act))
            cache[agent.checkpoint] = evaluate_seeds(
                self.config, data, agent.family, act, agent.state, list(agent.seeds), agent.checkpoint
            )
        return cache[agent.checkpoint]

    def evaluation_protocol(
        self, seed: int, checkpoint: int, episodes: int | None = None, eval_seed: int | None = None
    ) -> tuple[int, int]:
        """``(episodes, eval_seed)`` for evaluating ``seed`` at ``checkpoint``: those given, else the
        training loop's (see :meth:`evaluate`). An offline run's seed is read from ``metrics.csv``
        where that row has one (runs of older versions do not) and recomputed otherwise: the loop's
        seed is a function of (seed, epoch) alone (``offline_gitd.offline.loop.evaluation_seed``)."""
        if self.kind != "offline":
            return (10 if episodes is None else episodes), (0 if eval_seed is None else eval_seed)
        if episodes is None:
            episodes = self.config.eval_episodes or 10  # a run that never evaluated: 10, as online
        if eval_seed is None:
            from offline_gitd.offline.loop import evaluation_seed

            eval_seed = evaluation_seed(seed, checkpoint)
            metrics = self.metrics
            if "eval_seed" in metrics.columns:
                logged = metrics[(metrics["seed"] == seed) & (metrics["epoch"] == checkpoint)]["eval_seed"].dropna()
                if len(logged):
                    eval_seed = int(logged.iloc[-1])
        return episodes, eval_seed


def load_run(path: str | Path) -> Run:
    """Open the run directory ``path`` (see :class:`Run`)."""
    return Run(path)
