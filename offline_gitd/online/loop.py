"""The online loop (docs/architecture.md#a-run-is-a-function-of-its-config): env steps with a UTD ratio, epsilon-greedy (DQN) or the policy (SAC).

All seeds run in lockstep in one compiled program: seed ``s`` has its own env, replay and host RNG,
the training state carries a leading seed axis, acting is one vmapped call per env step and the
updates go through the offline learners' :func:`~offline_gitd.learners.drivers.make_chunk_runner`
(the same pure ``family.step``). The paper's online protocol logs the returns collected during
training: ``episodes.csv`` holds every finished episode, ``results.csv`` one leaderboard row per
seed every ``log_every`` env steps (the mean return of the episodes finished in that window; a seed
with none there repeats its previous value, so every seed has the same step grid for AUCs).

Exact resume. A checkpoint is the orbax-saved training state plus the host side, saved as data
(:mod:`offline_gitd.online.host_state`): each seed's replay (store and priorities), its numpy RNG state, its episode counter and the actions taken
since the current episode began. Every episode is reset with a seed derived from ``(seed,
episode)``, and the supported envs (classic control, Box2D, MuJoCo, ALE with its sticky-action RNG)
are deterministic given that seed, so an env is restored by resetting it with the episode's seed and
replaying those actions; the restored observation is checked against the saved one. SAC's
exploration keys are ``fold_in(PRNGKey(seed), env_step)``, a function of the step alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.batch import Batch, stack_seeds
from offline_gitd.envs.carry import env_carry, set_env_carry
from offline_gitd.learners.drivers import (
    choose_compiler_options,
    choose_driver,
    choose_seed_strategy,
    make_chunk_runner,
    make_update_then_act,
)
from offline_gitd.learners.family import Family, seed_states
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.env_info import EnvInfo, make_online_env
from offline_gitd.online.host_state import (
    LEGACY_SUFFIX,
    SeedSlot,
    host_state_path,
    new_slot,
    read_host_state,
    read_legacy_host_state,
    write_host_state,
)
from offline_gitd.online.init_from import Origin, seed_replay
from offline_gitd.online.lifecycle import online_lifecycle, save_checkpoint
from offline_gitd.online.schedules import updates_after_step, utd_fraction
from offline_gitd.online.windows import (
    ClosedWindow,
    Console,
    acting_epsilon,
    log_window,
    metric_columns,
)
from offline_gitd.rundir.flags import RunFlags
from offline_gitd.rundir.lifecycle import RunLifecycle
from offline_gitd.rundir.metrics import MetricWindow


def episode_seed(seed: int, episode: int) -> int:
    """The reset seed of episode ``episode`` of run seed ``seed``: a function of both alone."""
    return int(np.random.SeedSequence([seed, episode]).generate_state(1)[0])


def _observe(info: EnvInfo, obs: np.ndarray) -> np.ndarray:
    if info.frames or info.images:
        return np.asarray(obs)
    return np.asarray(obs, np.float32).reshape(-1)


def _row(info: EnvInfo, obs: np.ndarray) -> np.ndarray:
    """What the replay stores per step: the newest frame of an Atari stack, a vector whole."""
    return obs[..., -1] if info.frames else obs


def _start_episode(slot: SeedSlot, info: EnvInfo) -> None:
    obs, _ = slot.env.reset(seed=episode_seed(slot.seed, slot.episode))
    slot.obs, slot.actions, slot.episode_return, slot.episode_length = _observe(info, obs), [], 0.0, 0
    slot.env_carry = env_carry(slot.env)


def _restore_env(slot: SeedSlot, info: EnvInfo, saved_obs: np.ndarray) -> None:
    """Reset with the episode's seed and what the env carried into it, replay its actions, check we
    are where the checkpoint was."""
    obs, _ = slot.env.reset(seed=episode_seed(slot.seed, slot.episode))
    set_env_carry(slot.env, slot.env_carry)
    for action in slot.actions:
        obs = slot.env.step(action)[0]
    if not np.array_equal(_observe(info, obs), saved_obs):
        raise RuntimeError(f"{info.env_id} did not replay deterministically: cannot resume seed {slot.seed} exactly")


class OnlineRun:
    """The loop's state and its side effects (envs, files); ``run`` drives it to ``cfg.steps``."""

    def __init__(
        self,
        cfg: OnlineConfig,
        info: EnvInfo,
        family: Family,
        run_dir: Path,
        progress: bool,
        wrap_env: Callable[[gym.Env], gym.Env] | None,
        run: RunLifecycle,
        trust_pickles: bool = False,
        origin: Origin | None = None,
    ) -> None:
        """``run`` opens the run directory once the networks exist (a network that does not fit
        the env fails before). ``trust_pickles`` lets a resume read the pickled host states of
        older versions (they can run code when read); a new run starts from ``origin`` where given
        (an offline run's checkpoint, and perhaps its data in every seed's replay)."""
        self.cfg, self.info, self.family, self.run_dir, self.progress = cfg, info, family, run_dir, progress
        self.trust_pickles = trust_pickles
        self.seeds = cfg.seed_list
        self.utd = utd_fraction(cfg.utd)
        self.wrap_env = wrap_env or (lambda env: env)
        self.owns_envs = wrap_env is None  # wrapped envs (a DataCollector) are the caller's to close
        self.driver = choose_driver(cfg.driver, cfg.torso)
        strategy = choose_seed_strategy("auto", cfg.torso)
        self.run_chunk = make_chunk_runner(family.step, self.driver, strategy, choose_compiler_options())
        seeds = jnp.asarray(self.seeds)
        self.state = seed_states(family, seeds)
        self.origin = origin
        if origin is not None:
            self.state = origin.state
        # One seed's action for env step t from its state and observation (SAC: a sample keyed by
        # (seed, t)); ``act_args(obs, t)`` are its arguments after the state, ``act_axes`` their vmap axes.
        if cfg.algo == "dqn":

            def act_one(s: Any, o: Any) -> Any:
                return family.act(s, o[None], None)[0]

            self.act_args: Callable[[Any, int], tuple[Any, ...]] = lambda obs, t: (obs,)
            act_axes: tuple[int | None, ...] = (0, 0)
        else:

            def act_one(s: Any, o: Any, seed: Any, t: Any) -> Any:
                return family.explore(s, o[None], jax.random.fold_in(jax.random.PRNGKey(seed), t))[0]

            self.act_args = lambda obs, t: (obs, seeds, t)
            act_axes = (0, 0, 0, None)
        acting = jax.jit(jax.vmap(act_one, in_axes=act_axes))
        self.policy = lambda state, obs, step: acting(state, *self.act_args(obs, step))
        # The updates of an env step and the next step's policy in one compiled call
        # (docs/online.md#one-call-per-env-step); per-seed programs (Atari torsos on the CPU) and
        # PER (priorities written back between updates) keep the separate calls.
        self.update_then_act = (
            make_update_then_act(family.step, act_one, self.driver, choose_compiler_options(), act_axes)
            if strategy == "vmap" and not cfg.per
            else None
        )
        self.next_actions: np.ndarray | None = None  # the policy's choice for the next env step, if made
        self.metric_columns = metric_columns(family, info)
        self.run = run
        self.provenance = run.open()
        self.slots: list[SeedSlot] = []
        self.updates = 0
        self.window: dict[str, Any] = {}  # the finished episodes of the logging window
        self.metrics = MetricWindow(per_sample_means=True)  # td_abs -> td_abs_mean (rundir/metrics.py)

    # -- checkpoints ---------------------------------------------------------------------------

    def start(self) -> int:
        """Fresh slots, or the newest intact checkpoint's; returns the env steps already done."""
        step, self.state, host = self.run.restore(self.state, self._read_host_state)
        if step:
            self.updates = host["updates"]
            self.next_actions = host.get("next_actions")  # acted ahead at the checkpoint (save)
            for saved in host["slots"]:
                obs = saved.pop("obs")
                slot = SeedSlot(**saved, obs=obs)
                slot.env = self.wrap_env(make_online_env(self.cfg, self.info, slot.seed))
                _restore_env(slot, self.info, obs)
                self.slots.append(slot)
        else:
            for seed in self.seeds:
                slot = new_slot(self.cfg, self.info, seed)
                if self.origin is not None and self.origin.dataset is not None:
                    seed_replay(slot.replay.store, self.origin.dataset, self.cfg.clip_rewards)
                slot.env = self.wrap_env(make_online_env(self.cfg, self.info, seed))
                _start_episode(slot, self.info)
                self.slots.append(slot)
        return step

    def _read_host_state(self, step: int) -> dict[str, Any]:
        """The host state saved with checkpoint ``step``: the data archive, or (only when the run
        was made by an older version and the user trusts it) its pickle."""
        path = host_state_path(self.run_dir, step)
        legacy = host_state_path(self.run_dir, step, LEGACY_SUFFIX)
        if not path.exists() and legacy.exists():
            return read_legacy_host_state(legacy, self.trust_pickles)
        return read_host_state(path, self.cfg, self.info)

    def save(self, step: int) -> None:
        """The training state and every slot (:func:`~offline_gitd.online.lifecycle.save_checkpoint`)."""
        save_checkpoint(
            self.run,
            step,
            self.state,
            lambda path: write_host_state(path, self.updates, self.slots, self.info, self.next_actions),
        )

    # -- one env step --------------------------------------------------------------------------

    def _random_action(self, slot: SeedSlot) -> Any:
        spaces = self.info.spaces
        if spaces.action_kind == "discrete":
            return int(slot.rng.integers(spaces.action_size))
        low, high = spaces.action_bounds
        return slot.rng.uniform(low, high).astype(np.float32)

    def _actions(self, step: int) -> list[Any]:
        """Actions for env step ``step`` (1-based), from the ``step - 1`` steps done so far."""
        cfg = self.cfg
        if step - 1 < cfg.initial_samples:
            return [self._random_action(slot) for slot in self.slots]
        chosen, self.next_actions = self.next_actions, None
        if chosen is None:
            chosen = np.asarray(self.policy(self.state, np.stack([slot.obs for slot in self.slots]), step))
        if cfg.algo == "sac":
            return [a.astype(np.float32) for a in chosen]
        epsilon = acting_epsilon(cfg, step)
        return [
            int(slot.rng.integers(self.info.spaces.action_size)) if slot.rng.random() < epsilon else int(a)
            for slot, a in zip(self.slots, chosen)
        ]

    def _env_step(self, step: int) -> None:
        for slot, action in zip(self.slots, self._actions(step)):
            next_obs, reward, terminated, truncated, _ = slot.env.step(action)
            next_obs = _observe(self.info, next_obs)
            learn_reward = float(np.clip(reward, -1.0, 1.0)) if self.cfg.clip_rewards else float(reward)
            slot.replay.store.add(
                _row(self.info, slot.obs), action, learn_reward, terminated, truncated, _row(self.info, next_obs)
            )
            slot.actions.append(action)
            slot.episode_return += float(reward)
            slot.episode_length += 1
            slot.obs = next_obs
            if terminated or truncated:
                self.window.setdefault("episodes", []).append(
                    {
                        "step": step,
                        "seed": slot.seed,
                        "episode": slot.episode,
                        "return": slot.episode_return,
                        "length": slot.episode_length,
                    }
                )
                slot.episode += 1
                _start_episode(slot, self.info)

    # -- updates -------------------------------------------------------------------------------

    def _sample(self) -> tuple[Batch, list[np.ndarray]]:
        drawn = [slot.replay.sample_with_rows(self.cfg.batch_size, slot.rng) for slot in self.slots]
        return stack_seeds([batch for batch, _ in drawn]), [rows for _, rows in drawn]

    def _run_updates(self, batches: list[Batch], step: int, act_next: bool = False) -> dict[str, np.ndarray]:
        """Run ``batches`` as one chunk; with ``act_next``, the policy's actions for env step
        ``step + 1`` come back from the same call (kept in ``next_actions``)."""
        if self.driver == "scan":
            chunk: Any = jax.tree.map(lambda *xs: np.stack(xs), *batches)
        else:
            chunk = tuple(batches) if act_next else batches
        if act_next:
            obs = np.stack([slot.obs for slot in self.slots])
            self.state, aux, actions = self.update_then_act(self.state, chunk, *self.act_args(obs, step + 1))
            aux, self.next_actions = jax.device_get((aux, actions))  # one wait per env step
        else:
            self.state, aux = self.run_chunk(self.state, chunk)
            aux = jax.device_get(aux)  # [count, seeds, ...]
        loss = np.asarray(aux["loss"])
        self.run.check_finite(loss, self.seeds, lambda i: f"env step {step}, update {self.updates + i + 1}")
        self.updates += len(loss)
        self.metrics.add(aux)
        return aux

    def _update(self, count: int, step: int) -> None:
        """``count`` updates. With PER each update samples after the previous one's priorities
        are written back (Schaul et al. 2016); otherwise the batches are drawn up front (the replay
        does not change in between) and run as one chunk."""
        if not self.cfg.per:
            # The next step's actions come with the updates unless that step is still random or
            # follows a checkpoint of the checkpoint grid, where the run acts in a call of its own.
            # A run stopped off the grid (its last step, --steps N) acts ahead too and keeps the
            # actions in its host state, so its resume runs the same programs on the same inputs as
            # a run that never stopped: the update and the act compiled apart round differently in
            # the last bit (seen on Hopper) and the two would drift apart.
            cfg = self.cfg
            act_next = (
                self.update_then_act is not None and step >= cfg.initial_samples and step % cfg.checkpoint_every != 0
            )
            self._run_updates([self._sample()[0] for _ in range(count)], step, act_next)
            return
        for _ in range(count):
            batch, rows = self._sample()
            td_abs = np.asarray(self._run_updates([batch], step)["td_abs"])[0]  # [seeds, B]
            for slot, seed_rows, errors in zip(self.slots, rows, td_abs):
                slot.replay.update_priorities(seed_rows, errors)

    # -- logging -------------------------------------------------------------------------------

    def _log(self, step: int, elapsed: float) -> list[dict[str, Any]]:
        """Write the window ending at ``step`` (:func:`~offline_gitd.online.windows.log_window`)
        and start the next one."""
        closed = ClosedWindow(
            step,
            [slot.seed for slot in self.slots],
            self.window.get("episodes", []),
            [slot.last_result for slot in self.slots],
            self.updates,
            self.metrics,
            elapsed,
        )
        rows, results = log_window(self.run, self.cfg, self.metric_columns, closed)
        for slot, value in zip(self.slots, results):
            slot.last_result = value
        self.window, self.metrics = {}, MetricWindow(per_sample_means=True)
        return rows

    def train(self) -> None:
        cfg = self.cfg
        start = self.start()
        self.run.start_logs(start, self.seeds)
        console = Console(cfg, self.info.name, start, self.progress)
        started = time.perf_counter()
        for step in range(start + 1, cfg.steps + 1):
            self._env_step(step)
            count = updates_after_step(step, self.utd, cfg.initial_samples)
            if count:
                self._update(count, step)
            console.advance(1)
            checkpoint = step % cfg.checkpoint_every == 0 or step == cfg.steps
            if step % cfg.log_every == 0 or checkpoint:
                episodes = self.window.get("episodes", [])
                elapsed = time.perf_counter() - started
                rows = self._log(step, elapsed)
                started = time.perf_counter()
                console.window(step, episodes, rows, self.updates, elapsed)
            if checkpoint:
                self.save(step)
        console.close(self.run)
        if self.owns_envs:
            for slot in self.slots:
                slot.env.close()


def run_online(
    cfg: OnlineConfig,
    info: EnvInfo,
    family: Family,
    flags: RunFlags = RunFlags(),
    *,
    wrap_env: Callable[[gym.Env], gym.Env] | None = None,
    trust_pickles: bool = False,
    origin: Origin | None = None,
) -> Path:
    """Train ``family`` online as the resolved ``cfg`` says, ``flags`` as the command's; returns
    the run directory.

    ``wrap_env`` wraps every training env (``offline_gitd collect`` records through it);
    ``trust_pickles`` lets a resume read an older version's pickled host state.
    ``origin`` is the offline run a new run starts from, recorded in ``config.json``.
    """
    run_dir = Path(cfg.out)
    run = online_lifecycle(cfg, info, flags, origin=origin)
    OnlineRun(cfg, info, family, run_dir, flags.progress, wrap_env, run, trust_pickles, origin).train()
    return run_dir
