"""The compiled DQN loop: its replay ring, its schedules, its determinism over seeds, and that it
learns CartPole."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from offline_gitd.envs.jax_cartpole import RESET_BOUND, fallen
from offline_gitd.errors import ConfigError
from offline_gitd.online.compiled import (
    CompiledDQN,
    SeedCarry,
    StepRecord,
    finished_episodes,
    ring_add,
    ring_init,
    ring_sample,
)
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.schedules import total_updates, utd_fraction
from offline_gitd.online.train import compiled_dqn


def make_loop(tmp_path: Any, **kw: Any) -> CompiledDQN:
    """CartPole-v1's online dqn config (the package's defaults unless ``kw`` says otherwise)."""
    settings = dict(algo="dqn", env="CartPole-v1", critic="td", out=str(tmp_path / "run")) | kw
    return compiled_dqn(OnlineConfig(**settings))[0]


def run(loop: CompiledDQN, seeds: list[int], steps: int, chunk: int) -> tuple[SeedCarry, StepRecord]:
    """``steps`` env steps in chunks, the records joined along the step axis."""
    carry, records = loop.init(seeds), []
    for first in range(0, steps, chunk):
        carry, record = loop.run_chunk(carry, first, min(chunk, steps - first))
        records.append(jax.device_get(record))
    return carry, jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *records)


# ------------------------------------------------------------------------------------ replay ring


def test_the_ring_keeps_the_newest_transitions_and_samples_only_what_it_holds() -> None:
    """Write i (from 1; empty slots hold 0) carries the value i everywhere. Capacity 3, 5 written:
    slots hold 4, 5, 3 (write i goes to slot (i - 1) mod 3) and draws cover exactly {3, 4, 5};
    capacity 5, 2 written: draws come from {1, 2} only, never from the empty slots."""
    add, sample = jax.jit(ring_add), jax.jit(ring_sample, static_argnums=2)

    def filled(capacity: int, writes: int):
        ring = ring_init(capacity, obs_size=2)
        for i in range(1, writes + 1):
            value = jnp.float32(i)
            ring = add(ring, jnp.full(2, value), jnp.int32(i), value, value, jnp.full(2, value + 0.5))
        return ring

    ring = filled(3, 5)
    assert int(ring.count) == 5
    np.testing.assert_array_equal(ring.action, [4, 5, 3])
    np.testing.assert_array_equal(ring.obs[:, 0], [4, 5, 3])
    batch = sample(ring, jax.random.PRNGKey(0), 300)
    assert set(np.asarray(batch.action).tolist()) == {3, 4, 5}
    # every field of a drawn transition comes from the same slot
    for field in (batch.obs[:, 1], batch.reward, batch.discount, batch.next_obs[:, 0] - 0.5):
        np.testing.assert_array_equal(field, batch.action.astype(np.float32))
    np.testing.assert_array_equal(batch.weight, np.ones(300, np.float32))

    batch = sample(filled(5, 2), jax.random.PRNGKey(1), 300)
    assert set(np.asarray(batch.action).tolist()) == {1, 2}


# ------------------------------------------------------------------------------------- the loop


def test_refuses_what_it_does_not_do(tmp_path: Any) -> None:
    for kw, message in (
        (dict(env="LunarLander-v3"), "env written in JAX"),
        (dict(per=True), "--per"),
        (dict(n_step=3), "--n-step"),
        (dict(algo="sac"), "online dqn"),
    ):
        with pytest.raises(ConfigError, match=message):
            make_loop(tmp_path, **kw)


@pytest.mark.parametrize("utd", [2.0, 0.25])
def test_updates_follow_the_utd_schedule_and_skip_steps_without_one(tmp_path: Any, utd: float) -> None:
    """After 300 steps with 100 initial samples: UTD 2 has run 400 updates, UTD 1/4 50 (the
    Python loop's ``total_updates``), counted by the learner itself and by the records. The
    "update now?" flag stays one scalar for every seed, so the vmapped program keeps a real
    branch (``cond``) instead of computing every step's updates and throwing most away."""
    loop = make_loop(tmp_path, utd=utd, initial_samples=100, batch_size=8, mlp_hidden="16")
    carry, records = run(loop, [0, 1], steps=300, chunk=150)
    expected = total_updates(300, utd_fraction(utd), 100)
    np.testing.assert_array_equal(carry.learner.step, [expected, expected])
    np.testing.assert_array_equal(records.updates.sum(axis=1), [expected, expected])
    assert records.updates[:, :100].sum() == 0
    schedule = loop.schedule
    jaxpr = loop.program.trace(loop.init([0, 1]), schedule.epsilons(0, 4), schedule.update_steps(0, 4)).jaxpr
    assert " cond[" in str(jaxpr)


def test_a_seed_runs_the_same_alone_twice_and_beside_another(tmp_path: Any) -> None:
    """A seed's run is a function of the seed: twice alone it is the same to the bit, and vmapped
    beside another seed it is the same to float rounding (episodes the same, weights close)."""
    loop = make_loop(tmp_path, initial_samples=200, batch_size=16, mlp_hidden="32,32", T=50)
    steps, chunk = 1_200, 400
    alone = [run(loop, [seed], steps, chunk) for seed in (0, 1)]
    again = run(loop, [1], steps, chunk)
    for a, b in zip(jax.tree.leaves(alone[1]), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)
    both = run(loop, [0, 1], steps, chunk)
    for i, (carry, records) in enumerate(alone):
        np.testing.assert_array_equal(both[1].done[i], records.done[0])
        np.testing.assert_array_equal(both[1].episode_return[i], records.episode_return[0])
        for a, b in zip(jax.tree.leaves(both[0].learner.params), jax.tree.leaves(carry.learner.params)):
            np.testing.assert_allclose(a[i], b[0], rtol=1e-4, atol=1e-5)
    assert alone[0][1].done.sum() != alone[1][1].done.sum() or not np.array_equal(
        alone[0][1].episode_return, alone[1][1].episode_return
    )  # the two seeds do differ


def test_terminations_cut_the_bootstrap_and_truncations_do_not(tmp_path: Any) -> None:
    """A 12-step time limit under random play, so episodes end both ways: the replay's discount is
    0 exactly on the transitions into a fallen state and gamma elsewhere, truncations included,
    and the transition after an episode's end starts from a fresh reset state."""
    loop = make_loop(tmp_path, horizon=12, initial_samples=10_000, replay_size=2_000, mlp_hidden="16")
    carry, records = run(loop, [0], steps=1_000, chunk=1_000)
    ring = jax.tree.map(lambda x: np.asarray(x[0]), carry.replay)
    assert int(ring.count) == 1_000
    fell = np.asarray(jax.vmap(fallen)(ring.next_obs[:1_000]))
    np.testing.assert_array_equal(ring.discount[:1_000], np.where(fell, 0.0, 0.99).astype(np.float32))
    done = records.done[0]
    truncated = done & ~fell
    assert fell.sum() > 10 and truncated.sum() > 10
    np.testing.assert_array_equal(records.episode_length[0][truncated], 12)
    assert np.abs(ring.obs[1:1_000][done[:-1]]).max() <= RESET_BOUND
    np.testing.assert_array_equal(ring.obs[1:1_000][~done[:-1]], ring.next_obs[:999][~done[:-1]])


def gym_random_returns(episodes: int, seed: int) -> np.ndarray:
    env, rng, returns = gym.make("CartPole-v1"), np.random.default_rng(seed), []
    for episode in range(episodes):
        env.reset(seed=seed * 100_000 + episode)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(rng.integers(2)))
            total, done = total + reward, terminated or truncated
        returns.append(total)
    return np.asarray(returns)


def test_its_random_phase_returns_have_gymnasiums_distribution(tmp_path: Any) -> None:
    """All initial samples (uniformly random actions, no update): the loop's episodes, auto-reset
    included, have the returns of gymnasium's CartPole-v1 under the same policy (two-sample KS,
    ~500 episodes each), and each seed's episodes tile its steps one after another."""
    loop = make_loop(tmp_path, initial_samples=10_000, batch_size=8, mlp_hidden="16")
    seeds = [0, 1, 2, 3]
    _, records = run(loop, seeds, steps=2_800, chunk=1_400)
    rows = finished_episodes(records, seeds, 0, [0] * len(seeds))
    for seed in seeds:
        mine = [row for row in rows if row["seed"] == seed]
        assert [row["episode"] for row in mine] == list(range(len(mine)))
        assert [row["step"] for row in mine] == np.cumsum([row["length"] for row in mine]).tolist()
        assert all(row["return"] == row["length"] for row in mine)  # reward 1 per step
    ours, theirs = np.asarray([row["return"] for row in rows]), gym_random_returns(500, seed=5)
    assert len(ours) > 400
    assert stats.ks_2samp(ours, theirs).pvalue > 0.01, (ours.mean(), theirs.mean())


@pytest.mark.e2e  # trains for 15,000 steps: in the default run, not the quick one
def test_it_learns_cartpole(tmp_path: Any) -> None:
    """DQN with the package's CartPole-v1 defaults (td, FC 128-128, batch 64, 1,000 initial
    samples, epsilon to 0.01 over 10,000 steps, target every 100 updates): after 15,000 steps the
    last 10 episodes of each of two seeds average far above the uniformly random policy's ~22."""
    loop = make_loop(tmp_path)
    _, records = run(loop, [0, 1], steps=15_000, chunk=5_000)
    rows = finished_episodes(records, [0, 1], 0, [0, 0])
    assert np.isfinite(records.metrics["loss"]).all()
    for seed in (0, 1):
        last = [row["return"] for row in rows if row["seed"] == seed][-10:]
        assert np.mean(last) > 100, (seed, last)


@pytest.mark.e2e  # compiles the MinAtar CNN's whole loop (about 14 s): in the default run, not the quick one
def test_it_runs_minatar_breakout_on_its_boards(tmp_path: Any) -> None:
    """MinAtar/Breakout-v1 in the compiled loop with the minatar torso: uint8 10x10x4 boards in the
    carry and the replay (not flattened, not float), 2,000 steps of two seeds the same when run
    twice, updates after the 1,000 random ones, and the episodes reported back to back, each at
    least the 6 steps the ball needs to reach the paddle row, each new one from a start board."""
    loop = make_loop(
        tmp_path, env="MinAtar/Breakout-v1", replay_size=2_000, initial_samples=1_000, batch_size=8, mlp_hidden="32"
    )
    assert loop.env.max_episode_steps == 10_000  # the minatar domain's horizon
    seeds = [0, 1]
    carry, records = run(loop, seeds, steps=2_000, chunk=1_000)
    again = run(loop, seeds, steps=2_000, chunk=1_000)
    for a, b in zip(jax.tree.leaves((carry, records)), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b)
    assert carry.obs.shape == (2, 10, 10, 4) and carry.obs.dtype == jnp.uint8
    ring = jax.tree.map(np.asarray, carry.replay)
    assert ring.obs.shape == ring.next_obs.shape == (2, 2_000, 10, 10, 4) and ring.obs.dtype == np.uint8
    assert records.done.shape == (2, 2_000)
    np.testing.assert_array_equal(records.updates.sum(axis=1), [1_000, 1_000])
    assert np.isfinite(records.metrics["loss"]).all()
    rows = finished_episodes(records, seeds, 0, [0, 0])
    for i, seed in enumerate(seeds):
        mine = [row for row in rows if row["seed"] == seed]
        assert len(mine) > 50
        assert [row["step"] for row in mine] == np.cumsum([row["length"] for row in mine]).tolist()
        assert min(row["length"] for row in mine) >= 6
        assert all(row["return"] == int(row["return"]) >= 0 for row in mine)
        starts = ring.obs[i, 1:][records.done[i, :-1]]  # the board after each ended episode
        assert starts[:, 1:4, :, 3].all() and starts[:, 3, :, 1].sum(axis=1).tolist() == [1] * len(starts)
        continuing = ~records.done[i, :-1]
        np.testing.assert_array_equal(ring.obs[i, 1:][continuing], ring.next_obs[i, :-1][continuing])
