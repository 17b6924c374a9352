"""The offline training loop (docs/architecture.md#a-run-is-a-function-of-its-config): epochs of gradient steps, evaluation after each epoch.

All seeds train in one compiled program: the training state carries a leading seed axis, every
seed has its own initialisation key and its own sampling stream ``np.random.default_rng([seed,
epoch])`` — drawn per epoch, so that a resumed run samples exactly what a straight run would have.
The host reads metrics once per chunk of updates, never per step.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.data.datasets import OfflineData
from offline_gitd.envs.make import evaluate_policies
from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.reference import d4rl_normalised, d4rl_reference
from offline_gitd.learners.drivers import choose_compiler_options, choose_driver, choose_seed_strategy
from offline_gitd.learners.family import Family, seed_states
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.offline.feed import ChunkFeed
from offline_gitd.progress import Progress
from offline_gitd.rundir.files import read_config
from offline_gitd.rundir.flags import RunFlags
from offline_gitd.rundir.lifecycle import RunLifecycle, run_record
from offline_gitd.rundir.metrics import MetricWindow


def evaluation_seed(seed: int, epoch: int) -> int:
    """The seed of training seed ``seed``'s evaluation episodes after epoch ``epoch``
    (docs/runs.md#evaluating-a-trained-agent): a function of both alone, so a resumed run evaluates
    as a straight one would, and a fresh seed per epoch so that epochs are not judged on the same
    start states. Written to ``metrics.csv`` (``eval_seed``), and ``offline_gitd evaluate`` uses it
    by default, so that evaluating a checkpoint gives the return the loop logged for it."""
    return int(np.random.SeedSequence([seed, epoch, 1]).generate_state(1)[0])


def _eval_stats(returns: np.ndarray, d4rl: tuple[float, float] | None) -> dict[str, float]:
    """An evaluation's mean and std of returns and, where D4RL has a reference for the env, its
    D4RL-normalised mean (CORL logs the same three)."""
    mean = float(np.mean(returns)) if len(returns) else float("nan")
    stats = {"eval_return": mean, "eval_return_std": float(np.std(returns)) if len(returns) else float("nan")}
    if d4rl is not None:
        stats["eval_d4rl_score"] = d4rl_normalised(mean, d4rl)
    return stats


def check_same_data(run_dir: Path, data_sha256: str | None) -> None:
    """Refuse to resume a run on data whose content differs from what it started on: its later
    epochs would be trained on another recording under the same row identity
    (docs/leaderboard.md#what-made-a-row). Runs started before the digest was recorded resume."""
    recorded = read_config(run_dir).get("data_sha256")
    if recorded and data_sha256 and recorded != data_sha256:
        raise UsageError(
            f"{run_dir} started on data of digest {recorded[:12]}..., the dataset here has {data_sha256[:12]}...: "
            "another recording under the same name; train it as a new run (--out elsewhere or --overwrite)"
        )


def run_offline(
    cfg: OfflineConfig,
    data: OfflineData,
    family: Family,
    flags: RunFlags = RunFlags(),
) -> Path:
    """Train ``family`` on ``data`` as ``cfg`` says, ``flags`` as the command's; returns the run directory.

    The run directory is written only once the training state exists (a network that does not
    fit the data fails before), so a failed start leaves no half-made run behind.
    """
    run_dir = Path(cfg.out)
    seeds = cfg.seed_list
    if flags.resume:
        check_same_data(run_dir, data.data_sha256)
    state = seed_states(family, seeds)
    record, made_by = run_record(
        cfg,
        suite=data.suite,
        env=data.env_name,
        method_config=cfg.method_config(data.domain),
        command_line=flags.command_line,
        data_dir=cfg.data_dir,
        dataset=data.description,
        algorithm=cfg.algorithm_name(data.spaces.action_kind),
        data_sha256=data.data_sha256,
    )
    run = RunLifecycle(
        run_dir, record, made_by, resume=flags.resume, overwrite=flags.overwrite, outputs=flags.outputs, unit="epoch"
    )
    provenance = run.open()
    algorithm = provenance.get("algorithm", cfg.algo)  # runs started before it was recorded: cql
    board = cfg.board_identity()  # the critic, K and beta columns
    start_epoch, state, _ = run.restore(state)
    run.start_logs(start_epoch * cfg.steps_per_epoch, seeds)

    d4rl = d4rl_reference(data.suite, data.env_name)
    feed = ChunkFeed(data.replay, cfg.batch_size, choose_driver(cfg.driver, cfg.torso, chunks=True), cfg.frames)
    run_chunk = feed.runner(family.step, choose_seed_strategy("auto", cfg.torso), choose_compiler_options())
    # acts for every seed at once, each seed's state on that seed's observations [seeds, envs, ...]
    act = jax.jit(jax.vmap(family.act))
    for epoch in range(start_epoch + 1, cfg.epochs + 1):
        started = time.perf_counter()
        rngs = [np.random.default_rng([seed, epoch]) for seed in seeds]
        window = MetricWindow(per_sample_means=False)  # no td_abs_mean offline (rundir/metrics.py)
        done = 0
        bar = Progress(cfg.steps_per_epoch, f"epoch {epoch}/{cfg.epochs}", enabled=flags.progress, leave=False)
        # the next chunk is sampled and sent to the device while this one runs
        for count, chunk in feed.epoch(rngs, cfg.steps_per_epoch, cfg.updates_per_call):
            state, aux = run_chunk(state, chunk)
            loss = np.asarray(aux["loss"])  # [count, seeds]: the one host read per chunk
            first = (epoch - 1) * cfg.steps_per_epoch + done + 1
            run.check_finite(loss, seeds, lambda i, first=first: f"gradient step {first + i}")
            window.add(aux)
            done += count
            bar.update(count)
            bar.set_postfix(loss=f"{float(loss[-1].mean()):.4g}")
        bar.close()
        step = epoch * cfg.steps_per_epoch
        returns = evaluate_seeds(cfg, data, family, act, state, seeds, epoch)
        elapsed = time.perf_counter() - started
        metric_rows, result_rows = [], []
        for i, seed in enumerate(seeds):
            row = {
                "epoch": epoch,
                "step": step,
                "seed": seed,
                **_eval_stats(returns[i], d4rl),
                **({"eval_seed": evaluation_seed(seed, epoch)} if cfg.eval_episodes else {}),
            }
            row.update(window.means(i))
            row["epoch_seconds"] = round(elapsed, 3)
            metric_rows.append(row)
            if len(returns[i]):
                result_rows.append(run.result_row(algorithm, *board, seed, step, float(np.mean(returns[i]))))
        run.write(metric_rows, result_rows)
        run.save(epoch, state)
        mean_return = np.mean([r["eval_return"] for r in metric_rows])
        bar.write(
            f"epoch {epoch}/{cfg.epochs}: step {step}, loss {np.mean([r['loss'] for r in metric_rows]):.4g}, "
            f"eval return {mean_return:.2f} over {len(seeds)} seed(s), {elapsed:.1f}s"
        )
    run.close()
    return run_dir


def evaluate_seeds(cfg, data, family, batched_act, state, seeds, epoch) -> list[np.ndarray]:
    """Every seed's evaluation episodes, stepped together: one batched policy call per env step
    for all seeds (the learner's vmapped state acts for each seed on that seed's envs). ``data``
    needs only ``make_eval_env``: ``load_run(...).evaluate()`` replays a checkpoint's evaluation
    through this same function, so its program and its numbers are the loop's."""
    if not cfg.eval_episodes:
        return [np.zeros(0) for _ in seeds]
    keys = jnp.stack([jax.random.PRNGKey(seed) for seed in seeds])

    def policy(obs: np.ndarray) -> np.ndarray:
        return np.asarray(batched_act(state, jnp.asarray(obs), keys))

    eval_seeds = [evaluation_seed(seed, epoch) for seed in seeds]
    env_fns = [lambda eval_seed=eval_seed: data.make_eval_env(eval_seed) for eval_seed in eval_seeds]
    returns = evaluate_policies(policy, env_fns, cfg.eval_episodes, eval_seeds, cfg.eval_epsilon)
    return list(returns)
