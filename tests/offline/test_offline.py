"""The offline learner: published CQL, seeds in one program, exact resume, divergence, CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.critics import CriticConfig, critic_optimizer, make_network
from offline_gitd.learners.discrete import discrete_loss, init_discrete_state
from offline_gitd.offline import train as offline_learner
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.rundir.checkpoints import Checkpoints
from tests.critic_fixtures import N_ACTIONS, random_batch
from tests.minari_fixtures import record_into_new_root

DATASET = "tests/cartpole/random-v0"


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory) -> Path:
    return record_into_new_root(tmp_path_factory.mktemp("minari"), DATASET, "CartPole-v1", steps=1500)


@pytest.fixture
def dataset(minari_root, monkeypatch) -> str:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    return f"minari:{DATASET}"


def small_config(dataset: str, out: Path, **overrides) -> OfflineConfig:
    values = dict(
        dataset=dataset,
        out=str(out),
        critic="gitd",
        K=3,
        T=20,
        mlp_hidden="16,16",
        epochs=2,
        steps_per_epoch=60,
        eval_episodes=2,
        seeds="0-1",
        updates_per_call=25,
        batch_size=16,
    )
    values.update(overrides)
    return OfflineConfig(**values)


def final_state(run_dir: Path, like_cfg: OfflineConfig):
    """Restore the last checkpoint of ``run_dir`` as a pytree of numpy arrays."""
    ckpt = Checkpoints(run_dir)
    cfg = offline_learner.resolve_config(like_cfg)
    from offline_gitd.data.datasets import open_offline_data

    family = offline_learner.build_family(cfg, open_offline_data(cfg))
    like = jax.vmap(family.init)(jax.vmap(jax.random.PRNGKey)(jnp.asarray(cfg.seed_list)))
    return jax.tree.map(np.asarray, ckpt.restore(ckpt.latest(), like))


def test_td_cql_with_one_head_is_published_cql() -> None:
    """K = 1 TD-CQL equals Kumar et al. (2020)'s discrete CQL(H) loss, value and gradients:
    1/2 E[(r + g max Q_target(s') - Q(s, a))^2] + alpha E[logsumexp_a Q(s, .) - Q(s, a)]."""
    cfg, alpha = CriticConfig(kind="td"), 0.7
    net = make_network(cfg, N_ACTIONS, "mlp", mlp_hidden=(8,))
    batch = random_batch(0)
    state = init_discrete_state(cfg, net, critic_optimizer(cfg, 1e-3, 1e-8), jax.random.PRNGKey(0), batch.obs)
    target = jax.tree.map(lambda x: x + 0.05, state.frozen["target"])  # theta_0 != theta_1
    frozen = {**state.frozen, "target": target}

    def published(params):
        q = net.q_values(params, batch.obs)[0]
        q_data = q[jnp.arange(q.shape[0]), batch.action]
        y = batch.reward + batch.discount * net.q_values(target, batch.next_obs)[0].max(-1)
        bellman = 0.5 * jnp.mean(batch.weight * (jax.lax.stop_gradient(y) - q_data) ** 2)
        return bellman + alpha * jnp.mean(jax.scipy.special.logsumexp(q, axis=-1) - q_data)

    ours = lambda p: discrete_loss(cfg, net, alpha, p, frozen, batch)[0]  # noqa: E731
    np.testing.assert_allclose(ours(state.params), published(state.params), rtol=1e-6)
    for a, b in zip(
        jax.tree.leaves(jax.grad(ours)(state.params)), jax.tree.leaves(jax.grad(published)(state.params)), strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.e2e
def test_run_writes_config_metrics_results_and_checkpoints(dataset, tmp_path) -> None:
    run_dir = offline_learner.train(small_config(dataset, tmp_path / "run"), progress=False)
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["config"]["cql_alpha"] == 0.1 and saved["config"]["lr"] == 5e-4  # gym domain defaults
    with (run_dir / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "suite", "env", "algorithm", "critic", "K", "beta", "seed", "step", "return",
        "run_id", "config_hash", "package_version", "created_at", "method_config",
        "commit", "dirty", "diff_sha256", "data_sha256", "device",
    ]  # fmt: skip
    assert rows[0]["data_sha256"] and rows[0]["device"]  # the row names its data and machine
    assert rows[0]["method_config"] == "T=20 batch_size=16 eval_episodes=2 mlp_hidden=16,16 steps_per_epoch=60"
    assert sorted((r["seed"], r["step"]) for r in rows) == [("0", "120"), ("0", "60"), ("1", "120"), ("1", "60")]
    assert all(np.isfinite(float(r["return"])) and float(r["return"]) > 0 for r in rows)
    with (run_dir / "metrics.csv").open() as f:
        metrics = list(csv.DictReader(f))
    assert {"loss", "bellman_error_3", "q_mean_1", "h_mean_2", "cql_penalty"} <= set(metrics[0])
    assert Checkpoints(run_dir).latest() == 2


@pytest.mark.e2e
def test_seeds_in_one_program_match_each_seed_alone(dataset, tmp_path) -> None:
    together = small_config(dataset, tmp_path / "together", seeds="0-2", epochs=1, eval_episodes=0)
    alone = small_config(dataset, tmp_path / "alone", seeds="2", epochs=1, eval_episodes=0)
    offline_learner.train(together, progress=False)
    offline_learner.train(alone, progress=False)
    all_seeds, seed_two = final_state(Path(together.out), together), final_state(Path(alone.out), alone)
    for a, b in zip(jax.tree.leaves(all_seeds.params), jax.tree.leaves(seed_two.params), strict=True):
        np.testing.assert_allclose(a[2], b[0], rtol=2e-4, atol=2e-6)
    assert not np.allclose(jax.tree.leaves(all_seeds.params)[0][0], jax.tree.leaves(all_seeds.params)[0][2])


@pytest.mark.parametrize("driver", ["scan", "loop"])
@pytest.mark.e2e
def test_resume_continues_bit_identically(dataset, tmp_path, driver: str) -> None:
    straight = small_config(dataset, tmp_path / "straight", driver=driver)
    offline_learner.train(straight, progress=False)
    first = small_config(dataset, tmp_path / "resumed", driver=driver, epochs=1)
    offline_learner.train(first, progress=False)
    resumed = offline_learner.resume_config(Path(first.out), {"epochs": 2})
    offline_learner.train(resumed, resume=True, progress=False)
    a, b = final_state(Path(straight.out), straight), final_state(Path(first.out), straight)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)
    with (Path(first.out) / "results.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 4  # 2 epochs x 2 seeds, none duplicated


@pytest.mark.e2e
def test_scan_and_loop_drivers_agree(dataset, tmp_path) -> None:
    runs = {}
    for driver in ("scan", "loop"):
        cfg = small_config(dataset, tmp_path / driver, driver=driver, epochs=1, eval_episodes=0)
        offline_learner.train(cfg, progress=False)
        runs[driver] = final_state(Path(cfg.out), cfg)
    for x, y in zip(jax.tree.leaves(runs["scan"].params), jax.tree.leaves(runs["loop"].params), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6)


@pytest.mark.e2e
def test_non_finite_loss_stops_naming_the_step_and_keeps_the_checkpoint(dataset, tmp_path, monkeypatch, capsys) -> None:
    from offline_gitd.data import datasets

    real_open = datasets.open_offline_data

    class PoisonedReplay:
        """Corrupt every seed's data from its 71st update on (epoch 2, after 60 steps per epoch)."""

        def __init__(self, replay):
            self.replay, self.drawn, self.calls = replay, [0, 0], 0

        def sample(self, batch_size, rng):  # the one-sample shape probe
            return self.replay.sample(batch_size, rng)

        def sample_chunk(self, batch_size, count, rng):
            chunk = self.replay.sample_chunk(batch_size, count, rng)
            seed = self.calls % 2  # each chunk asks seed 0, then seed 1
            done, self.calls = self.drawn[seed], self.calls + 1
            self.drawn[seed] += count
            reward = chunk.reward.copy()
            reward[np.arange(done, done + count) >= 70] = np.nan
            return chunk._replace(reward=reward)

    def poisoned_open(cfg, opened=None):
        data = real_open(cfg, opened)
        return data.__class__(**{**data.__dict__, "replay": PoisonedReplay(data.replay)})

    monkeypatch.setattr(datasets, "open_offline_data", poisoned_open)
    cfg = small_config(dataset, tmp_path / "nan", eval_episodes=0)
    code = main(["train", *_flags(cfg), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "loss became nan at gradient step 71 (seed 0)" in err[0] and "epoch 1" in err[0]
    assert Checkpoints(Path(cfg.out)).latest() == 1


def _flags(cfg: OfflineConfig) -> list[str]:
    flags = []
    for name, value in cfg.to_dict().items():
        if value is not None:
            flag = {"K": "--K", "T": "--T", "D": "--D"}.get(name, "--" + name.replace("_", "-"))
            flags += [flag, str(value)]
    return flags


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dataset", "rlu-atari:Pongg/1"], "unknown"),
        (["--dataset", "hf:foo"], "unknown dataset id"),
        (["--dataset", "minari:nowhere/none-v0"], "no local Minari dataset"),
        (["--critic", "td", "--K", "3"], "K must be 1"),
        (["--seeds", "3-1"], "--seeds"),
        (["--fraction", "1.5"], "--fraction"),
    ],
)
def test_bad_input_is_one_line_before_any_work(dataset, tmp_path, capsys, argv, message) -> None:
    base = ["train", "--dataset", dataset, "--out", str(tmp_path / "bad")]
    code = main(base + argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "bad").exists()


@pytest.mark.e2e
def test_existing_run_is_not_overwritten(dataset, tmp_path, capsys) -> None:
    cfg = small_config(dataset, tmp_path / "once", epochs=1, eval_episodes=0)
    offline_learner.train(cfg, progress=False)
    assert main(["train", *_flags(cfg), "--no-progress"]) == 2
    assert "--resume" in capsys.readouterr().err


def test_a_run_opens_its_minari_dataset_once(dataset, tmp_path, monkeypatch) -> None:
    """The config is resolved and the transitions are read from one opened dataset."""
    import minari

    real_load, opened = minari.load_dataset, []

    def counting_load(dataset_id, *args, **kwargs):
        opened.append(dataset_id)
        return real_load(dataset_id, *args, **kwargs)

    monkeypatch.setattr(minari, "load_dataset", counting_load)
    cfg = small_config(dataset, tmp_path / "once", epochs=1, steps_per_epoch=5, eval_episodes=0, seeds="0")
    offline_learner.train(cfg, progress=False)
    assert opened == [DATASET]
