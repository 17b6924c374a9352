"""The offline training loop (DESIGN §5): epochs of gradient steps, evaluation after each epoch.

All seeds train in one compiled program: the training state carries a leading seed axis, every
seed has its own initialisation key and its own sampling stream ``np.random.default_rng([seed,
epoch])`` — drawn per epoch, so that a resumed run samples exactly what a straight run would have.
The host reads metrics once per chunk of updates, never per step.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd import __version__
from offline_gitd.batch import Batch
from offline_gitd.envs.make import SpaceInfo, evaluate_policies
from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.reference import d4rl_normalised, d4rl_reference
from offline_gitd.learners.config import OfflineConfig
from offline_gitd.learners.drivers import choose_driver
from offline_gitd.learners.family import Family
from offline_gitd.learners.feed import ChunkFeed
from offline_gitd.learners.provenance import collect as collect_provenance
from offline_gitd.learners.rundir import (
    METRICS_FILE,
    RESULT_COLUMNS,
    RESULTS_FILE,
    Checkpoints,
    CsvLog,
    open_run_dir,
    result_row,
)
from offline_gitd.progress import Progress
from offline_gitd.scalars import Outputs, ScalarLog

# Per-sample vectors are for prioritised replay, not for logs.
_UNLOGGED = ("td_abs",)


class TrainingDiverged(UsageError):
    """A non-finite loss: the run stops, keeping its last good checkpoint."""


@dataclass(frozen=True)
class OfflineData:
    """What the offline loop needs from a dataset, wherever it came from (DESIGN §1)."""

    domain: str  # atari | gym | continuous: selects the paper's defaults
    replay: Any  # .sample(batch_size, rng) -> Batch
    make_eval_env: Callable[[int], Any]  # seed -> gymnasium.Env for evaluation
    spaces: SpaceInfo
    suite: str
    env_name: str
    description: str


def stack_seeds(batches: list[Batch]) -> Batch:
    """Per-seed batches -> one batch with a leading seed axis."""
    return Batch(*(np.stack(field) for field in zip(*batches, strict=True)))


def _flatten_metrics(aux: dict[str, np.ndarray]) -> dict[str, float]:
    """Per-seed means over the epoch -> flat CSV columns (per-head vectors become name_k, 1-based)."""
    flat: dict[str, float] = {}
    for name, value in sorted(aux.items()):
        value = np.asarray(value)
        if value.ndim == 0:
            flat[name] = float(value)
        else:
            for k, v in enumerate(value, start=1):
                flat[f"{name}_{k}"] = float(v)
    return flat


def _eval_stats(returns: np.ndarray, d4rl: tuple[float, float] | None) -> dict[str, float]:
    """An evaluation's mean and std of returns and, where D4RL has a reference for the env, its
    D4RL-normalised mean (CORL logs the same three)."""
    mean = float(np.mean(returns)) if len(returns) else float("nan")
    stats = {"eval_return": mean, "eval_return_std": float(np.std(returns)) if len(returns) else float("nan")}
    if d4rl is not None:
        stats["eval_d4rl_score"] = d4rl_normalised(mean, d4rl)
    return stats


def run_offline(
    cfg: OfflineConfig,
    data: OfflineData,
    family: Family,
    *,
    resume: bool = False,
    progress: bool = True,
    overwrite: bool = False,
    command_line: Sequence[str] | None = None,
    outputs: Outputs | None = None,
) -> Path:
    """Train ``family`` on ``data`` as ``cfg`` says; returns the run directory.

    The run directory is written only once the training state exists (a network that does not
    fit the data fails before), so a failed start leaves no half-made run behind.
    """
    outputs = outputs or Outputs()
    run_dir = Path(cfg.out)
    seeds = cfg.seed_list
    state = jax.jit(jax.vmap(family.init))(jax.vmap(jax.random.PRNGKey)(jnp.asarray(seeds)))
    made_by = collect_provenance(command_line, cfg.data_dir)
    record = {
        "config": cfg.to_dict(),
        "run_id": uuid.uuid4().hex[:12],
        "config_hash": cfg.config_hash(),
        "dataset": data.description,
        "suite": data.suite,
        "env": data.env_name,
        "algorithm": cfg.algorithm_name(data.spaces.action_kind),
        "method_config": cfg.method_config(data.domain),
        "package_version": __version__,
        "created_at": made_by["at"],
        "provenance": made_by,
    }
    provenance = open_run_dir(run_dir, record, made_by, resume, overwrite)
    algorithm = provenance.get("algorithm", cfg.algo)  # runs started before it was recorded: cql
    checkpoints = Checkpoints(run_dir, outputs.keep_checkpoints)
    start_epoch = 0
    if resume:
        start_epoch, state, _ = checkpoints.restore_newest_intact(state)
    metrics_log = CsvLog(run_dir / METRICS_FILE)
    results_log = CsvLog(run_dir / RESULTS_FILE, RESULT_COLUMNS)
    for log in (metrics_log, results_log):
        log.drop_after("step", start_epoch * cfg.steps_per_epoch)
    scalars = ScalarLog(
        run_dir,
        seeds,
        provenance["config"],
        outputs,
        name=provenance["run_id"],
        resume_step=start_epoch * cfg.steps_per_epoch,
    )

    d4rl = d4rl_reference(data.suite, data.env_name)
    feed = ChunkFeed(data.replay, cfg.batch_size, choose_driver(cfg.driver, cfg.torso), cfg.frames)
    run_chunk = feed.runner(family.step)
    # acts for every seed at once, each seed's state on that seed's observations [seeds, envs, ...]
    act = jax.jit(jax.vmap(family.act))
    for epoch in range(start_epoch + 1, cfg.epochs + 1):
        started = time.perf_counter()
        rngs = [np.random.default_rng([seed, epoch]) for seed in seeds]
        sums: dict[str, np.ndarray] = {}
        done = 0
        bar = Progress(cfg.steps_per_epoch, f"epoch {epoch}/{cfg.epochs}", enabled=progress, leave=False)
        # the next chunk is sampled and sent to the device while this one runs
        for count, chunk in feed.epoch(rngs, cfg.steps_per_epoch, cfg.updates_per_call):
            state, aux = run_chunk(state, chunk)
            loss = np.asarray(aux["loss"])  # [count, seeds]: the one host read per chunk
            if not np.all(np.isfinite(loss)):
                step_index, seed_index = np.argwhere(~np.isfinite(loss))[0]
                kept = checkpoints.newest_intact()
                where = f"{checkpoints.path(kept)} (epoch {kept})" if kept else "none (no epoch finished)"
                raise TrainingDiverged(
                    f"loss became {loss[step_index, seed_index]} at gradient step "
                    f"{(epoch - 1) * cfg.steps_per_epoch + done + step_index + 1} (seed {seeds[seed_index]}); "
                    f"last good checkpoint: {where}"
                )
            for name, value in aux.items():
                if name not in _UNLOGGED:  # float64: epoch means that do not depend on the chunking
                    sums[name] = sums.get(name, 0.0) + np.asarray(value, np.float64).sum(axis=0)
            done += count
            bar.update(count)
            bar.set_postfix(loss=f"{float(loss[-1].mean()):.4g}")
        bar.close()
        step = epoch * cfg.steps_per_epoch
        returns = _evaluate_seeds(cfg, data, family, act, state, seeds, epoch)
        elapsed = time.perf_counter() - started
        metric_rows, result_rows = [], []
        for i, seed in enumerate(seeds):
            row = {
                "epoch": epoch,
                "step": step,
                "seed": seed,
                **_eval_stats(returns[i], d4rl),
            }
            row.update(_flatten_metrics({name: total[i] / cfg.steps_per_epoch for name, total in sums.items()}))
            row["epoch_seconds"] = round(elapsed, 3)
            metric_rows.append(row)
            if len(returns[i]):
                result_rows.append(
                    result_row(
                        provenance, algorithm, cfg.critic, cfg.K, cfg.beta, seed, step, float(np.mean(returns[i]))
                    )
                )
        metrics_log.append(metric_rows)
        results_log.append(result_rows)
        scalars.log(metric_rows)
        checkpoints.save(epoch, state)
        mean_return = np.mean([r["eval_return"] for r in metric_rows])
        bar.write(
            f"epoch {epoch}/{cfg.epochs}: step {step}, loss {np.mean([r['loss'] for r in metric_rows]):.4g}, "
            f"eval return {mean_return:.2f} over {len(seeds)} seed(s), {elapsed:.1f}s"
        )
    scalars.close()
    return run_dir


def _evaluate_seeds(cfg, data, family, batched_act, state, seeds, epoch) -> list[np.ndarray]:
    """Every seed's evaluation episodes, stepped together: one batched policy call per env step
    for all seeds (the learner's vmapped state acts for each seed on that seed's envs)."""
    if not cfg.eval_episodes:
        return [np.zeros(0) for _ in seeds]
    keys = jnp.stack([jax.random.PRNGKey(seed) for seed in seeds])

    def policy(obs: np.ndarray) -> np.ndarray:
        return np.asarray(batched_act(state, jnp.asarray(obs), keys))

    eval_seeds = [int(np.random.SeedSequence([seed, epoch, 1]).generate_state(1)[0]) for seed in seeds]
    env_fns = [lambda eval_seed=eval_seed: data.make_eval_env(eval_seed) for eval_seed in eval_seeds]
    returns = evaluate_policies(policy, env_fns, cfg.eval_episodes, eval_seeds, cfg.eval_epsilon)
    return list(returns)
