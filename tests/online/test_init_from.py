"""Offline-to-online: ``online dqn --init-from RUN_DIR``, and the Python API that runs both halves.

The offline run is trained with ``offline_gitd.train`` (the documented API), the online run with the
command line; the online run's starting state is compared with the offline checkpoint it names.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

import offline_gitd
from offline_gitd.cli import main
from offline_gitd.data.episode_store import EpisodeStore
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.init_from import load_origin, resolve_origin, seed_replay
from offline_gitd.online.train import build_family, resolve_config
from tests.minari_fixtures import record_into_new_root
from tests.support.argv import online_cartpole

DATASET = "tests/cartpole/random-v0"
QUIET = ["--no-progress", "--no-tensorboard"]
ONLINE = online_cartpole(*QUIET, steps=100, batch_size=16, log_every=50, checkpoint_every=100, initial_samples=0)


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory) -> Path:
    return record_into_new_root(tmp_path_factory.mktemp("minari"), DATASET, "CartPole-v1", steps=400)


@pytest.fixture(autouse=True)
def dataset_found(minari_root: Path, monkeypatch) -> None:
    """Reading the offline run's dataset (--with-dataset, its evaluation env) finds it here."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory, minari_root: Path) -> Path:
    """A tiny offline Gi-TD run (two seeds, one epoch) trained through ``offline_gitd.train``."""
    root = minari_root
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(root))
        out = tmp_path_factory.mktemp("runs") / "offline"
        run = offline_gitd.train(
            {
                "dataset": f"minari:{DATASET}",
                "out": str(out),
                "critic": "gitd",
                "K": 2,
                "T": 20,
                "mlp_hidden": "16,16",
                "epochs": 1,
                "steps_per_epoch": 30,
                "eval_episodes": 1,
                "seeds": "0-1",
                "batch_size": 16,
                "updates_per_call": 15,
            },
            progress=False,
            tensorboard=False,
        )
    assert run.checkpoints() == [1] and len(run.metrics) == 2
    return out


@pytest.mark.e2e
def test_the_online_state_is_the_offline_checkpoint(offline_run: Path) -> None:
    network = dict(critic="gitd", K=2, mlp_hidden="16,16")
    cfg = OnlineConfig(
        env="CartPole-v1", loop="python", out="-", seeds="0-2", init_from=str(offline_run), init_seed=1, **network
    )
    cfg, info = resolve_config(cfg)
    cfg = resolve_origin(cfg)
    assert cfg.init_epoch == 1 and Path(cfg.init_from).is_absolute()
    family = build_family(cfg, info)
    origin = load_origin(cfg, info, family)
    agent = offline_gitd.load_run(offline_run).agent()
    for online_seed in range(3):  # --seed 1: every seed starts from offline seed 1
        got = jax.tree.map(lambda x: np.asarray(x[online_seed]), origin.state.params)
        want = jax.tree.map(lambda x: np.asarray(x[1]), agent.state.params)
        assert jax.tree.all(jax.tree.map(np.array_equal, got, want))
        moments = jax.tree.map(
            lambda a, b: np.array_equal(a[online_seed], b[1]), origin.state.opt_state, agent.state.opt_state
        )
        assert jax.tree.all(moments)
    assert np.all(np.asarray(origin.state.step) == 0) and int(np.asarray(agent.state.step)[1]) == 30
    assert origin.record["seeds"] == {"0": 1, "1": 1, "2": 1} and origin.record["epoch"] == 1


def test_seed_replay_copies_every_transition() -> None:
    source = EpisodeStore((3,), np.float32)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(9, 3)).astype(np.float32)
    source.add_episode(obs[:4], np.array([0, 1, 0]), np.array([1.0, 2.0, 3.0]), np.array([False, False, True]))
    source.add_episode(obs[4:], np.array([1, 1, 0, 1]), np.array([5.0, -4.0, 0.5, 1.0]), np.zeros(4, bool))
    target = EpisodeStore((3,), np.float32)
    target.add(obs[0], 1, 1.0, True)  # the online replay may already hold rows
    seed_replay(target, source, clip_rewards=True)
    assert target.num_episodes == 3 and target.num_transitions == 1 + source.num_transitions
    np.testing.assert_array_equal(target.obs[1:], source.obs)
    np.testing.assert_array_equal(target.rewards[1:], np.clip(source.rewards, -1, 1))
    np.testing.assert_array_equal(target.terminals[1:], source.terminals)


@pytest.mark.e2e
def test_init_from_runs_and_records_its_origin(offline_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "online"
    argv = [*ONLINE, "--init-from", str(offline_run), "--with-dataset", "--seeds", "0-1", "--out", str(out)]
    assert main(argv) == 0
    saved = json.loads((out / "config.json").read_text())
    config, origin = saved["config"], saved["init_from"]
    offline = json.loads((offline_run / "config.json").read_text())
    assert (config["critic"], config["K"], config["mlp_hidden"]) == ("gitd", 2, "16,16")  # taken from the run
    assert config["init_from"] == str(offline_run) and config["init_epoch"] == 1 and config["with_dataset"]
    assert origin["run_id"] == offline["run_id"] and origin["config_hash"] == offline["config_hash"]
    assert origin["dataset_transitions"] > 300 and origin["seeds"] == {"0": 0, "1": 1}
    # The run is a file like any other: its config.json runs it again.
    again = tmp_path / "again"
    assert main(["online", "dqn", "--config", str(out / "config.json"), "--out", str(again), *QUIET]) == 0
    assert json.loads((again / "config.json").read_text())["init_from"]["epoch"] == 1


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--critic", "td"], "its critic is 'gitd', this run's is 'td'"),
        (["--mlp-hidden", "32,32"], "its mlp_hidden is '16,16', this run's is '32,32'"),
        (["--epoch", "7"], "--epoch 7: "),
        (["--seed", "5"], "it has seeds 0, 1, not 5; pass --seed S"),
    ],
)
def test_mismatches_are_one_line(offline_run: Path, tmp_path: Path, capsys, extra, message) -> None:
    argv = [*ONLINE, "--init-from", str(offline_run), "--out", str(tmp_path / "o"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_init_from_needs_an_offline_run(tmp_path: Path, capsys) -> None:
    assert main([*ONLINE, "--epoch", "1", "--out", str(tmp_path / "o")]) == 2
    assert "--epoch says how to start from an offline run: it needs --init-from" in capsys.readouterr().err
    assert main([*ONLINE, "--init-from", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "not a run directory" in capsys.readouterr().err


@pytest.mark.slow
def test_sac_starts_from_an_offline_cql_sac_run(tmp_path: Path, monkeypatch, capsys) -> None:
    """Continuous actions: critics, actor and temperature of a CQL-SAC run start an online SAC run;
    another env's spaces do not fit, in one line."""
    from tests.minari_fixtures import record_random_dataset

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    record_random_dataset("tests/pendulum/random-v0", "Pendulum-v1", steps=200)
    offline = tmp_path / "offline"
    offline_gitd.train(
        {
            "dataset": "minari:tests/pendulum/random-v0",
            "out": str(offline),
            "critic": "gitd",
            "K": 2,
            "mlp_hidden": "16,16",
            "epochs": 1,
            "steps_per_epoch": 10,
            "eval_episodes": 1,
            "seeds": "0",
            "batch_size": 16,
            "updates_per_call": 10,
        },
        progress=False,
        tensorboard=False,
    )
    out = tmp_path / "online"
    argv = ["online", "sac", "--env", "Pendulum-v1", "--init-from", str(offline), "--with-dataset", "--seeds", "0"]
    argv += ["--steps", "40", "--batch-size", "16", "--initial-samples", "0", "--log-every", "20", *QUIET]
    assert main([*argv, "--checkpoint-every", "40", "--out", str(out)]) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["config"]["mlp_hidden"] == "16,16" and saved["init_from"]["dataset_transitions"] == 200
    other = ["online", "sac", "--env", "MountainCarContinuous-v0", "--init-from", str(offline), "--steps", "40"]
    other += ["--initial-samples", "0"]
    assert main([*other, "--out", str(tmp_path / "bad"), *QUIET]) == 2
    assert "its checkpoint does not fit online sac on MountainCarContinuous-v0" in capsys.readouterr().err
