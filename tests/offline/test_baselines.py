"""The offline baselines beside CQL (bc, td3bc, iql): their config rules, their runs, their rows.

The config checks are instant; the pipeline runs (``e2e``) train each algorithm for a few updates
on small real Minari datasets (CartPole for discrete actions, Pendulum for continuous ones),
reload and evaluate the runs from their directories, and submit their rows to one board beside CQL.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import offline_gitd
from offline_gitd.cli import main
from offline_gitd.errors import ConfigError
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.offline.train import resume_config
from offline_gitd.sweeps.spec import expand, load_spec
from tests.minari_fixtures import record_random_dataset

CARTPOLE, PENDULUM = "tests/cartpole/random-v0", "tests/pendulum/random-v0"
QUIET = ["--no-progress", "--no-tensorboard"]
SMALL = ["--mlp-hidden", "16,16", "--epochs", "1", "--steps-per-epoch", "20", "--eval-episodes", "1"]
SMALL += ["--batch-size", "16", "--updates-per-call", "10", "--seeds", "0-1", *QUIET]


def config(algo: str, **fields) -> OfflineConfig:
    return OfflineConfig(dataset="minari:x", out="run", algo=algo, **fields)


@pytest.mark.parametrize(
    "algo, fields, domain, message",
    [
        ("bc", dict(cql_alpha=1.0), "gym", "--cql-alpha is for --algo cql, not --algo bc"),
        ("td3bc", dict(cql_alpha=0.0), "continuous", "--cql-alpha is for --algo cql, not --algo td3bc"),
        ("iql", dict(bc_alpha=2.5), "continuous", "--bc-alpha is for --algo td3bc, not --algo iql"),
        ("cql", dict(expectile=0.7), "gym", "--expectile is for --algo iql, not --algo cql"),
        ("td3bc", {}, "gym", "--algo td3bc is for continuous actions; this dataset's are discrete"),
        ("iql", {}, "atari", "--algo iql is for continuous actions; this dataset's are discrete"),
        ("bc", dict(critic="td"), "gym", "--algo bc trains no critic: drop --critic td"),
        ("bc", dict(K=3), "continuous", "--algo bc trains no critic: drop --K"),
        ("bc", dict(beta=0.5), "gym", "--algo bc trains no critic: drop --beta"),
        ("cql", dict(critic="none"), "gym", "--critic none is for --algo bc; --algo cql trains a critic"),
        ("td3bc", dict(bc_alpha=0.0), "continuous", "--bc-alpha must be > 0"),
        ("td3bc", dict(policy_delay=0), "continuous", "--policy-delay must be >= 1"),
        ("iql", dict(expectile=1.0), "continuous", "--expectile must be in (0, 1)"),
    ],
)
def test_flags_an_algorithm_does_not_take_are_refused_in_one_line(algo, fields, domain, message) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        config(algo, **fields).resolve(domain)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_each_algorithm_takes_its_papers_values() -> None:
    td3bc = config("td3bc").resolve("continuous")
    assert (td3bc.critic, td3bc.K, td3bc.cql_alpha) == ("gitd", 5, None)
    assert (td3bc.bc_alpha, td3bc.policy_noise, td3bc.noise_clip, td3bc.policy_delay) == (2.5, 0.2, 0.5, 2)
    assert (td3bc.lr, td3bc.batch_size, td3bc.mlp_hidden, td3bc.tau, td3bc.T) == (3e-4, 256, "256,256", 5e-3, 1)
    iql = config("iql").resolve("continuous")
    assert (iql.critic, iql.K, iql.expectile, iql.iql_temperature, iql.bc_alpha) == ("td", 1, 0.7, 3.0, None)
    assert (iql.lr, iql.batch_size, iql.tau) == (3e-4, 256, 5e-3)
    bc = config("bc").resolve("continuous")
    assert (bc.critic, bc.K, bc.T, bc.tau, bc.heads, bc.cql_alpha) == ("none", None, None, None, None, None)
    assert (bc.lr, bc.batch_size, bc.mlp_hidden) == (3e-4, 256, "256,256")
    discrete_bc = config("bc").resolve("gym")
    cql = config("cql").resolve("gym")
    assert (discrete_bc.lr, discrete_bc.batch_size, discrete_bc.torso) == (cql.lr, cql.batch_size, cql.torso)
    assert config("cql").resolve("continuous").cql_alpha == 5.0


@pytest.mark.parametrize("algo, domain", [("cql", "gym"), ("bc", "gym"), ("bc", "continuous"), ("td3bc", "continuous")])
def test_a_resolved_config_resolves_to_itself(algo: str, domain: str) -> None:
    """config.json -> run again: what a run recorded is accepted and means the same run."""
    resolved = config(algo).resolve(domain)
    again = OfflineConfig(**json.loads(json.dumps(dataclasses.asdict(resolved)))).resolve(domain)
    assert again == resolved and again.config_hash() == resolved.config_hash()


def test_board_names_and_columns() -> None:
    assert config("bc").resolve("gym").board_identity() == ("none", 1, 0.0)
    td3bc = config("td3bc", critic="tdrc").resolve("continuous")
    assert td3bc.board_identity() == ("tdrc", 1, 1.0)
    assert td3bc.algorithm_name("continuous") == "td3bc"
    assert config("cql", cql_alpha=0.0).resolve("gym").algorithm_name("discrete") == "offline-dqn"
    assert config("td3bc", bc_alpha=5.0).resolve("continuous").method_config("continuous") == "bc_alpha=5"


def test_a_grid_may_cross_algorithms(tmp_path: Path) -> None:
    spec = tmp_path / "algos.toml"
    spec.write_text(
        'command = "train"\n[fixed]\ndataset = "minari:tests/cartpole/random-v0"\nseeds = "0-1"\n'
        '[grid]\nalgo = ["cql", "bc"]\nlr = [1e-3, 1e-4]\n'
    )
    plans = expand(load_spec(spec))
    assert sorted((p.fields["algo"], p.fields["lr"]) for p in plans) == [
        ("bc", 1e-4),
        ("bc", 1e-3),
        ("cql", 1e-4),
        ("cql", 1e-3),
    ]
    for plan in plans:
        assert plan.argv[plan.argv.index("--algo") + 1] == plan.fields["algo"]
    refused = tmp_path / "refused.toml"
    refused.write_text(spec.read_text().replace('seeds = "0-1"', 'seeds = "0-1"\ncritic = "td"'))
    with pytest.raises(ConfigError, match="--algo bc trains no critic"):
        expand(load_spec(refused))


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("minari")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(root))
        record_random_dataset(CARTPOLE, "CartPole-v1", steps=600)
        record_random_dataset(PENDULUM, "Pendulum-v1", steps=600)
    return root


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.e2e
def test_bc_trains_on_discrete_data_and_lands_on_a_board_beside_cql(minari_root, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    board = tmp_path / "board.csv"
    for algo in ("bc", "cql"):
        out = tmp_path / algo
        assert main(["train", "--dataset", f"minari:{CARTPOLE}", "--algo", algo, "--out", str(out), *SMALL]) == 0
        assert main(["leaderboard", "submit", str(out), "--board", str(board), "--allow-new-env"]) == 0
    submitted = {(r["algorithm"], r["critic"], r["K"], r["beta"]) for r in rows(board)}
    assert submitted == {("bc", "none", "1", "0.0"), ("cql", "gitd", "5", "1.0")}
    bc = offline_gitd.load_run(tmp_path / "bc")
    assert bc.config.critic == "none" and bc.config.cql_alpha is None
    returns = bc.evaluate(episodes=2, seed=1)
    assert returns.shape == (2,) and np.all(returns >= 1)
    assert main(["evaluate", str(tmp_path / "bc"), "--episodes", "1"]) == 0
    assert main(["train", "--out", str(tmp_path / "bc"), "--resume", "--epochs", "2", *QUIET]) == 0
    assert sorted(set(offline_gitd.load_run(tmp_path / "bc").results["step"])) == [20, 40]
    capsys.readouterr()
    online = ["online", "dqn", "--env", "CartPole-v1", "--init-from", str(tmp_path / "bc"), "--steps", "10"]
    assert main([*online, "--out", str(tmp_path / "online"), *QUIET]) == 2
    assert "an --algo bc run; online dqn and sac start from a cql run" in capsys.readouterr().err
    for flags, message in (
        (["--algo", "td3bc"], "--algo td3bc is for continuous actions; this dataset's are discrete"),
        (["--algo", "bc", "--cql-alpha", "1"], "--cql-alpha is for --algo cql, not --algo bc"),
    ):
        argv = ["train", "--dataset", f"minari:{CARTPOLE}", *flags, "--out", str(tmp_path / "refused"), *QUIET]
        assert main(argv) == 2
        assert message in capsys.readouterr().err
        assert not (tmp_path / "refused").exists()


@pytest.mark.e2e
def test_continuous_baselines_train_reload_and_land_on_a_board_beside_cql(
    minari_root, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    board = tmp_path / "board.csv"
    runs = {
        "cql": ["--algo", "cql", "--critic", "td"],
        "bc": ["--algo", "bc"],
        "td3bc": ["--algo", "td3bc", "--critic", "gitd", "--K", "2"],
        "iql": ["--algo", "iql"],
    }
    for name, flags in runs.items():
        out = tmp_path / name
        assert main(["train", "--dataset", f"minari:{PENDULUM}", *flags, "--out", str(out), *SMALL]) == 0, name
        assert main(["leaderboard", "submit", str(out), "--board", str(board), "--allow-new-env"]) == 0
    submitted = {(r["algorithm"], r["critic"], r["K"]) for r in rows(board)}
    assert submitted == {("cql", "td", "1"), ("bc", "none", "1"), ("td3bc", "gitd", "2"), ("iql", "td", "1")}
    capsys.readouterr()
    # A few updates on random Pendulum data: BC, the baseline, may be within noise of zero, which
    # flags its env (docs/leaderboard.md#flagged-envs); it is kept here on purpose.
    show = ["leaderboard", "show", "--board", str(board), "--baseline", "bc:none", "--reps", "20"]
    assert main([*show, "--keep-flagged-envs"]) == 0
    table = capsys.readouterr().out
    assert all(method in table for method in ("cql:td", "bc:none", "td3bc:gitd", "iql:td"))
    figures = tmp_path / "figures"
    plot = ["leaderboard", "plot", "--board", str(board), "--out", str(figures), "--reps", "20", "--keep-flagged-envs"]
    assert main(plot) == 0
    assert any(figures.iterdir())
    for name in runs:
        run = offline_gitd.load_run(tmp_path / name)
        act = run.policy(seed=1)
        action = act(np.zeros(3, np.float32))
        assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0, name  # Pendulum's torque box
        assert np.isfinite(run.evaluate(episodes=1)).all(), name


@pytest.mark.e2e
def test_the_python_api_trains_a_baseline_and_its_config_file_runs_it_again(minari_root, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    # SMALL's sizes and the td3bc run of the test above: its programs come from the compilation cache
    small = dict(mlp_hidden="16,16", epochs=1, steps_per_epoch=20, eval_episodes=1, batch_size=16, seeds="0-1")
    small.update(updates_per_call=10, critic="gitd", K=2)
    run = offline_gitd.train(
        {"dataset": f"minari:{PENDULUM}", "algo": "td3bc", "out": str(tmp_path / "a"), **small},
        progress=False,
        tensorboard=False,
    )
    assert run.config.algo == "td3bc" and run.config.bc_alpha == 2.5
    again = tmp_path / "b"
    assert main(["train", "--config", str(tmp_path / "a" / "config.json"), "--out", str(again), *QUIET]) == 0
    first, second = offline_gitd.load_run(tmp_path / "a"), offline_gitd.load_run(again)
    assert first.results["return"].tolist() == second.results["return"].tolist()
    assert first.results["config_hash"].tolist() == second.results["config_hash"].tolist()


def test_the_baselines_sweep_is_cql_bc_td3bc_and_iql_on_a_collected_hopper_dataset(tmp_path, capsys) -> None:
    spec = Path(__file__).resolve().parents[2] / "sweeps" / "offline_baselines.toml"
    plans = expand(load_spec(spec))
    methods = {(p.fields["algo"], p.fields.get("critic")) for p in plans}
    assert methods == {("cql", "td"), ("bc", None), ("td3bc", "td"), ("td3bc", "gitd"), ("iql", "td")}
    assert {p.fields["dataset"] for p in plans} == {"minari:offline_gitd/Hopper-v5/sac-200000-v0"}
    assert {p.board for p in plans} == {"leaderboard.csv"}
    assert main(["sweep", str(spec), "--out", str(tmp_path / "sweep"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "5 runs; nothing was run (--dry-run)" in printed
    assert "offline_gitd collect Hopper-v5 --steps 200000 --out offline_gitd/Hopper-v5/sac-200000-v0" in printed
    assert not (tmp_path / "sweep").exists() or not any((tmp_path / "sweep").rglob("config.json"))


# Each algorithm's own parameters were fields of OfflineConfig before they moved to their records'
# params dataclasses: a config.json of then holds every algorithm's, the others' null.
BEFORE_RECORDS = dict.fromkeys(
    ("bc_alpha", "policy_noise", "noise_clip", "policy_delay", "expectile", "iql_temperature")
)


@pytest.mark.parametrize(
    "algo, recorded_hash",
    # the hashes the package computed for these configs before the parameters moved
    [("td3bc", "26cf3e058409d902"), ("iql", "781fe1da12bd9709"), ("cql", "1c4a1da17ad3b793")],
)
def test_a_config_json_from_before_the_params_moved_resumes_with_its_hash(tmp_path, algo, recorded_hash) -> None:
    resolved = config(algo, torso="mlp").resolve("continuous")
    written = {**BEFORE_RECORDS, **resolved.to_dict(), "out": str(tmp_path)}
    (tmp_path / "config.json").write_text(json.dumps({"config": written}))
    resumed = resume_config(tmp_path, {"epochs": 200})
    assert resumed.config_hash() == resolved.config_hash() == recorded_hash
    assert resumed.epochs == 200 and resumed.params == resolved.params
    assert {k: v for k, v in written.items() if v is not None} == {
        k: v for k, v in dataclasses.replace(resumed, epochs=resolved.epochs).to_dict().items() if v is not None
    }
    other = "expectile" if algo == "td3bc" else "bc_alpha"
    with pytest.raises(ConfigError, match=f"--{other.replace('_', '-')} 0.5 differs from the run's {other} = None"):
        resume_config(tmp_path, {other: 0.5})


def test_a_cql_run_hashes_as_before_the_baselines_existed() -> None:
    """The baselines' fields, unset, do not enter the hash: rows of CQL runs written by earlier
    versions (this hash, computed by the package before those fields existed) pool with new ones."""
    assert config("cql", critic="itd").resolve("gym").config_hash() == "1ae93956ea199b9d"
    assert config("cql", critic="td", T=5).resolve("continuous").config_hash() == "75aa4a6f4f8fe226"
    assert (
        config("td3bc").resolve("continuous").config_hash()
        != config("td3bc", bc_alpha=3.0).resolve("continuous").config_hash()
    )
