"""Runs as files: ``--config FILE`` (TOML or a run's config.json), flags over the file, reruns.

A run started from a TOML file writes a ``config.json`` that, given back to ``--config`` with
another ``--out``, runs the same resolved config and, on the CPU, the same numbers.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from offline_gitd.cli import main
from tests.minari_fixtures import record_into_new_root

DATASET = "tests/cartpole/random-v0"
# Columns that time a run rather than say what it computed.
TIMING = ("seconds", "time", "per_sec", "sps")


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory) -> Path:
    return record_into_new_root(tmp_path_factory.mktemp("minari"), DATASET, "CartPole-v1", steps=600)


@pytest.fixture
def dataset(minari_root, monkeypatch) -> str:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    return f"minari:{DATASET}"


def _toml(path: Path, **fields) -> Path:
    path.write_text("".join(f"{name} = {json.dumps(value)}\n" for name, value in fields.items()))
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return [
            {name: value for name, value in row.items() if not any(word in name for word in TIMING)}
            for row in csv.DictReader(f)
        ]


QUIET = ["--no-progress", "--no-tensorboard"]


@pytest.mark.e2e
def test_a_config_json_reruns_its_run(dataset: str, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    spec = _toml(
        tmp_path / "run.toml",
        dataset=dataset,
        out=str(first),
        critic="gitd",
        K=2,
        T=20,
        mlp_hidden="16,16",
        epochs=1,
        steps_per_epoch=40,
        eval_episodes=1,
        seeds="0",
        batch_size=16,
        updates_per_call=20,
    )
    assert main(["train", "--config", str(spec), *QUIET]) == 0
    assert main(["train", "--config", str(first / "config.json"), "--out", str(second), *QUIET]) == 0
    a, b = (json.loads((run / "config.json").read_text()) for run in (first, second))
    assert {**a["config"], "out": None} == {**b["config"], "out": None}
    assert a["config"]["K"] == 2 and a["config"]["lr"] is not None  # resolved, not the file's blanks
    assert a["config_hash"] == b["config_hash"] and a["run_id"] != b["run_id"]
    metrics = _rows(first / "metrics.csv")
    assert metrics and "loss" in metrics[0] and metrics == _rows(second / "metrics.csv")
    keys = ("seed", "step", "return", "critic", "K")
    scores = [[{k: row[k] for k in keys} for row in _rows(run / "results.csv")] for run in (first, second)]
    assert scores[0] == scores[1] and scores[0]


def test_flags_override_the_file(dataset: str, tmp_path: Path, capsys) -> None:
    spec = _toml(tmp_path / "run.toml", dataset=dataset, out=str(tmp_path / "a"), critic="gitd")
    # The file's dataset is fine; the typed one is not, and it is the one that counts.
    assert main(["train", "--config", str(spec), "--dataset", "nope:x", *QUIET]) == 2
    assert "nope" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    "command, text, message",
    [
        (["train"], 'criticc = "gitd"\nKK = 3\n', "unknown keys 'KK', 'criticc'"),
        (["train"], 'K = "five"\n', "K: expected int, got 'five'"),
        (["train"], 'critic = "nope"\n', "critic: 'nope' is not one of td, tdrc, itd, gitd"),
        (["train"], "critic = \n", "not valid TOML"),
        (["online", "dqn"], 'env = "CartPole-v1"\ndataset = "minari:x"\n', "unknown key 'dataset'"),
        (["online", "dqn"], 'utd = "1/0"\n', "utd: expected a number or a fraction"),
        (["collect"], 'env = "CartPole-v1"\nsteps = 10\nout = "x/y-v0"\nwho = 1\n', "unknown key 'who'"),
        (["collect"], 'steps = 10\nout = "x/y-v0"\n', "collect needs ENV_ID"),
        (["collect"], 'env = "CartPole-v1"\nsteps = "ten"\nout = "x/y-v0"\n', "steps: expected int"),
    ],
)
def test_bad_files_are_refused_in_one_line(command, text, message, tmp_path: Path, capsys) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    assert main([*command, "--config", str(spec)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_an_online_config_json_names_its_algorithm(tmp_path: Path, capsys) -> None:
    saved = tmp_path / "config.json"
    saved.write_text(json.dumps({"config": {"algo": "dqn", "env": "CartPole-v1", "out": str(tmp_path / "a")}}))
    assert main(["online", "sac", "--config", str(saved)]) == 2
    assert "is an online dqn config: run it with online dqn" in capsys.readouterr().err
    assert main(["online", "dqn", "--config", str(saved), "--resume"]) == 2
    assert "--config starts a new run" in capsys.readouterr().err


@pytest.mark.e2e
def test_online_and_collect_run_from_files(tmp_path: Path, monkeypatch) -> None:
    """``online`` from TOML, then again from its config.json: same returns; ``collect`` from TOML."""
    first, second = tmp_path / "a", tmp_path / "b"
    spec = _toml(
        tmp_path / "online.toml",
        env="CartPole-v1",
        out=str(first),
        critic="itd",
        K=2,
        steps=200,
        mlp_hidden="16,16",
        batch_size=16,
        initial_samples=100,
        log_every=100,
        checkpoint_every=200,
        utd="1/2",
    )
    assert main(["online", "dqn", "--config", str(spec), *QUIET]) == 0
    assert main(["online", "dqn", "--config", str(first / "config.json"), "--out", str(second), *QUIET]) == 0
    assert _rows(first / "episodes.csv") == _rows(second / "episodes.csv")
    assert _rows(first / "metrics.csv") == _rows(second / "metrics.csv")

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    collect = _toml(tmp_path / "collect.toml", env="CartPole-v1", steps=60, out="tests/files/random-v0")
    assert main(["collect", "--config", str(collect), "--policy", "random", "--no-progress"]) == 0
    assert (tmp_path / "minari" / "tests" / "files" / "random-v0").is_dir()
