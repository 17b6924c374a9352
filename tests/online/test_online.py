"""The online learners (DQN / SAC families): schedules, UTD, replay wiring, acting, smoke runs on
real envs, exact resume, seeds in one program, divergence and bad input; slow learning checks below.
"""

from __future__ import annotations

import csv
import json
import os
import time
from fractions import Fraction
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.errors import ConfigError
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.host_state import read_host_state
from offline_gitd.online.loop import run_online
from offline_gitd.online.schedules import epsilon_at, total_updates, updates_after_step, utd_fraction
from offline_gitd.online.train import build_family, resolve_config, resume_config, train
from offline_gitd.rundir.checkpoints import Checkpoints
from offline_gitd.rundir.flags import RunFlags
from offline_gitd.rundir.lifecycle import TrainingDiverged

# One tiny network for every DQN test (same K, T, batch, seeds), so that the module's compilation
# cache compiles its programs once.
TINY = dict(mlp_hidden="16,16", batch_size=16, initial_samples=100, log_every=50, checkpoint_every=100)


@pytest.fixture(scope="module", autouse=True)
def compilation_cache(jax_compilation_cache):
    """Runs of one test (straight, halves, resumed) compile the same programs: the shared on-disk
    cache of conftest.py, for every test of this module, so the default test run stays short."""
    yield


def tiny(out: Path, algo: str = "dqn", env: str = "CartPole-v1", **overrides) -> OnlineConfig:
    values = dict(algo=algo, env=env, critic="gitd", K=3, T=20, steps=300, seeds="0-1", out=str(out), **TINY)
    values.setdefault("loop", "python")  # these tests are the Python loop's
    values.update(overrides)
    return OnlineConfig(**values)


def final_params(run_dir: Path, cfg: OnlineConfig):
    """The last checkpoint's training state as numpy leaves."""
    cfg, info = resolve_config(cfg)
    family = build_family(cfg, info)
    like = jax.vmap(family.init)(jax.vmap(jax.random.PRNGKey)(jnp.asarray(cfg.seed_list)))
    checkpoints = Checkpoints(run_dir)
    return jax.tree.map(np.asarray, checkpoints.restore(checkpoints.latest(), like))


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


# -- schedules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("utd", "per_step"), [(4, [4, 4, 4, 4, 4, 4, 4, 4]), (1, [1] * 8), (0.25, [0, 0, 0, 1, 0, 0, 0, 1])]
)
def test_updates_after_each_env_step(utd, per_step):
    fraction = utd_fraction(utd)
    initial = 10
    assert [updates_after_step(step, fraction, initial) for step in range(1, initial + 1)] == [0] * initial
    assert [updates_after_step(initial + i, fraction, initial) for i in range(1, 9)] == per_step
    assert total_updates(initial + 1000, fraction, initial) == int(1000 * utd)


def test_utd_fractions_and_bad_values():
    assert utd_fraction(0.1) == Fraction(1, 10) and utd_fraction(1 / 32) == Fraction(1, 32) and utd_fraction(10) == 10
    for bad in (0, -1, 2.5, 0.3, float("nan"), float("inf")):
        with pytest.raises(ConfigError):
            utd_fraction(bad)


def test_epsilon_decays_linearly_after_the_initial_samples():
    values = [epsilon_at(step, 1.0, 0.01, 100, 20) for step in (0, 19, 20, 70, 120, 10_000)]
    assert values == pytest.approx([1.0, 1.0, 1.0, 0.505, 0.01, 0.01])
    assert epsilon_at(5, 1.0, 0.01, 0, 0) == 0.01


# -- defaults --------------------------------------------------------------------------------


def test_paper_defaults_per_domain(tmp_path):
    atari, _ = resolve_config(OnlineConfig(env="Pong", out=str(tmp_path)))
    assert (atari.gamma, atari.batch_size, atari.T, atari.initial_samples, atari.replay_size) == (
        0.99,
        32,
        8000,
        20_000,
        1_000_000,
    )
    assert (atari.epsilon_steps, atari.lr, atari.adam_eps, atari.clip_rewards, atari.torso) == (
        250_000,
        6.25e-5,
        1.5e-4,
        True,
        "nature",
    )
    strong, _ = resolve_config(OnlineConfig(env="atari:Pong", preset="strong", out=str(tmp_path)))
    assert (strong.torso, strong.per, strong.n_step) == ("impala-gap", True, 3)
    lunar, info = resolve_config(OnlineConfig(env="LunarLander-v3", out=str(tmp_path)))
    assert (
        lunar.initial_samples,
        lunar.replay_size,
        lunar.T,
        lunar.batch_size,
        lunar.utd,
        lunar.mlp_hidden,
        lunar.horizon,
    ) == (1000, 10_000, 100, 64, 1.0, "200", 500)
    assert (info.suite, info.name) == ("gym", "LunarLander-v3")
    car, _ = resolve_config(OnlineConfig(env="MountainCar-v0", out=str(tmp_path)))
    assert (car.T, car.batch_size, car.mlp_hidden, car.horizon) == (200, 32, "50", 200)
    sac, info = resolve_config(OnlineConfig(algo="sac", env="HalfCheetah-v5", out=str(tmp_path)))
    assert (
        sac.initial_samples,
        sac.replay_size,
        sac.batch_size,
        sac.lr,
        sac.mlp_hidden,
        sac.tau,
        sac.adam_eps,
        sac.heads,
    ) == (5000, 1_000_000, 256, 1e-3, "256,256", 5e-3, 1e-8, "independent")
    assert (info.suite, info.name) == ("mujoco", "HalfCheetah-v5")
    sacrc, _ = resolve_config(OnlineConfig(algo="sac", env="HalfCheetah-v5", critic="tdrc", out=str(tmp_path)))
    assert sacrc.heads == "shared_linear"


# -- acting ----------------------------------------------------------------------------------


def test_greedy_action_is_the_argmax_of_the_mean_head(tmp_path):
    cfg, info = resolve_config(tiny(tmp_path / "run"))
    family = build_family(cfg, info)
    state = family.init(jax.random.PRNGKey(3))
    obs = jax.random.normal(jax.random.PRNGKey(4), (64, 4))
    q = family.net.q_values(state.params, obs)  # [K, B, actions]
    assert q.shape[0] == 3
    np.testing.assert_array_equal(family.act(state, obs, None), jnp.argmax(q.mean(axis=0), axis=-1))


# -- runs on real envs -----------------------------------------------------------------------


@pytest.mark.e2e
def test_dqn_smoke_on_cartpole(tmp_path):
    run_dir = train(tiny(tmp_path / "run", steps=200), progress=False)
    rows = read_rows(run_dir / "metrics.csv")
    assert {int(r["updates"]) for r in rows if r["step"] == "200"} == {100}
    assert {r["epsilon"] for r in rows if r["step"] == "50"} == {"1.0"}
    # the rate step 200 acted with (epsilon_at(199, ...)), not the next step's
    cfg = resolve_config(tiny(tmp_path / "run", steps=200))[0]
    acted = epsilon_at(199, cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_steps, cfg.initial_samples)
    assert acted != epsilon_at(200, cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_steps, cfg.initial_samples)
    assert {float(r["epsilon"]) for r in rows if r["step"] == "200"} == {acted}
    results = read_rows(run_dir / "results.csv")
    assert {(r["suite"], r["env"], r["algorithm"], r["critic"], r["K"]) for r in results} == {
        ("gym", "CartPole-v1", "dqn", "gitd", "3")
    }
    assert sorted({int(r["step"]) for r in results}) == [50, 100, 150, 200]
    assert len(read_rows(run_dir / "episodes.csv")) > 5


def test_per_and_n_step_wiring(tmp_path):
    run_dir = train(tiny(tmp_path / "run", per=True, n_step=3, steps=200), progress=False)
    replay = read_host_state(run_dir / "host_state" / "200.npz", *resolve_config(resume_config(run_dir)))["slots"][0][
        "replay"
    ]
    assert replay.n_step == 3 and replay.prioritized
    priorities = replay._tree.get(np.arange(replay.store.num_rows))
    updated = priorities[(priorities > 0) & (priorities != 1.0)]
    assert len(updated) > 50  # rows sampled by the 100 updates got |TD| priorities
    assert len(np.unique(updated)) > 10


@pytest.mark.e2e
def test_atari_smoke_strong_preset_on_pong(tmp_path):
    cfg = OnlineConfig(
        env="Pong",
        critic="td",
        preset="strong",
        steps=48,
        batch_size=4,
        initial_samples=32,
        utd=0.25,
        log_every=16,
        checkpoint_every=48,
        out=str(tmp_path / "run"),
    )
    run_dir = train(cfg, progress=False)
    config = json.loads((run_dir / "config.json").read_text())
    assert (
        config["suite"],
        config["env"],
        config["config"]["torso"],
        config["config"]["per"],
        config["config"]["n_step"],
    ) == ("atari", "Pong", "impala-gap", True, 3)
    rows = read_rows(run_dir / "metrics.csv")
    assert int(rows[-1]["updates"]) == 4 and np.isfinite(float(rows[-1]["loss"]))
    replay = read_host_state(run_dir / "host_state" / "48.npz", *resolve_config(resume_config(run_dir)))["slots"][0][
        "replay"
    ]
    assert replay.store.obs.shape[1:] == (84, 84) and replay.stack == 4  # single frames, stacked when sampling


# -- exact resume and seeds ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("algo", "env", "extra"),
    [
        ("dqn", "CartPole-v1", dict(per=True, n_step=3, utd=4)),
        ("sac", "Pendulum-v1", dict(T=None, K=2, horizon=50)),
    ],
)
@pytest.mark.e2e
def test_resume_is_bit_identical(tmp_path, algo, env, extra):
    common = dict(algo=algo, env=env, seeds="0-1", initial_samples=60, log_every=40, checkpoint_every=80, **extra)
    straight = tiny(tmp_path / "straight", steps=160, **common)
    train(straight, progress=False)
    halves = tiny(tmp_path / "halves", steps=80, **common)
    train(halves, progress=False)
    train(resume_config(tmp_path / "halves", {"steps": 160}), resume=True, progress=False)
    a, b = final_params(tmp_path / "straight", straight), final_params(tmp_path / "halves", straight)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert read_rows(tmp_path / "straight" / "episodes.csv") == read_rows(tmp_path / "halves" / "episodes.csv")
    metrics = read_rows(tmp_path / "halves" / "metrics.csv")
    assert {int(r["updates"]) for r in metrics if r["step"] == "160"} == {100 * extra.get("utd", 1)}
    results = read_rows(tmp_path / "halves" / "results.csv")
    assert {(r["suite"], r["env"], r["algorithm"]) for r in results} == {("gym", env, algo)}
    if algo == "sac":  # the SAC family's own metrics
        assert {"alpha", "actor_loss", "entropy", "loss", "td_abs_mean", "q_mean_1", "h_mean_1"} <= set(metrics[0])
        assert {r["length"] for r in read_rows(tmp_path / "halves" / "episodes.csv")} == {"50"}  # --horizon


@pytest.mark.e2e
def test_seeds_in_one_program_match_one_seed_alone(tmp_path):
    both = tiny(tmp_path / "both", steps=200, utd=0.25)
    alone = tiny(tmp_path / "alone", seeds="1", steps=200, utd=0.25)
    train(both, progress=False)
    train(alone, progress=False)
    a, b = final_params(tmp_path / "both", both), final_params(tmp_path / "alone", alone)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(x[1], y[0], rtol=1e-4, atol=1e-5)
    assert {int(r["updates"]) for r in read_rows(tmp_path / "both" / "metrics.csv") if r["step"] == "200"} == {25}
    seed1 = [r for r in read_rows(tmp_path / "both" / "episodes.csv") if r["seed"] == "1"]
    assert [r["return"] for r in seed1] == [r["return"] for r in read_rows(tmp_path / "alone" / "episodes.csv")]


def poisoned(family, updates: int):
    """The real family, whose loss turns NaN after ``updates`` updates."""

    class Poisoned:
        init, act = family.init, family.act

        @staticmethod
        def step(state, batch):
            state, aux = family.step(state, batch)
            aux["loss"] = jnp.where(state.step > updates, jnp.nan, aux["loss"])
            return state, aux

    return Poisoned()


@pytest.mark.e2e
def test_divergence_names_the_step_and_keeps_the_checkpoint(tmp_path):
    cfg, info = resolve_config(tiny(tmp_path / "run", steps=300))
    family = build_family(cfg, info)
    with pytest.raises(
        TrainingDiverged, match=r"at env step 251, update 151 \(seed 0\); last good checkpoint: .*checkpoints/200"
    ):
        run_online(cfg, info, poisoned(family, 150), RunFlags(progress=False))
    assert Checkpoints(tmp_path / "run").latest() == 200


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["online", "dqn", "--env", "CartPol-v1"], "unknown environment 'CartPol-v1'; did you mean CartPole-v1"),
        (
            ["online", "dqn", "--env", "Pendulum-v1"],
            "Pendulum-v1 has continuous actions; online dqn needs discrete ones",
        ),
        (
            ["online", "sac", "--env", "CartPole-v1"],
            "CartPole-v1 has discrete actions; online sac needs continuous ones",
        ),
        (
            ["online", "dqn", "--env", "CartPole-v1", "--loop", "python", "--utd", "2.5"],
            "--utd must be an integer >= 1 or 1/n",
        ),
        (
            ["online", "dqn", "--env", "CartPole-v1", "--loop", "python", "--utd", "0"],
            "--utd must be a positive number",
        ),
        (
            ["online", "dqn", "--env", "CartPole-v1", "--loop", "python", "--torso", "nature"],
            "vector observations of shape (4,): use --torso mlp",
        ),
        (["online", "sac", "--env", "Pendulum-v1", "--preset", "strong"], "needs online dqn"),
    ],
)
def test_bad_input_is_one_line_before_any_work(tmp_path, capsys, argv, message):
    out = tmp_path / "run"
    assert main([*argv, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.e2e
def test_cli_run_and_resume(tmp_path, capsys):
    out = tmp_path / "run"
    common = [
        "--mlp-hidden",
        "16,16",
        "--batch-size",
        "16",
        "--T",
        "20",
        "--seeds",
        "0-1",
        "--initial-samples",
        "50",
        "--log-every",
        "50",
        "--checkpoint-every",
        "100",
        "--no-progress",
    ]
    assert (
        main(
            [
                "online",
                "dqn",
                "--env",
                "CartPole-v1",
                "--critic",
                "gitd",
                "--K",
                "3",
                "--steps",
                "100",
                "--out",
                str(out),
                *common,
            ]
        )
        == 0
    )
    assert (
        main(
            ["online", "dqn", "--env", "CartPole-v1", "--loop", "python", "--steps", "100", "--out", str(out), *common]
        )
        == 2
    )
    assert "already holds a run" in capsys.readouterr().err
    assert main(["online", "dqn", "--out", str(out), "--resume", "--steps", "200", "--no-progress"]) == 0
    assert "results.csv" in capsys.readouterr().out
    assert Checkpoints(out).latest() == 200


# -- slow learning checks (pytest -m slow) -------------------------------------------------
# Gi-DQN on CartPole-v1: mean return >= 195 over the last 20 training episodes within 50,000 env
# steps for at least 3 of 5 seeds. Gi-SAC on Pendulum-v1: mean return >= -250 over the last 10
# training episodes within 20,000 env steps for at least 3 of 5 seeds. The same runs for td, tdrc and
# itd measure the other critics; their figures are printed (-s) and appended to
# $ONLINE_LEARNING_LOG if set. Only the paper's algorithm (gitd) is asserted.

SEEDS = "0-4"
CHECKS = {
    # env: (algo, steps, threshold, episodes in the running mean)
    "CartPole-v1": ("dqn", 50_000, 195.0, 20),
    "Pendulum-v1": ("sac", 20_000, -250.0, 10),
}


def first_reaching(episodes_csv: Path, threshold: float, window: int) -> dict[int, int | None]:
    """Per seed, the env step at which the mean of the last ``window`` training episodes first
    reaches ``threshold`` (None if never)."""
    by_seed: dict[int, list[tuple[int, float]]] = {}
    with episodes_csv.open() as f:
        for row in csv.DictReader(f):
            by_seed.setdefault(int(row["seed"]), []).append((int(row["step"]), float(row["return"])))
    reached: dict[int, int | None] = {}
    for seed, episodes in sorted(by_seed.items()):
        returns = np.array([r for _, r in episodes])
        reached[seed] = None
        for i in range(window, len(returns) + 1):
            if returns[i - window : i].mean() >= threshold:
                reached[seed] = episodes[i - 1][0]
                break
    return reached


@pytest.mark.slow
@pytest.mark.parametrize("critic", ["gitd", "td", "tdrc", "itd"])
@pytest.mark.parametrize("env", list(CHECKS))
def test_learns_with_default_settings(env: str, critic: str, tmp_path: Path) -> None:
    algo, steps, threshold, window = CHECKS[env]
    started = time.perf_counter()
    run_dir = train(
        OnlineConfig(algo=algo, env=env, critic=critic, steps=steps, seeds=SEEDS, out=str(tmp_path / "run")),
        progress=False,
    )
    seconds = time.perf_counter() - started
    reached = first_reaching(run_dir / "episodes.csv", threshold, window)
    solved = sum(step is not None for step in reached.values())
    record = {
        "env": env,
        "critic": critic,
        "steps": steps,
        "threshold": threshold,
        "window": window,
        "solved_seeds": solved,
        "first_step": reached,
        "seconds": round(seconds, 1),
    }
    print(json.dumps(record))
    if os.environ.get("ONLINE_LEARNING_LOG"):
        with open(os.environ["ONLINE_LEARNING_LOG"], "a") as f:
            f.write(json.dumps(record) + "\n")
    if critic == "gitd":
        assert solved >= 3, record
